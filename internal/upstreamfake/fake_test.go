package upstreamfake

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"
)

func anthropicClient(s *Server) anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL(s.URL), aoption.WithAPIKey("test-key"), aoption.WithMaxRetries(0))
}

func openaiClient(s *Server) openai.Client {
	return openai.NewClient(ooption.WithBaseURL(s.URL+"/v1/"), ooption.WithAPIKey("test-key"), ooption.WithMaxRetries(0))
}

func anthropicParams() anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     "claude-test",
		MaxTokens: 100,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
	}
}

func TestAnthropicSDKNonStreamingToolCall(t *testing.T) {
	s := Start()
	defer s.Close()
	s.Enqueue(Reply{Text: "looking", ToolCalls: []ToolCall{{ID: "toolu_1", Name: "bash", Input: `{"cmd":"ls"}`}}, Usage: Usage{InputTokens: 10, CacheReadTokens: 7}})
	msg, err := ac(s).Messages.New(context.Background(), anthropicParams())
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 2 || msg.Content[0].Text != "looking" || msg.Content[1].Name != "bash" || string(msg.Content[1].Input) != `{"cmd":"ls"}` {
		t.Fatalf("content = %+v", msg.Content)
	}
	if msg.StopReason != "tool_use" || msg.Usage.CacheReadInputTokens != 7 {
		t.Fatalf("stop=%s usage=%+v", msg.StopReason, msg.Usage)
	}
	r, ok := s.Last()
	if !ok || r.Path != "/v1/messages" || r.Header.Get("x-api-key") != "test-key" || !strings.Contains(string(r.Body), `"hi"`) {
		t.Fatalf("recorded %+v", r)
	}
}

func TestAnthropicSDKStreamingAccumulates(t *testing.T) {
	s := Start()
	defer s.Close()
	s.Enqueue(Reply{Thinking: "let me think", Text: "héllo wörld", ToolCalls: []ToolCall{{Name: "context_tree_query", Input: `{"toolCallIds":["t1"]}`}}})
	st := ac(s).Messages.NewStreaming(context.Background(), anthropicParams())
	var msg anthropic.Message
	for st.Next() {
		if err := msg.Accumulate(st.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 3 || msg.Content[0].Thinking != "let me think" || msg.Content[1].Text != "héllo wörld" ||
		msg.Content[2].Name != "context_tree_query" || string(msg.Content[2].Input) != `{"toolCallIds":["t1"]}` {
		t.Fatalf("content = %+v", msg.Content)
	}
}

func TestAnthropicSDKErrorShape(t *testing.T) {
	s := Start()
	defer s.Close()
	s.Enqueue(Reply{Status: 529, ErrorType: "overloaded_error", ErrorMessage: "busy"})
	_, err := ac(s).Messages.New(context.Background(), anthropicParams())
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 529 || !strings.Contains(apiErr.Error(), "overloaded_error") {
		t.Fatalf("err = %v", err)
	}
}

func TestOpenAISDKStreamingAndNot(t *testing.T) {
	s := Start()
	defer s.Close()
	s.Enqueue(Reply{Text: "done", ToolCalls: []ToolCall{{ID: "call_1", Name: "bash", Input: `{"cmd":"pwd"}`}}, Usage: Usage{InputTokens: 5, CacheReadTokens: 3, OutputTokens: 2}})
	s.Enqueue(Reply{Text: "streamed answer", ToolCalls: []ToolCall{{ID: "call_2", Name: "read", Input: `{"path":"a"}`}}})
	params := openai.ChatCompletionNewParams{Model: "gpt-test", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
	c := oc(s)
	cc, err := c.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if cc.Choices[0].Message.Content != "done" || cc.Choices[0].Message.ToolCalls[0].Function.Arguments != `{"cmd":"pwd"}` ||
		cc.Usage.PromptTokensDetails.CachedTokens != 3 || cc.Usage.PromptTokens != 8 {
		t.Fatalf("completion = %+v", cc)
	}
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	st := c.Chat.Completions.NewStreaming(context.Background(), params)
	var acc openai.ChatCompletionAccumulator
	for st.Next() {
		acc.AddChunk(st.Current())
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	m := acc.Choices[0].Message
	if m.Content != "streamed answer" || len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Arguments != `{"path":"a"}` || acc.Usage.TotalTokens == 0 {
		t.Fatalf("accumulated = %+v usage %+v", m, acc.Usage)
	}
	if n := len(s.Requests()); n != 2 {
		t.Fatalf("recorded %d requests", n)
	}
}

// TestStopOverridesStopReason: Reply.Stop is the stop reason of both formats, streamed and not.
func TestStopOverridesStopReason(t *testing.T) {
	s := Start()
	defer s.Close()
	rep := Reply{Text: "cut", ToolCalls: []ToolCall{{Name: "bash"}}}
	rep.Stop = "max_tokens"
	s.Enqueue(rep, rep)
	msg, err := ac(s).Messages.New(context.Background(), anthropicParams())
	if err != nil || msg.StopReason != "max_tokens" {
		t.Fatalf("anthropic: %v %+v", err, msg)
	}
	st := ac(s).Messages.NewStreaming(context.Background(), anthropicParams())
	var acc anthropic.Message
	for st.Next() {
		_ = acc.Accumulate(st.Current())
	}
	if st.Err() != nil || acc.StopReason != "max_tokens" {
		t.Fatalf("anthropic stream: %v %+v", st.Err(), acc)
	}
	rep.Stop = "length"
	s.Enqueue(rep, rep)
	params := openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}}
	cc, err := oc(s).Chat.Completions.New(context.Background(), params)
	if err != nil || cc.Choices[0].FinishReason != "length" {
		t.Fatalf("openai: %v %+v", err, cc)
	}
	ost := oc(s).Chat.Completions.NewStreaming(context.Background(), params)
	var oacc openai.ChatCompletionAccumulator
	for ost.Next() {
		oacc.AddChunk(ost.Current())
	}
	if ost.Err() != nil || oacc.Choices[0].FinishReason != "length" {
		t.Fatalf("openai stream: %v %+v", ost.Err(), oacc.Choices)
	}
}

// TestCutDropsTheConnection: a cut reply delivers its first Cut bytes, then the client's read
// fails instead of ending cleanly; streamed or not.
func TestCutDropsTheConnection(t *testing.T) {
	s := Start()
	defer s.Close()
	for _, body := range []string{`{"model":"m","max_tokens":5,"messages":[]}`, `{"model":"m","max_tokens":5,"stream":true,"messages":[]}`} {
		s.Enqueue(Reply{Text: strings.Repeat("long answer ", 50), Cut: 100})
		resp, err := http.Post(s.URL+"/v1/messages", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !errors.Is(err, io.ErrUnexpectedEOF) || len(b) != 100 {
			t.Fatalf("%s: read %d bytes, err %v", body, len(b), err)
		}
	}
}

// TestStallSendsPartThenWaits: a stalled reply delivers its first Stall bytes and then
// nothing until the client gives up; a delayed reply stops waiting when the client does.
func TestStallSendsPartThenWaits(t *testing.T) {
	s := Start()
	defer s.Close()
	s.Enqueue(Reply{Text: strings.Repeat("long answer ", 50), Stall: 100}, Reply{Text: "late", Delay: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/v1/messages", strings.NewReader(`{"model":"m","max_tokens":5,"messages":[]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 100)
	if _, err := io.ReadFull(resp.Body, got); err != nil {
		t.Fatal(err)
	}
	cancel() // the client gives up while the fake stalls
	if _, err := resp.Body.Read(make([]byte, 1)); err == nil {
		t.Fatal("a stalled reply sent more than its first Stall bytes")
	}
	resp.Body.Close()
	ctx, cancel = context.WithCancel(context.Background())
	req, _ = http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/v1/messages", strings.NewReader(`{"model":"m","max_tokens":5,"messages":[]}`))
	errc := make(chan error, 1)
	go func() { _, err := http.DefaultClient.Do(req); errc <- err }()
	for len(s.Requests()) < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	cancel() // the fake is waiting out the delay
	if err := <-errc; err == nil {
		t.Fatal("a reply delayed by an hour answered")
	}
	// s.Close (deferred) returns only once both handlers ended.
}

func TestOpenAIErrorShapeAndUnknownPath(t *testing.T) {
	s := Start()
	defer s.Close()
	s.Enqueue(Reply{Status: 429, ErrorType: "rate_limit_error", ErrorMessage: "slow down"})
	_, err := oc(s).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Message != "slow down" || apiErr.Type != "rate_limit_error" {
		t.Fatalf("err = %v", err)
	}
}

func ac(s *Server) *anthropic.Client { c := anthropicClient(s); return &c }

func oc(s *Server) *openai.Client { c := openaiClient(s); return &c }

// TestLatencyModel checks that the response-time model holds a reply back at least TTFT plus the
// generation time of its output tokens, reports what it slept in HeaderSlept, and leaves error
// replies undelayed.
func TestLatencyModel(t *testing.T) {
	s := Start()
	defer s.Close()
	lat := Latency{TTFT: 20 * time.Millisecond, TokensPerSecond: 1000}
	s.SetLatency(lat)
	if got := lat.Total(30); got != 50*time.Millisecond {
		t.Fatalf("Total(30) = %v", got)
	}
	s.Enqueue(Reply{Text: "done", Usage: Usage{OutputTokens: 30}}, Reply{Status: 529, ErrorType: "overloaded_error", ErrorMessage: "busy"})
	for i, want := range []time.Duration{lat.Total(30), 0} {
		resp, err := http.Post(s.URL+"/v1/messages", "application/json", strings.NewReader(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		h := resp.Header.Get(HeaderSlept)
		if want == 0 {
			if h != "" || resp.StatusCode != 529 {
				t.Fatalf("reply %d: status %d, %s %q", i, resp.StatusCode, HeaderSlept, h)
			}
			continue
		}
		us, err := strconv.ParseInt(h, 10, 64)
		if err != nil || time.Duration(us)*time.Microsecond < want {
			t.Fatalf("reply %d: %s = %q, want at least %v", i, HeaderSlept, h, want)
		}
	}
	// Streamed: the reply still accumulates into the same message.
	s.Enqueue(Reply{Text: "streamed", Usage: Usage{OutputTokens: 10}})
	st := ac(s).Messages.NewStreaming(context.Background(), anthropicParams())
	var msg anthropic.Message
	for st.Next() {
		if err := msg.Accumulate(st.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if st.Err() != nil || len(msg.Content) != 1 || msg.Content[0].Text != "streamed" || msg.Usage.OutputTokens != 10 {
		t.Fatalf("err %v, message %+v", st.Err(), msg)
	}
}

func TestObserverTimesEveryAnsweredRequest(t *testing.T) {
	s := Start()
	defer s.Close()
	s.SetLatency(Latency{TTFT: 30 * time.Millisecond})
	type seen struct {
		id  string
		tim Timing
	}
	got := make(chan seen, 4)
	s.SetObserver(func(r Recorded, tm Timing) { got <- seen{r.Header.Get("X-Id"), tm} })
	post := func(id, body string) (sent, ended time.Time, status int) {
		req, _ := http.NewRequest(http.MethodPost, s.URL+"/v1/messages", strings.NewReader(body))
		req.Header.Set("X-Id", id)
		sent = time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return sent, time.Now(), resp.StatusCode
	}
	sent, ended, status := post("a", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)
	o := <-got
	if status != 200 || o.id != "a" {
		t.Fatalf("status %d, observed %q", status, o.id)
	}
	// The modeled time lies between reading the request and answering it, and both lie within
	// the client's round trip.
	if !sent.Before(o.tim.Received) || o.tim.Answered.Sub(o.tim.Received) < 30*time.Millisecond || ended.Before(o.tim.Answered) {
		t.Fatalf("sent %v, received %v, answered %v, ended %v", sent, o.tim.Received, o.tim.Answered, ended)
	}
	// An error reply is observed too; removing the observer stops the calls.
	if _, _, status = post("b", `{not json`); status != 400 || (<-got).id != "b" {
		t.Fatalf("malformed: status %d", status)
	}
	s.SetObserver(nil)
	post("c", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)
	select {
	case o := <-got:
		t.Fatalf("observed %q after SetObserver(nil)", o.id)
	default:
	}
}

// validatorCases are bodies on the edges of the JSON grammar.
var validatorCases = []string{
	`{}`, ` {"a":1} `, `[]`, `"x"`, `0`, `-0`, `-0.5e+10`, `1E-2`, `true`, `null`, "{\"a\":\"\\u00e9\\n\"}",
	``, ` `, `{`, `{"a":1,}`, `[1,]`, `{} {}`, `01`, `1.`, `.5`, `-`, `1e`, `+1`, `tru`, `nul`, `NaN`,
	"\"a\tb\"", "\"\x01\"", `"\x"`, `"\u12"`, `"\u12G4"`, `{"a" 1}`, `{1:2}`, `{"a":1 "b":2}`, `[1 2]`,
	"\"\xff\xfe\"", "{\"\xc3\x28\":1}", `"\ud800"`, "[1]\x00",
}

// TestValidatorMatchesEncodingJSON checks the fake's body check against encoding/json.Valid on
// the edges of the grammar, and that a body failing it gets a provider-shaped 400.
func TestValidatorMatchesEncodingJSON(t *testing.T) {
	for _, c := range validatorCases {
		if got, want := gjson.ValidBytes([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("gjson.ValidBytes(%q) = %v, encoding/json says %v", c, got, want)
		}
	}
	s := Start()
	defer s.Close()
	resp, err := http.Post(s.URL+"/v1/messages", "application/json", strings.NewReader(`{"model":"m","messages":[1,]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || gjson.GetBytes(body, "error.type").String() != "invalid_request_error" {
		t.Fatalf("invalid body: %d %s", resp.StatusCode, body)
	}
}

// FuzzValidatorMatchesEncodingJSON checks the fake's body check against encoding/json.Valid
// on arbitrary bytes.
func FuzzValidatorMatchesEncodingJSON(f *testing.F) {
	for _, c := range validatorCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := gjson.ValidBytes(b), json.Valid(b); got != want {
			t.Fatalf("gjson.ValidBytes(%q) = %v, encoding/json says %v", b, got, want)
		}
	})
}

// TestOpenAIRejectsUnsupportedReasoningEffort checks that Chat Completions requests carrying a
// reasoning_effort the named model does not take get the real API's 400, without consuming a
// scripted reply, and that the models that take it are answered.
func TestOpenAIRejectsUnsupportedReasoningEffort(t *testing.T) {
	s := Start()
	defer s.Close()
	s.Enqueue(Reply{Text: "kept"})
	for _, c := range []struct{ model, effort, code string }{
		{"gpt-4o", "low", "unsupported_parameter"},
		{"gpt-4.1-mini", "none", "unsupported_parameter"},
		{"gpt-5", "none", "unsupported_value"},
		{"o4-mini", "none", "unsupported_value"},
	} {
		params := openai.ChatCompletionNewParams{Model: c.model, ReasoningEffort: openai.ReasoningEffort(c.effort),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}}
		_, err := oc(s).Chat.Completions.New(context.Background(), params)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != c.code || apiErr.Param != "reasoning_effort" {
			t.Fatalf("%s/%s: err = %v", c.model, c.effort, err)
		}
	}
	if s.Pending() != 1 {
		t.Fatal("a rejected request consumed a scripted reply")
	}
	for _, c := range []struct{ model, effort string }{{"gpt-4o", ""}, {"gpt-5", "minimal"}, {"gpt-5.1", "none"}} {
		params := openai.ChatCompletionNewParams{Model: c.model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}}
		if c.effort != "" {
			params.ReasoningEffort = openai.ReasoningEffort(c.effort)
		}
		if _, err := oc(s).Chat.Completions.New(context.Background(), params); err != nil {
			t.Fatalf("%s/%q: %v", c.model, c.effort, err)
		}
	}
}
