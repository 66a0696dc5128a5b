package proxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/upstreamfake"
	"github.com/condense-dev/condense/internal/wire"
)

const rawAnthropicSSE = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_x\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n" +
	"event: future_event\ndata: {\"type\":\"future_event\",\"x\":  [1, 2]}\n\n" +
	"event: ping\ndata: {\"type\": \"ping\"}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":2}}\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

const rawOpenAISSE = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n" +
	": a comment line\n\n" +
	"data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}],\"extra\":{\"k\": 1}}\n\n" +
	"data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n" +
	"data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1,\"total_tokens\":4}}\n\n" +
	"data: [DONE]\n\n"

// TestResponsesRelayedByteForByte: with nothing hidden, JSON and SSE responses (unknown
// events, comments and fields included) reach the client exactly as the provider sent them.
func TestResponsesRelayedByteForByte(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	cases := []struct {
		path, body, ct, raw string
	}{
		{"/v1/messages", `{"model":"m","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, "text/event-stream", rawAnthropicSSE},
		{"/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "text/event-stream", rawOpenAISSE},
		{"/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, "application/json",
			"{\n  \"id\": \"msg_1\", \"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"Hi\",\"new_field\":true}],\"stop_reason\":\"end_turn\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}"},
	}
	for _, c := range cases {
		r.up.Enqueue(upstreamfake.Reply{Raw: []byte(c.raw), ContentType: c.ct, Header: http.Header{"X-Provider-Header": {"kept"}}})
		resp, b := post(t, r.http.URL+c.path, c.body, map[string]string{HeaderSession: "raw"})
		if resp.StatusCode != 200 || string(b) != c.raw || resp.Header.Get("X-Provider-Header") != "kept" {
			t.Fatalf("%s: %d\n got %q\nwant %q", c.path, resp.StatusCode, b, c.raw)
		}
	}
	// Each relay timed its own work after the provider's last byte (a JSON answer's once the
	// client has it, so perhaps just after the client returned).
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		n := histogramCount(t, r.px, "condense_response_finish_seconds")
		if n == uint64(len(cases)) {
			break
		}
		if n > uint64(len(cases)) || time.Now().After(deadline) {
			t.Fatalf("condense_response_finish_seconds has %d samples, want %d", n, len(cases))
		}
	}
}

// TestOpenAIStreamWithoutFinishKeepsUsageAndDone: a stream that ends without a finish_reason
// chunk still reaches the client whole: the held usage chunk and [DONE] are sent too.
func TestOpenAIStreamWithoutFinishKeepsUsageAndDone(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	raw := "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hi\"},\"finish_reason\":null}]}\n\n" +
		"data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1,\"total_tokens\":4}}\n\n" +
		"data: [DONE]\n\n"
	r.up.Enqueue(upstreamfake.Reply{Raw: []byte(raw), ContentType: "text/event-stream"})
	st := r.openai("nofinish").Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{Model: "gpt-4o",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}, StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}})
	var acc openai.ChatCompletionAccumulator
	for st.Next() {
		acc.AddChunk(st.Current())
	}
	if err := st.Err(); err != nil || acc.Usage.TotalTokens != 4 || acc.Choices[0].Message.Content != "Hi" {
		t.Fatalf("client saw %+v usage %+v err %v", acc.Choices, acc.Usage, err)
	}
	r.up.Enqueue(upstreamfake.Reply{Raw: []byte(raw), ContentType: "text/event-stream"})
	if resp, b := post(t, r.http.URL+"/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, map[string]string{HeaderSession: "nofinish"}); resp.StatusCode != 200 || string(b) != raw {
		t.Fatalf("%d\n got %q\nwant %q", resp.StatusCode, b, raw)
	}
}

// rawOpenAITwoChoices is a stream of two choices (n=2): choice 0 calls context_tree_query,
// choice 1 answers; each has its own finish chunk.
const rawOpenAITwoChoices = "data: {\"id\":\"c2\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Looking.\"},\"finish_reason\":null}]}\n\n" +
	"data: {\"id\":\"c2\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":1,\"delta\":{\"role\":\"assistant\",\"content\":\"Line 7 is fine.\"},\"finish_reason\":null}]}\n\n" +
	"data: {\"id\":\"c2\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_q2\",\"type\":\"function\",\"function\":{\"name\":\"context_tree_query\",\"arguments\":\"{}\"}}]},\"finish_reason\":null}]}\n\n" +
	"data: {\"id\":\"c2\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":1,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n" +
	"data: {\"id\":\"c2\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n" +
	"data: {\"id\":\"c2\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":9,\"total_tokens\":12}}\n\n" +
	"data: [DONE]\n\n"

// TestOpenAISeveralChoicesRelayedUntouched: with n > 1 every choice's chunks — its
// finish chunk included — reach the client as the provider sent them (a JSON answer byte for
// byte); the proxy hides and answers nothing (choice 0's context_tree_query call included)
// and sends no continuation.
func TestOpenAISeveralChoicesRelayedUntouched(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	r.up.Enqueue(upstreamfake.Reply{Raw: []byte(rawOpenAITwoChoices), ContentType: "text/event-stream"})
	cc := oTurn(t, r.openai("choices"), openai.ChatCompletionNewParams{Model: "gpt-4o", N: openai.Int(2),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("line 7?")}}, true)
	if len(cc.Choices) != 2 || cc.Choices[0].FinishReason != "tool_calls" || cc.Choices[1].FinishReason != "stop" ||
		len(cc.Choices[0].Message.ToolCalls) != 1 || cc.Choices[1].Message.Content != "Line 7 is fine." || cc.Usage.TotalTokens != 12 {
		t.Fatalf("client saw %+v usage %+v", cc.Choices, cc.Usage)
	}
	r.up.Enqueue(upstreamfake.Reply{Raw: []byte(rawOpenAITwoChoices), ContentType: "text/event-stream"})
	resp, b := post(t, r.http.URL+"/v1/chat/completions", `{"model":"m","stream":true,"n":2,"messages":[{"role":"user","content":"line 7?"}]}`, map[string]string{HeaderSession: "choices"})
	if resp.StatusCode != 200 || string(b) != rawOpenAITwoChoices {
		t.Fatalf("%d\n got %q\nwant %q", resp.StatusCode, b, rawOpenAITwoChoices)
	}
	// Not streamed: the same.
	const two = `{"id":"c3","object":"chat.completion","created":1,"model":"m","choices":[` +
		`{"index":0,"message":{"role":"assistant","content":"Looking.","tool_calls":[{"id":"call_q3","type":"function","function":{"name":"context_tree_query","arguments":"{}"}}]},"finish_reason":"tool_calls"},` +
		`{"index":1,"message":{"role":"assistant","content":"Line 7 is fine."},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":9,"total_tokens":12}}`
	r.up.Enqueue(upstreamfake.Reply{Raw: []byte(two)})
	resp, b = post(t, r.http.URL+"/v1/chat/completions", `{"model":"m","n":2,"messages":[{"role":"user","content":"line 7?"}]}`, map[string]string{HeaderSession: "choices"})
	if resp.StatusCode != 200 || string(b) != two {
		t.Fatalf("%d\n got %s\nwant %s", resp.StatusCode, b, two)
	}
	if n := len(r.up.Requests()); n != 3 {
		t.Fatalf("%d upstream requests, want one a client request", n)
	}
}

// histogramCount returns the sample count of the proxy's histogram name.
func histogramCount(t *testing.T, px *Server, name string) uint64 {
	n, _ := histogramStats(t, px, name)
	return n
}

// histogramStats returns the sample count and sum of the proxy's (unlabelled) histogram name.
func histogramStats(tb testing.TB, px *Server, name string) (count uint64, sum float64) {
	tb.Helper()
	mfs, err := px.Registry().Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			h := mf.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	tb.Fatalf("no histogram %s", name)
	return 0, 0
}

// TestSSERelayedEventByEvent: the client gets the first event while the upstream stream is
// still open (held by the fake until the client has read it).
func TestSSERelayedEventByEvent(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	hold := make(chan struct{})
	r.up.Enqueue(upstreamfake.Reply{Text: "streamed", Hold: hold})
	req, _ := http.NewRequest(http.MethodPost, r.http.URL+"/v1/messages", strings.NewReader(`{"model":"m","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set(HeaderSession, "live")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || line != "event: message_start\n" {
		t.Fatalf("first line %q %v", line, err)
	}
	close(hold)
	rest, _ := io.ReadAll(br)
	if !strings.Contains(string(rest), "message_stop") {
		t.Fatalf("stream incomplete: %s", rest)
	}
}

// TestStreamingQueryAfterThinkingRenumbersBlocks: thinking, text, then a held query call;
// the continuation's blocks follow with contiguous indexes and the SDK accumulates them.
func TestStreamingQueryAfterThinkingRenumbersBlocks(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	msgs, c := conversation(t, r, "sess-think", true)
	r.up.Enqueue(
		upstreamfake.Reply{Thinking: "I should check t1.", Text: "One moment.", ToolCalls: []upstreamfake.ToolCall{{ID: "toolu_qt", Name: pruner.QueryToolName, Input: `{"toolCallIds":["t1"]}`}}},
		upstreamfake.Reply{Thinking: "Found it.", Text: "Line 3 is fine.", ToolCalls: []upstreamfake.ToolCall{{ID: "toolu_next", Name: "bash", Input: `{"cmd":"echo"}`}}},
	)
	msgs = append(msgs, anthropic.NewUserMessage(anthropic.NewTextBlock("line 3?")))
	m := aTurn(t, c, msgs, true)
	kinds := []string{}
	for _, b := range m.Content {
		kinds = append(kinds, b.Type)
	}
	if strings.Join(kinds, ",") != "thinking,text,thinking,text,tool_use" || m.Content[4].ID != "toolu_next" || m.StopReason != "tool_use" {
		t.Fatalf("client saw %v stop=%s", kinds, m.StopReason)
	}
	if m.Content[0].Signature == "" || m.Content[2].Signature == "" {
		t.Fatal("thinking signatures lost")
	}
	// The client answers its own tool; the upstream sees the hidden exchange, valid.
	r.up.Enqueue(upstreamfake.Reply{Text: "done"})
	msgs = append(msgs, m.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_next", "ok", false)))
	aTurn(t, c, msgs, true)
	_, req := lastModelRequest(t, r.up, wire.Anthropic)
	n := len(req.Messages)
	if req.Messages[n-4].Blocks[2].Name != pruner.QueryToolName || req.Messages[n-2].Blocks[2].ID != "toolu_next" {
		t.Fatalf("hidden exchange misplaced: %s", req.Messages[n-4].Raw())
	}
}

// TestQueryRoundsExhaustedAreDeferred: past maxRecoveryRounds the query is hidden from the
// client and answered on the next request.
func TestQueryRoundsExhaustedAreDeferred(t *testing.T) {
	for _, rounds := range []int{0, 1} {
		r := newRig(t, nil, nil, func(o *Options) { o.MaxRecoveryRounds = rounds })
		msgs, c := conversation(t, r, "sess-exhaust", false)
		q := func(id string) upstreamfake.Reply {
			return upstreamfake.Reply{Text: "Query " + id + ".", ToolCalls: []upstreamfake.ToolCall{{ID: id, Name: pruner.QueryToolName, Input: `{"toolCallIds":["t1"]}`}}}
		}
		r.up.Enqueue(q("toolu_e1"), q("toolu_e2"))
		msgs = append(msgs, anthropic.NewUserMessage(anthropic.NewTextBlock("again?")))
		m := aTurn(t, c, msgs, false)
		if m.StopReason != "end_turn" || len(m.Content) != rounds+1 {
			t.Fatalf("rounds=%d: client saw %+v (%s)", rounds, m.Content, m.StopReason)
		}
		for _, b := range m.Content {
			if b.Type != "text" {
				t.Fatalf("query call leaked to the client: %+v", b)
			}
		}
		r.up.Enqueue(upstreamfake.Reply{Text: "ok"})
		msgs = append(msgs, m.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock("go on")))
		aTurn(t, c, msgs, false)
		_, req := lastModelRequest(t, r.up, wire.Anthropic)
		last := req.Messages[len(req.Messages)-1]
		if last.Blocks[0].Kind != wire.KindToolResult || !strings.Contains(last.Blocks[0].ResultText(), "build line") {
			t.Fatalf("rounds=%d: deferred query not answered: %s", rounds, last.Raw())
		}
	}
}

// TestTruncatedAnswerKeepsItsStopReason: a response cut off by max_tokens / length that
// carries a context_tree_query call keeps the provider's stop reason (it is not turned into
// a normal end), is not taken for a final answer (no flush starts), and the truncated call is
// hidden but never answered: the next request carries neither it nor a result for it.
func TestTruncatedAnswerKeepsItsStopReason(t *testing.T) {
	for _, f := range []wire.Format{wire.Anthropic, wire.OpenAI} {
		for _, stream := range []bool{false, true} {
			t.Run(f.String()+map[bool]string{false: "/json", true: "/sse"}[stream], func(t *testing.T) {
				r := newRig(t, nil, nil, nil)
				cut := upstreamfake.Reply{Text: "Partial answer", ToolCalls: []upstreamfake.ToolCall{{ID: "call_cut", Name: pruner.QueryToolName, Input: `{"toolCallIds":["t1"]}`}}}
				cut.Stop = map[wire.Format]string{wire.Anthropic: "max_tokens", wire.OpenAI: "length"}[f]
				r.up.Enqueue(cut, upstreamfake.Reply{Text: "ok"})
				if f == wire.Anthropic {
					c := r.anthropic("trunc")
					msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("explain"))}
					m := aTurn(t, c, msgs, stream)
					if m.StopReason != "max_tokens" || len(m.Content) != 1 || m.Content[0].Text != "Partial answer" {
						t.Fatalf("client saw %+v stop=%s", m.Content, m.StopReason)
					}
					aTurn(t, c, append(msgs, m.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock("go on"))), stream)
				} else {
					c := r.openai("trunc")
					msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("explain")}
					cc := oTurn(t, c, openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: msgs, Tools: oTools}, stream)
					ch := cc.Choices[0]
					if ch.FinishReason != "length" || ch.Message.Content != "Partial answer" || len(ch.Message.ToolCalls) != 0 {
						t.Fatalf("client saw %+v finish=%s", ch.Message, ch.FinishReason)
					}
					msgs = append(msgs, ch.Message.ToParam(), openai.UserMessage("go on"))
					oTurn(t, c, openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: msgs, Tools: oTools}, stream)
				}
				rec, _ := lastModelRequest(t, r.up, f)
				if strings.Contains(string(rec.Body), "call_cut") {
					t.Fatalf("the truncated call came back: %s", rec.Body)
				}
				r.settle() // every flush the proxy started has been submitted
				if n := testutil.ToFloat64(r.px.met.FlushTriggers.WithLabelValues("agent-message")); n != 1 {
					t.Fatalf("%v agent-message flushes; only the second, final, answer starts one", n)
				}
			})
		}
	}
}

// TestBudgetTriggerFlushesBeforeForwarding: with on-demand flushing and a tiny budget, the
// request that crosses the budget starts a flush, waits for it and goes out pruned.
func TestBudgetTriggerFlushesBeforeForwarding(t *testing.T) {
	r := newRig(t, nil, nil, func(o *Options) { o.Trigger = Trigger{OnDemand: true, BudgetThreshold: 0.01} })
	c := r.anthropic("sess-budget")
	r.up.Enqueue(upstreamfake.Reply{ToolCalls: []upstreamfake.ToolCall{{ID: "toolu_g", Name: "bash", Input: `{"cmd":"cat log"}`}}}, upstreamfake.Reply{Text: "read it"})
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("read the log"))}
	m := aTurn(t, c, msgs, false)
	msgs = append(msgs, m.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_g", bigOutput("log", 400), false)))
	aTurn(t, c, msgs, false)
	rec, _ := lastModelRequest(t, r.up, wire.Anthropic)
	if strings.Contains(string(rec.Body), "log line 200") || !strings.Contains(string(rec.Body), "`t1`") {
		t.Fatalf("budget request not pruned: %d bytes", len(rec.Body))
	}
}

// TestOnDemandFlushThroughAdmin: with on-demand flushing nothing is pruned until the admin
// API asks; the next request then flushes.
func TestOnDemandFlushThroughAdmin(t *testing.T) {
	r := newRig(t, nil, nil, func(o *Options) { o.Trigger = Trigger{OnDemand: true} })
	msgs, c := conversation(t, r, "sess-demand", false)
	r.up.Enqueue(upstreamfake.Reply{Text: "a"}, upstreamfake.Reply{Text: "b"})
	msgs = append(msgs, anthropic.NewUserMessage(anthropic.NewTextBlock("3")))
	m := aTurn(t, c, msgs, false)
	rec, _ := lastModelRequest(t, r.up, wire.Anthropic)
	if !strings.Contains(string(rec.Body), "build line 030") {
		t.Fatal("on-demand session pruned without a request")
	}
	resp, _ := post(t, adminURL(t, r)+"/admin/sessions/sess-demand/flush", "", nil)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("admin flush: %d", resp.StatusCode)
	}
	msgs = append(msgs, m.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock("4")))
	aTurn(t, c, msgs, false)
	rec, _ = lastModelRequest(t, r.up, wire.Anthropic)
	if strings.Contains(string(rec.Body), "build line 030") {
		t.Fatal("admin-requested flush not applied")
	}
}

// TestUpstreamUnreachableIs502: a provider that cannot be reached yields a provider-shaped
// 502 for the client.
func TestUpstreamUnreachableIs502(t *testing.T) {
	up := upstreamfake.Start()
	r := newRig(t, up, nil, nil)
	up.Close()
	_, err := r.anthropic("gone").Messages.New(context.Background(), aParams([]anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}))
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 502 || !strings.Contains(apiErr.RawJSON(), "api_error") {
		t.Fatalf("err = %v", err)
	}
}

// TestNoQueryToolForSeveralChoices: a request of several choices (n > 1), whose response is
// relayed untouched, is not offered context_tree_query (its calls would never be answered);
// a request of one choice is, when it offers tools; one that offers none (a side request) is not.
func TestNoQueryToolForSeveralChoices(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	const tools = `"tools":[{"type":"function","function":{"name":"bash","parameters":{"type":"object"}}}],`
	for _, tc := range []struct {
		n    string
		tool bool
	}{{tools + `"n":2,`, false}, {tools + `"n":1,`, true}, {tools, true}, {``, false}, {`"tools":[],`, false}} {
		r.up.Enqueue(upstreamfake.Reply{Text: "fine"})
		body := `{"model":"gpt-4o",` + tc.n + `"messages":[{"role":"user","content":"hi"}]}`
		if resp, b := post(t, r.http.URL+"/v1/chat/completions", body, map[string]string{HeaderSession: "choices-tools"}); resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		rec, _ := r.up.Last()
		has := strings.Contains(gjson.GetBytes(rec.Body, "tools").Raw, pruner.QueryToolName)
		if has != tc.tool {
			t.Fatalf("%s: query tool offered %v, want %v: %s", tc.n, has, tc.tool, rec.Body)
		}
	}
}
