package summarize

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/upstreamfake"
	"github.com/condense-dev/condense/internal/wire"
)

func newLLM(t *testing.T, f wire.Format, base string, th Thinking, idle, total time.Duration) *LLM {
	t.Helper()
	if bearer(f) {
		base += "/v1"
	}
	l, err := NewLLM(LLMOptions{
		Endpoint:     Endpoint{Format: f, BaseURL: base, Model: "claude-sonnet-4-5", APIKey: "sk-test"},
		Thinking:     th,
		IdleTimeout:  idle,
		TotalTimeout: total,
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func batchReq(id string) *Request {
	return &Request{ID: id, System: "be brief", Prompt: "summarize\n\n<tool-call-batch>\n[[1:bash]] Tool: bash({\"command\":\"ls\"})\nResult (OK): a\nb\n</tool-call-batch>"}
}

func TestAnthropicRequestShapePerThinking(t *testing.T) {
	up := upstreamfake.Start()
	defer up.Close()
	cases := []struct {
		th        Thinking
		thinking  string // expected raw thinking member, "" = absent
		maxTokens int64
	}{
		{ThinkingDefault, "", 4096},
		{ThinkingOff, `{"type":"disabled"}`, 4096},
		{ThinkingMinimal, `{"type":"enabled","budget_tokens":1024}`, 4096 + 1024},
		{ThinkingLow, `{"type":"enabled","budget_tokens":2048}`, 4096 + 2048},
		{ThinkingMedium, `{"type":"enabled","budget_tokens":8192}`, 4096 + 8192},
		{ThinkingHigh, `{"type":"enabled","budget_tokens":16384}`, 4096 + 16384},
		{ThinkingXHigh, `{"type":"enabled","budget_tokens":32768}`, 4096 + 32768},
	}
	for _, c := range cases {
		t.Run(string(c.th)+"_", func(t *testing.T) {
			up.Reset()
			up.Enqueue(upstreamfake.Reply{Thinking: "hmm", Text: "- [[1:bash]] listed", Usage: upstreamfake.Usage{InputTokens: 1000, OutputTokens: 100, CacheReadTokens: 50, CacheCreationTokens: 10}})
			l := newLLM(t, wire.Anthropic, up.URL, c.th, time.Second, 5*time.Second)
			res, err := l.Summarize(context.Background(), batchReq("b1"))
			if err != nil {
				t.Fatal(err)
			}
			if res.Text != "- [[1:bash]] listed" {
				t.Fatalf("text %q", res.Text)
			}
			want := Usage{InputTokens: 1000, OutputTokens: 100, CacheReadTokens: 50, CacheCreationTokens: 10, Calls: 1}
			got := res.Usage
			got.CostUSD = 0
			if got != want {
				t.Fatalf("usage %+v want %+v", got, want)
			}
			// claude-sonnet-4-5: $3/M input, $15/M output, read 0.1×, write 1.25×
			wantCost := (1000*3 + 100*15 + 50*0.3 + 10*3.75) / 1e6
			if d := res.Usage.CostUSD - wantCost; d > 1e-12 || d < -1e-12 {
				t.Fatalf("cost %v want %v", res.Usage.CostUSD, wantCost)
			}
			r, _ := up.Last()
			if r.Path != "/v1/messages" || r.Header.Get("x-api-key") != "sk-test" || r.Header.Get("anthropic-version") != "2023-06-01" {
				t.Fatalf("path %s headers %v", r.Path, r.Header)
			}
			b := gjson.ParseBytes(r.Body)
			if got := b.Get("thinking").Raw; got != c.thinking {
				t.Fatalf("thinking %s want %s", got, c.thinking)
			}
			if b.Get("max_tokens").Int() != c.maxTokens || !b.Get("stream").Bool() || b.Get("model").String() != "claude-sonnet-4-5" {
				t.Fatalf("body %s", r.Body)
			}
			if b.Get("system").String() != "be brief" || b.Get("messages.#").Int() != 1 || b.Get("messages.0.role").String() != "user" ||
				!strings.Contains(b.Get("messages.0.content").String(), "[[1:bash]]") {
				t.Fatalf("body %s", r.Body)
			}
		})
	}
}

// effortCases are the reasoning effort and output token allowance each thinking level asks
// of the OpenAI APIs.
var effortCases = []struct {
	th     Thinking
	effort string
	max    int64
}{
	{ThinkingDefault, "", 4096},
	{ThinkingOff, "", 4096},
	{ThinkingMinimal, "minimal", 4096 + 1024},
	{ThinkingLow, "low", 4096 + 2048},
	{ThinkingMedium, "medium", 4096 + 8192},
	{ThinkingHigh, "high", 4096 + 16384},
	{ThinkingXHigh, "xhigh", 4096 + 32768},
}

// TestOpenAIRequestShapePerThinking: a Chat Completions endpoint gets one streamed POST
// {base}/chat/completions, a Responses one a streamed POST {base}/responses (the prompt as
// input, the system prompt as instructions, nothing stored); the thinking level is their
// reasoning effort with its allowance in the output token cap, and the usage is split into
// uncached and cached input.
func TestOpenAIRequestShapePerThinking(t *testing.T) {
	up := upstreamfake.Start()
	defer up.Close()
	for _, f := range []wire.Format{wire.OpenAI, wire.Responses} {
		for _, c := range effortCases {
			t.Run(f.String()+"/"+string(c.th)+"_", func(t *testing.T) {
				up.Reset()
				up.Enqueue(upstreamfake.Reply{Thinking: "let me see", Text: "- [[1:bash]] listed files", Usage: upstreamfake.Usage{InputTokens: 700, OutputTokens: 30, CacheReadTokens: 300}})
				l := newLLM(t, f, up.URL, c.th, time.Second, 5*time.Second)
				res, err := l.Summarize(context.Background(), batchReq("b1"))
				if err != nil {
					t.Fatal(err)
				}
				if res.Text != "- [[1:bash]] listed files" || res.Model != f.String()+"/claude-sonnet-4-5" {
					t.Fatalf("text %q model %s", res.Text, res.Model)
				}
				// The fake reports the input tokens as uncached + cached; we keep them apart.
				if res.Usage.InputTokens != 700 || res.Usage.CacheReadTokens != 300 || res.Usage.OutputTokens != 30 {
					t.Fatalf("usage %+v", res.Usage)
				}
				r, _ := up.Last()
				b := gjson.ParseBytes(r.Body)
				path, eff, max := "/v1/chat/completions", b.Get("reasoning_effort"), b.Get("max_completion_tokens")
				if f == wire.Responses {
					path, eff, max = "/v1/responses", b.Get("reasoning.effort"), b.Get("max_output_tokens")
				}
				if r.Path != path || r.Header.Get("Authorization") != "Bearer sk-test" {
					t.Fatalf("path %s headers %v", r.Path, r.Header)
				}
				if c.effort == "" && (eff.Exists() || b.Get("reasoning").Exists()) || c.effort != "" && eff.String() != c.effort {
					t.Fatalf("reasoning effort %s want %q", eff.Raw, c.effort)
				}
				if max.Int() != c.max || !b.Get("stream").Bool() || b.Get("thinking").Exists() {
					t.Fatalf("body %s", r.Body)
				}
				switch f {
				case wire.OpenAI:
					if !b.Get("stream_options.include_usage").Bool() || b.Get("messages.0.role").String() != "system" || b.Get("messages.1.role").String() != "user" {
						t.Fatalf("body %s", r.Body)
					}
				case wire.Responses:
					if b.Get("store").Raw != "false" || b.Get("input").String() != batchReq("b1").Prompt || b.Get("instructions").String() != "be brief" || b.Get("messages").Exists() {
						t.Fatalf("body %s", r.Body)
					}
				}
			})
		}
	}
}

// TestOpenAIThinkingOffAcceptedByEveryModel checks that the default thinking budget, off, makes
// a request every Chat Completions model takes: non-reasoning models (gpt-4o, gpt-4.1) reject
// reasoning_effort altogether and models before gpt-5.1 reject "none" (the fake answers both
// with the real API's 400).
func TestOpenAIThinkingOffAcceptedByEveryModel(t *testing.T) {
	up := upstreamfake.Start()
	defer up.Close()
	up.SetResponder(func(upstreamfake.Recorded) upstreamfake.Reply {
		return upstreamfake.Reply{Text: "- [[1:bash]] listed files"}
	})
	for _, model := range []string{"gpt-4o", "gpt-4.1-mini", "gpt-5", "gpt-5-mini", "o4-mini", "gpt-5.1"} {
		l, err := NewLLM(LLMOptions{Endpoint: Endpoint{Format: wire.OpenAI, BaseURL: up.URL + "/v1", Model: model, APIKey: "sk-test"}, Thinking: ThinkingOff})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Summarize(context.Background(), batchReq("b")); err != nil {
			t.Errorf("%s: %v", model, err)
		}
	}
}

func TestIdleTimeoutIsTyped(t *testing.T) {
	up := upstreamfake.Start()
	defer up.Close()
	for _, f := range []wire.Format{wire.Anthropic, wire.OpenAI} {
		t.Run(f.String()+"/stall-mid-stream", func(t *testing.T) {
			up.Enqueue(upstreamfake.Reply{Text: "some long summary text here", ChunkDelay: 400 * time.Millisecond})
			l := newLLM(t, f, up.URL, ThinkingOff, 100*time.Millisecond, 0)
			_, err := l.Summarize(context.Background(), batchReq("b"))
			if !errors.Is(err, ErrIdleTimeout) || KindOf(err) != KindIdleTimeout {
				t.Fatalf("err = %v", err)
			}
			if !strings.Contains(err.Error(), "stalled") {
				t.Fatalf("message %q", err)
			}
		})
		t.Run(f.String()+"/no-headers", func(t *testing.T) {
			up.Enqueue(upstreamfake.Reply{Text: "x", Delay: 400 * time.Millisecond})
			l := newLLM(t, f, up.URL, ThinkingOff, 100*time.Millisecond, 0)
			_, err := l.Summarize(context.Background(), batchReq("b"))
			if !errors.Is(err, ErrIdleTimeout) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

func TestTotalTimeoutIsTyped(t *testing.T) {
	up := upstreamfake.Start()
	defer up.Close()
	for _, f := range []wire.Format{wire.Anthropic, wire.OpenAI} {
		t.Run(f.String(), func(t *testing.T) {
			// Events keep arriving every 60ms (well inside the 1s idle window) but the whole
			// stream takes longer than the 150ms ceiling.
			up.Enqueue(upstreamfake.Reply{Thinking: "thinking hard", Text: "a summary that streams slowly", ChunkDelay: 60 * time.Millisecond})
			l := newLLM(t, f, up.URL, ThinkingOff, time.Second, 150*time.Millisecond)
			_, err := l.Summarize(context.Background(), batchReq("b"))
			if !errors.Is(err, ErrTotalTimeout) || errors.Is(err, ErrIdleTimeout) {
				t.Fatalf("err = %v", err)
			}
			if !strings.Contains(err.Error(), "ceiling") {
				t.Fatalf("message %q", err)
			}
		})
	}
}

func TestEventsKeepIdleTimerAlive(t *testing.T) {
	up := upstreamfake.Start()
	defer up.Close()
	// ~12 events 150ms apart: the stream lasts ~1.8s, far longer than the 1s idle window.
	up.Enqueue(upstreamfake.Reply{Thinking: "let me think about it", Text: "- [[1:bash]] ok", ChunkDelay: 150 * time.Millisecond})
	l := newLLM(t, wire.Anthropic, up.URL, ThinkingLow, time.Second, 0)
	res, err := l.Summarize(context.Background(), batchReq("b"))
	if err != nil || res.Text != "- [[1:bash]] ok" {
		t.Fatalf("res %+v err %v", res, err)
	}
}

func TestFailureClassification(t *testing.T) {
	up := upstreamfake.Start()
	defer up.Close()
	sse := func(s string) upstreamfake.Reply {
		return upstreamfake.Reply{Raw: []byte(s), ContentType: "text/event-stream"}
	}
	cases := []struct {
		name  string
		f     wire.Format
		reply upstreamfake.Reply
		kind  ErrorKind
		code  int
	}{
		{"401", wire.Anthropic, upstreamfake.Reply{Status: 401, ErrorType: "authentication_error", ErrorMessage: "invalid x-api-key"}, KindAuth, 401},
		{"529", wire.Anthropic, upstreamfake.Reply{Status: 529, ErrorType: "overloaded_error", ErrorMessage: "Overloaded"}, KindTransient, 529},
		{"429-openai", wire.OpenAI, upstreamfake.Reply{Status: 429, ErrorType: "rate_limit_exceeded", ErrorMessage: "slow down"}, KindTransient, 429},
		{"400", wire.Anthropic, upstreamfake.Reply{Status: 400, ErrorType: "invalid_request_error", ErrorMessage: "prompt is too long"}, KindRejected, 400},
		{"404", wire.Anthropic, upstreamfake.Reply{Status: 404, ErrorType: "not_found_error", ErrorMessage: "model: claude-gone"}, KindRejected, 404},
		{"422-openai", wire.OpenAI, upstreamfake.Reply{Status: 422, ErrorType: "invalid_request_error", ErrorMessage: "unprocessable"}, KindRejected, 422},
		{"408", wire.Anthropic, upstreamfake.Reply{Status: 408, ErrorType: "timeout_error", ErrorMessage: "request timeout"}, KindTransient, 408},
		{"empty-text", wire.Anthropic, upstreamfake.Reply{Text: " \n"}, KindUnusable, 0},
		{"429-responses", wire.Responses, upstreamfake.Reply{Status: 429, ErrorType: "rate_limit_exceeded", ErrorMessage: "slow down"}, KindTransient, 429},
		{"400-responses", wire.Responses, upstreamfake.Reply{Status: 400, ErrorType: "invalid_request_error", ErrorMessage: "bad input"}, KindRejected, 400},
		{"incomplete-responses", wire.Responses, upstreamfake.Reply{Text: "cut", Stop: "max_output_tokens"}, KindUnusable, 0},
		{"empty-responses", wire.Responses, upstreamfake.Reply{Text: " "}, KindUnusable, 0},
		{"failed-responses", wire.Responses, sse("event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"boom\"}},\"sequence_number\":0}\n\n"), KindTransient, 0},
		{"error-event-responses", wire.Responses, sse("event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"boom\",\"param\":null,\"sequence_number\":0}\n\n"), KindTransient, 0},
		{"truncated-responses", wire.Responses, sse("event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"half\",\"sequence_number\":0}\n\n"), KindTransient, 0},
		{"max-tokens", wire.Anthropic, sse("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n" +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"cut\"}}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\"},\"usage\":{\"output_tokens\":9}}\n\n" +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"), KindUnusable, 0},
		{"length-openai", wire.OpenAI, sse("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"cut\"},\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n"), KindUnusable, 0},
		{"stream-error-event", wire.Anthropic, sse("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5}}}\n\n" +
			"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"), KindTransient, 0},
		{"truncated-stream", wire.Anthropic, sse("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5}}}\n\n" +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"half\"}}\n\n"), KindTransient, 0},
		{"malformed-json", wire.OpenAI, sse("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"\n\n"), KindTransient, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			up.Enqueue(c.reply)
			l := newLLM(t, c.f, up.URL, ThinkingOff, time.Second, 5*time.Second)
			_, err := l.Summarize(context.Background(), batchReq("b"))
			var e *Error
			if !errors.As(err, &e) || e.Kind != c.kind || e.Status != c.code {
				t.Fatalf("err = %#v (%v), want kind %v status %d", err, err, c.kind, c.code)
			}
		})
	}
	t.Run("no-key", func(t *testing.T) {
		l, _ := NewLLM(LLMOptions{Endpoint: Endpoint{Format: wire.Anthropic, BaseURL: up.URL, Model: "m"}})
		if _, err := l.Summarize(context.Background(), batchReq("b")); !errors.Is(err, ErrAuth) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("empty-prompt", func(t *testing.T) {
		l := newLLM(t, wire.Anthropic, up.URL, ThinkingOff, 0, 0)
		if _, err := l.Summarize(context.Background(), &Request{ID: "x"}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("bad-thinking", func(t *testing.T) {
		if _, err := ParseThinking("extreme"); !errors.Is(err, ErrInvalid) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestCallerCancellationIsNotATimeout(t *testing.T) {
	up := upstreamfake.Start()
	defer up.Close()
	up.Enqueue(upstreamfake.Reply{Text: "slow", Delay: 300 * time.Millisecond})
	l := newLLM(t, wire.Anthropic, up.URL, ThinkingOff, 2*time.Second, 2*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := l.Summarize(ctx, batchReq("b"))
	if !errors.Is(err, context.DeadlineExceeded) || KindOf(err) != 0 {
		t.Fatalf("err = %v", err)
	}
	pre, c2 := context.WithCancel(context.Background())
	c2()
	if _, err := l.Summarize(pre, batchReq("b")); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

// TestRunParallelBounded runs 8 batches with parallelism 3 against the fake upstream and
// checks every outcome and that the number of requests in flight peaked at exactly 3.
func TestRunParallelBounded(t *testing.T) {
	up := upstreamfake.Start()
	defer up.Close()
	up.SetResponder(func(r upstreamfake.Recorded) upstreamfake.Reply {
		id := gjson.GetBytes(r.Body, "messages.0.content").String()
		return upstreamfake.Reply{Text: "summary of " + id, Delay: 300 * time.Millisecond} // calls overlap
	})
	l := newLLM(t, wire.Anthropic, up.URL, ThinkingOff, 2*time.Second, 10*time.Second)
	var reqs []*Request
	for i := 0; i < 8; i++ {
		reqs = append(reqs, &Request{ID: fmt.Sprintf("b%d", i), Prompt: fmt.Sprintf("p%d", i)})
	}
	cs := &concurrencySpy{s: l}
	out := Run(context.Background(), cs, reqs, 3)
	for i, o := range out {
		if o.Err != nil || o.ID != fmt.Sprintf("b%d", i) || o.Result.Text != fmt.Sprintf("summary of p%d", i) {
			t.Fatalf("outcome %d: %+v", i, o)
		}
	}
	if p := cs.peak.Load(); p != 3 {
		t.Fatalf("peak in flight %d, want 3", p)
	}
}

func TestRunStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out := Run(ctx, Extractive{}, []*Request{{ID: "a", Prompt: "x"}, {ID: "b", Prompt: "y"}}, 1)
	for _, o := range out {
		if !errors.Is(o.Err, context.Canceled) {
			t.Fatalf("%+v", o)
		}
	}
}

func TestHeadersPassThrough(t *testing.T) {
	up := upstreamfake.Start()
	defer up.Close()
	l, err := NewLLM(LLMOptions{Endpoint: Endpoint{Format: wire.Anthropic, BaseURL: up.URL + "/", Model: "m",
		Header: http.Header{"Authorization": {"Bearer client-token"}, "Anthropic-Beta": {"x-1"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Summarize(context.Background(), batchReq("b")); err != nil {
		t.Fatal(err)
	}
	r, _ := up.Last()
	if r.Header.Get("Authorization") != "Bearer client-token" || r.Header.Get("anthropic-beta") != "x-1" || r.Header.Get("x-api-key") != "" {
		t.Fatalf("headers %v", r.Header)
	}
}

// concurrencySpy records how many Summarize calls of the real summarizer s overlap.
type concurrencySpy struct {
	s        Summarizer
	inflight atomic.Int32
	peak     atomic.Int32
}

func (c *concurrencySpy) Summarize(ctx context.Context, r *Request) (*Result, error) {
	n := c.inflight.Add(1)
	for {
		p := c.peak.Load()
		if n <= p || c.peak.CompareAndSwap(p, n) {
			break
		}
	}
	defer c.inflight.Add(-1)
	return c.s.Summarize(ctx, r)
}
