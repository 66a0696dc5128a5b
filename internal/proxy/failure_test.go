package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/summarize"
	"github.com/condense-dev/condense/internal/testutil/redistest"
	"github.com/condense-dev/condense/internal/upstreamfake"
	"github.com/condense-dev/condense/internal/wire"
)

func post(t *testing.T, url, body string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func TestMalformedJSONIsProviderShaped400(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	resp, b := post(t, r.http.URL+"/v1/messages", `{"model":"x","messages":[`, nil)
	if resp.StatusCode != 400 || gjson.GetBytes(b, "type").Str != "error" || gjson.GetBytes(b, "error.type").Str != "invalid_request_error" || gjson.GetBytes(b, "error.message").Str == "" {
		t.Fatalf("anthropic: %d %s", resp.StatusCode, b)
	}
	resp, b = post(t, r.http.URL+"/v1/chat/completions", `{"model":"x","messages":"nope"}`, nil)
	if resp.StatusCode != 400 || gjson.GetBytes(b, "error.type").Str != "invalid_request_error" || !gjson.GetBytes(b, "error.param").Exists() {
		t.Fatalf("openai: %d %s", resp.StatusCode, b)
	}
	if n := len(r.up.Requests()); n != 0 {
		t.Fatalf("malformed requests must not reach upstream (%d did)", n)
	}
}

func TestBodyOverLimitIs413(t *testing.T) {
	r := newRig(t, nil, nil, func(o *Options) { o.MaxBodyBytes = 4096 })
	_, err := r.anthropic("big").Messages.New(context.Background(), aParams([]anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(strings.Repeat("x", 5000)))}))
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 413 || !strings.Contains(apiErr.RawJSON(), "request_too_large") {
		t.Fatalf("err = %v", err)
	}
	_, err = r.openai("big").Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(strings.Repeat("y", 5000))}})
	var oErr *openai.Error
	if !errors.As(err, &oErr) || oErr.StatusCode != 413 || oErr.Type != "invalid_request_error" {
		t.Fatalf("openai err = %v", err)
	}
}

// redisRig is a rig whose store is a real redis-server (returned, for the test to stop), with
// a short store timeout.
func redisRig(t *testing.T) (*rig, *redistest.Server) {
	t.Helper()
	rs := redistest.Start(t, nil)
	st, err := store.Open(context.Background(), rs.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return newRig(t, nil, st, func(o *Options) { o.StoreTimeout = 500 * time.Millisecond }), rs
}

// TestStoreUnreachableForwardsUnpruned kills a real Redis under the proxy: requests still
// succeed, byte-identical to what the client sent, and the failure is counted.
func TestStoreUnreachableForwardsUnpruned(t *testing.T) {
	r, rs := redisRig(t)
	rs.Kill()
	r.up.Enqueue(upstreamfake.Reply{Text: "still here"})
	body := `{"model":"claude-test","max_tokens":10,"unknown_field":{"kept":[1,2]},"messages":[{"role":"user","content":"hi"}]}`
	resp, b := post(t, r.http.URL+"/v1/messages", body, map[string]string{"x-api-key": "k", HeaderSession: "down"})
	if resp.StatusCode != 200 || gjson.GetBytes(b, "content.0.text").Str != "still here" {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	rec, _ := r.up.Last()
	if !bytes.Equal(rec.Body, []byte(body)) {
		t.Fatalf("upstream got %s", rec.Body)
	}
	if v := testutil.ToFloat64(r.px.met.FailOpen.WithLabelValues("store")); v != 1 {
		t.Fatalf("fail-open count %v", v)
	}
}

// TestReadyDuringStoreOutage stops a real Redis under the proxy: the proxy still serves
// (unpruned), so /readyz stays 200 and the pod keeps its endpoints; /storez reports the store.
func TestReadyDuringStoreOutage(t *testing.T) {
	r, rs := redisRig(t)
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(r.http.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, p := range []string{"/readyz", "/storez"} {
		if code, b := get(p); code != 200 {
			t.Fatalf("store up: %s %d %s", p, code, b)
		}
	}
	rs.Kill()
	if code, b := get("/readyz"); code != 200 {
		t.Fatalf("store down: /readyz %d %s", code, b)
	}
	if code, b := get("/storez"); code != http.StatusServiceUnavailable || !strings.Contains(b, "store") {
		t.Fatalf("store down: /storez %d %s", code, b)
	}
	r.up.Enqueue(upstreamfake.Reply{Text: "served unpruned"})
	m := aTurn(t, r.anthropic("outage"), []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}, false)
	if m.Content[0].Text != "served unpruned" {
		t.Fatalf("%+v", m.Content)
	}
}

func TestUnknownPathAndFieldsPassThrough(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	resp, _ := post(t, r.http.URL+"/v1/models/whatever", `{"a":1}`, map[string]string{"anthropic-version": "2023-06-01", "x-custom": "yes"})
	if resp.StatusCode != 404 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	rec, _ := r.up.Last()
	if rec.Path != "/v1/models/whatever" || string(rec.Body) != `{"a":1}` || rec.Header.Get("X-Custom") != "yes" {
		t.Fatalf("recorded %+v", rec)
	}
	r.up.Enqueue(upstreamfake.Reply{Text: "ok"})
	body := `{"model":"m","max_tokens":5,"zzz":[{"odd":true}],"messages":[{"role":"user","content":[{"type":"mystery_block","x":1},{"type":"text","text":"hi"}]}]}`
	post(t, r.http.URL+"/v1/messages", body, map[string]string{"anthropic-beta": "b1,b2"})
	rec, _ = r.up.Last()
	if gjson.GetBytes(rec.Body, "zzz").Raw != `[{"odd":true}]` || gjson.GetBytes(rec.Body, "messages").Raw != gjson.Get(body, "messages").Raw || rec.Header.Get("Anthropic-Beta") != "b1,b2" {
		t.Fatalf("unknown content altered: %s %v", rec.Body, rec.Header)
	}
	// count_tokens is pruned then forwarded, and relayed as is.
	resp, b := post(t, r.http.URL+"/v1/messages/count_tokens", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, nil)
	if resp.StatusCode != 200 || !gjson.GetBytes(b, "input_tokens").Exists() {
		t.Fatalf("count_tokens: %d %s", resp.StatusCode, b)
	}
}

// TestOpenAINullOptionalFieldsAccepted: OpenAI documents stream (and stream_options) as
// "boolean or null" / "object or null"; a null is treated as absent, the request is served
// (JSON, not streamed) and the fields reach the provider as sent, unknown ones byte for byte.
func TestOpenAINullOptionalFieldsAccepted(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	r.up.Enqueue(upstreamfake.Reply{Text: "fine"})
	body := `{"model":"gpt-4o","stream":null,"stream_options":null,"n":null,"zzz":{"k": [1, 2]},"messages":[{"role":"user","content":"hi"}]}`
	resp, b := post(t, r.http.URL+"/v1/chat/completions", body, map[string]string{HeaderSession: "nulls"})
	if resp.StatusCode != 200 || gjson.GetBytes(b, "choices.0.message.content").Str != "fine" {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	rec, req := lastModelRequest(t, r.up, wire.OpenAI)
	for _, k := range []string{"stream", "stream_options", "n"} {
		if v := gjson.GetBytes(rec.Body, k); v.Raw != "null" {
			t.Fatalf("%s reached the provider as %q", k, v.Raw)
		}
	}
	if gjson.GetBytes(rec.Body, "zzz").Raw != `{"k": [1, 2]}` || req.Stream {
		t.Fatalf("upstream got %s", rec.Body)
	}
}

// TestOpenAISDKRecoveryStreamingAndNot: the OpenAI client sees one coherent completion while
// the proxy answers context_tree_query upstream.
func TestOpenAISDKRecoveryStreamingAndNot(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "sse"}[stream], func(t *testing.T) {
			r := newRig(t, nil, nil, nil)
			c := r.openai("oa-" + map[bool]string{false: "json", true: "sse"}[stream])
			tools := []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "bash", Parameters: openai.FunctionParameters{"type": "object"}})}
			params := func(msgs []openai.ChatCompletionMessageParamUnion) openai.ChatCompletionNewParams {
				p := openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: msgs, Tools: tools}
				if stream {
					p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
				}
				return p
			}
			do := func(msgs []openai.ChatCompletionMessageParamUnion) openai.ChatCompletionMessage {
				t.Helper()
				return oTurn(t, c, params(msgs), stream).Choices[0].Message
			}
			out := bigOutput("test", 50)
			r.up.Enqueue(
				upstreamfake.Reply{ToolCalls: []upstreamfake.ToolCall{{ID: "call_1", Name: "bash", Input: `{"cmd":"go test"}`}}},
				upstreamfake.Reply{Text: "Tests pass."},
			)
			msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are an agent."), openai.UserMessage("run tests")}
			m := do(msgs)
			msgs = append(msgs, m.ToParam(), openai.ToolMessage(out, "call_1"))
			m = do(msgs)
			msgs = append(msgs, m.ToParam())
			r.up.Enqueue(
				upstreamfake.Reply{Text: "Looking.", ToolCalls: []upstreamfake.ToolCall{{ID: "call_q", Name: pruner.QueryToolName, Input: `{"toolCallIds":["t1"]}`}}},
				upstreamfake.Reply{Text: "Line 7 was fine."},
			)
			msgs = append(msgs, openai.UserMessage("what about line 7?"))
			before := len(r.up.Requests())
			m = do(msgs)
			if len(m.ToolCalls) != 0 || m.Content != "Looking.\n\nLine 7 was fine." {
				t.Fatalf("client saw %+v", m)
			}
			reqs := r.up.Requests()[before:]
			if len(reqs) != 2 {
				t.Fatalf("%d upstream requests", len(reqs))
			}
			first := mustValid(t, wire.OpenAI, reqs[0].Body)
			if strings.Contains(string(reqs[0].Body), "test line 030") {
				t.Fatal("request after the flush not pruned")
			}
			_ = first
			cont := mustValid(t, wire.OpenAI, reqs[1].Body)
			last := cont.Messages[len(cont.Messages)-1]
			if last.Role != wire.RoleTool || !strings.Contains(last.Blocks[0].ResultText(), "test line 007") {
				t.Fatalf("continuation: %s", last.Raw())
			}
		})
	}
}

// redisOpener returns a function that opens another store on the Redis rs, closed when the
// test ends (each proxy of a test gets its own, as each replica has its own client).
func redisOpener(t *testing.T, rs *redistest.Server) func() store.Store {
	return func() store.Store {
		st, err := store.Open(context.Background(), rs.URL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
}

// TestTwoProxiesShareRedis: two proxy servers on one real Redis serve one session
// alternately; the flush started by one is used by the other.
func TestTwoProxiesShareRedis(t *testing.T) {
	rs := redistest.Start(t, nil)
	open := redisOpener(t, rs)
	a := newRig(t, nil, open(), nil)
	b := newRig(t, a.up, open(), nil)
	ca, cb := a.anthropic("shared"), b.anthropic("shared")
	out := bigOutput("redis", 60)
	a.up.Enqueue(
		upstreamfake.Reply{ToolCalls: []upstreamfake.ToolCall{{ID: "toolu_r1", Name: "bash", Input: `{"cmd":"ls -R"}`}}},
		upstreamfake.Reply{Text: "Listed."},
		upstreamfake.Reply{Text: "Second answer."},
	)
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("list"))}
	m := aTurn(t, ca, msgs, false)
	msgs = append(msgs, m.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_r1", out, false)))
	m = aTurn(t, cb, msgs, true) // final answer on B: B flushes
	msgs = append(msgs, m.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock("again")))
	// A has no local flight: it waits on B's lease in Redis, then uses the committed state.
	deadline := time.Now().Add(5 * time.Second)
	for {
		snap, err := a.st.Load(context.Background(), "shared")
		if err != nil {
			t.Fatal(err)
		}
		if snap.Version > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	aTurn(t, ca, msgs, false)
	rec, _ := lastModelRequest(t, a.up, wire.Anthropic)
	if strings.Contains(string(rec.Body), "redis line 030") || !strings.Contains(string(rec.Body), "`t1`") {
		t.Fatalf("proxy A did not use B's flush: %s", rec.Body)
	}
	snap, _ := a.st.Load(context.Background(), "shared")
	if snap.Stats[store.StatRequests] < 2 {
		time.Sleep(100 * time.Millisecond)
	}
}

func TestMCPContextTreeQuery(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	conversation(t, r, "mcp-sess", false)
	time.Sleep(200 * time.Millisecond)
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: r.http.URL + "/mcp", HTTPClient: &http.Client{Transport: headerRT{HeaderSession: "mcp-sess"}}}
	cs, err := client.Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: pruner.QueryToolName, Arguments: map[string]any{"toolCallIds": []string{"t1"}}})
	if err != nil {
		t.Fatal(err)
	}
	txt := res.Content[0].(*mcp.TextContent).Text
	if !strings.Contains(txt, "build line 042") {
		t.Fatalf("mcp answer: %s", txt)
	}
	// admin views
	admin := adminURL(t, r)
	resp, err := http.Get(admin + "/admin/sessions/mcp-sess")
	if err != nil {
		t.Fatal(err)
	}
	var v SessionView
	_ = json.NewDecoder(resp.Body).Decode(&v)
	resp.Body.Close()
	if v.Version < 1 || v.Records < 1 || v.Refs[0] != "t1" || v.Stats[store.StatRequests] < 2 {
		t.Fatalf("admin view %+v", v)
	}
	resp, _ = http.Get(admin + "/admin/sessions/mcp-sess/records/t1")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "build line 042") {
		t.Fatalf("record: %s", b)
	}
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, _ := http.Get(r.http.URL + p)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || (p == "/metrics" && !strings.Contains(string(b), "condense_requests_total")) {
			t.Fatalf("%s: %d", p, resp.StatusCode)
		}
	}
}

type headerRT map[string]string

func (h headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

var _ = ooption.WithHeader

// TestSummarizerFailingKeepsServing: the LLM summarizer (pointed at a provider that answers
// every call with 529) fails every flush; requests keep being served with the last committed
// state and the client never sees the failure.
func TestSummarizerFailingKeepsServing(t *testing.T) {
	sumUp := upstreamfake.Start()
	defer sumUp.Close()
	sumUp.SetResponder(func(upstreamfake.Recorded) upstreamfake.Reply {
		return upstreamfake.Reply{Status: 529, ErrorType: "overloaded_error", ErrorMessage: "summarizer down"}
	})
	llm, err := summarize.NewLLM(summarize.LLMOptions{Endpoint: summarize.Endpoint{Format: wire.Anthropic, BaseURL: sumUp.URL, Model: "claude-haiku-test", APIKey: "k"}})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, nil, nil, nil)
	r.inpro.Orch.Summarizer = llm
	msgs, c := conversation(t, r, "sess-sumfail", false)
	r.up.Enqueue(upstreamfake.Reply{Text: "still fine"})
	msgs = append(msgs, anthropic.NewUserMessage(anthropic.NewTextBlock("next")))
	m := aTurn(t, c, msgs, false)
	if m.Content[0].Text != "still fine" {
		t.Fatalf("%+v", m.Content)
	}
	rec, _ := lastModelRequest(t, r.up, wire.Anthropic)
	if !strings.Contains(string(rec.Body), "build line 030") {
		t.Fatal("nothing was committed, so the request must carry the full history")
	}
	if len(sumUp.Requests()) == 0 {
		t.Fatal("the summarizer was never called")
	}
	snap, _ := r.st.Load(context.Background(), "sess-sumfail")
	if snap.Version != 0 {
		t.Fatalf("a failed flush committed version %d", snap.Version)
	}
}

// stallingLog is a log sink that holds every "request" line (the one logged after a response)
// until released, as a stalled log pipeline would.
type stallingLog struct{ release chan struct{} }

func (l stallingLog) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("msg=request ")) {
		<-l.release
	}
	return len(p), nil
}

// TestStalledLogDoesNotHoldBackResponse: a log sink that blocks (a stalled log pipeline)
// delays neither a non-streamed answer nor the end of a streamed one.
func TestStalledLogDoesNotHoldBackResponse(t *testing.T) {
	sink := stallingLog{release: make(chan struct{})}
	// No flusher: a stalled sink holds every log call (the handler serializes them), so a
	// flush would stall too and the next request would wait FlushWaitTimeout for it.
	r := newRig(t, nil, nil, func(o *Options) { o.Logger, o.Flusher = slog.New(slog.NewTextHandler(sink, nil)), nil })
	defer close(sink.release)
	c := r.anthropic("stalled-log")
	for _, stream := range []bool{false, true} {
		got := make(chan *anthropic.Message, 1)
		go func() {
			msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}
			if !stream {
				m, err := c.Messages.New(context.Background(), aParams(msgs))
				if err != nil {
					t.Errorf("messages.new: %v", err)
				}
				got <- m
				return
			}
			// A streamed answer ends with the response's closing chunk, which the SDK reads.
			st := c.Messages.NewStreaming(context.Background(), aParams(msgs))
			var m anthropic.Message
			for st.Next() {
				_ = m.Accumulate(st.Current())
			}
			if err := st.Err(); err != nil {
				t.Errorf("stream: %v", err)
			}
			got <- &m
		}()
		select {
		case m := <-got:
			if m == nil || len(m.Content) == 0 {
				t.Fatalf("stream %v: response %+v", stream, m)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("stream %v: the client got no whole response while the request's log line was stalled", stream)
		}
	}
}
