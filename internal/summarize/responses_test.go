package summarize

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/upstreamfake"
)

// TestResponsesRequestShapePerThinking: a Responses endpoint gets one streamed POST
// {base}/responses — the prompt as input, the system prompt as instructions, nothing stored,
// the thinking level as reasoning.effort with its allowance in max_output_tokens — and the
// summary is the output text, the usage split into uncached and cached input.
func TestResponsesRequestShapePerThinking(t *testing.T) {
	up := upstreamfake.Start()
	defer up.Close()
	for _, c := range effortCases {
		t.Run(string(c.th)+"_", func(t *testing.T) {
			up.Reset()
			up.Enqueue(upstreamfake.Reply{Thinking: "let me see", Text: "- [[1:bash]] listed files", Usage: upstreamfake.Usage{InputTokens: 700, OutputTokens: 30, CacheReadTokens: 300}})
			l := newLLM(t, Responses, up.URL, c.th, time.Second, 5*time.Second)
			res, err := l.Summarize(context.Background(), batchReq("b1"))
			if err != nil {
				t.Fatal(err)
			}
			if res.Text != "- [[1:bash]] listed files" || res.Model != "responses/claude-sonnet-4-5" {
				t.Fatalf("text %q model %s", res.Text, res.Model)
			}
			if res.Usage.InputTokens != 700 || res.Usage.CacheReadTokens != 300 || res.Usage.OutputTokens != 30 {
				t.Fatalf("usage %+v", res.Usage)
			}
			r, _ := up.Last()
			if r.Path != "/v1/responses" || r.Header.Get("Authorization") != "Bearer sk-test" {
				t.Fatalf("path %s headers %v", r.Path, r.Header)
			}
			b := gjson.ParseBytes(r.Body)
			if eff := b.Get("reasoning.effort"); c.effort == "" && b.Get("reasoning").Exists() || c.effort != "" && eff.String() != c.effort {
				t.Fatalf("reasoning %s want effort %q", b.Get("reasoning").Raw, c.effort)
			}
			if b.Get("max_output_tokens").Int() != c.max || !b.Get("stream").Bool() || b.Get("store").Raw != "false" ||
				b.Get("input").String() != batchReq("b1").Prompt || b.Get("instructions").String() != "be brief" || b.Get("messages").Exists() {
				t.Fatalf("body %s", r.Body)
			}
		})
	}
}

// TestResponsesFailureClassification: the Responses API's failures map like the other APIs'.
func TestResponsesFailureClassification(t *testing.T) {
	up := upstreamfake.Start()
	defer up.Close()
	sse := func(s string) upstreamfake.Reply {
		return upstreamfake.Reply{Raw: []byte(s), ContentType: "text/event-stream"}
	}
	cases := []struct {
		name  string
		reply upstreamfake.Reply
		kind  ErrorKind
		code  int
	}{
		{"429", upstreamfake.Reply{Status: 429, ErrorType: "rate_limit_exceeded", ErrorMessage: "slow down"}, KindTransient, 429},
		{"400", upstreamfake.Reply{Status: 400, ErrorType: "invalid_request_error", ErrorMessage: "bad input"}, KindRejected, 400},
		{"incomplete", upstreamfake.Reply{Text: "cut", Stop: "max_output_tokens"}, KindUnusable, 0},
		{"empty", upstreamfake.Reply{Text: " "}, KindUnusable, 0},
		{"failed", sse("event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"boom\"}},\"sequence_number\":0}\n\n"), KindTransient, 0},
		{"error-event", sse("event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"boom\",\"param\":null,\"sequence_number\":0}\n\n"), KindTransient, 0},
		{"truncated", sse("event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"half\",\"sequence_number\":0}\n\n"), KindTransient, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			up.Enqueue(c.reply)
			_, err := newLLM(t, Responses, up.URL, ThinkingOff, time.Second, 5*time.Second).Summarize(context.Background(), batchReq("b"))
			var e *Error
			if !errors.As(err, &e) || e.Kind != c.kind || e.Status != c.code {
				t.Fatalf("err = %#v (%v), want kind %v status %d", err, err, c.kind, c.code)
			}
		})
	}
}

// TestFallbackToResponsesSessionModel: a request of a Responses session falls back, while the
// configured model fails, to the session's model in the Responses API, with the configured
// OpenAI key when the session endpoint carries none.
func TestFallbackToResponsesSessionModel(t *testing.T) {
	up := upstreamfake.Start()
	defer up.Close()
	primary := newLLM(t, OpenAI, up.URL, ThinkingOff, time.Second, 5*time.Second)
	fb := NewFallback(primary)
	up.Enqueue(upstreamfake.Reply{Status: 500, ErrorType: "server_error", ErrorMessage: "down"},
		upstreamfake.Reply{Text: "- [[1:bash]] listed by the session model"})
	req := batchReq("b")
	req.Session = &Endpoint{Format: Responses, BaseURL: up.URL + "/v1", Model: "gpt-5.2-codex"}
	res, err := fb.Summarize(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Fallback || res.Text != "- [[1:bash]] listed by the session model" || res.Model != "responses/gpt-5.2-codex" {
		t.Fatalf("result %+v", res)
	}
	r, _ := up.Last()
	if r.Path != "/v1/responses" || r.Header.Get("Authorization") != "Bearer sk-test" || gjson.GetBytes(r.Body, "model").String() != "gpt-5.2-codex" {
		t.Fatalf("fallback call %s %v %s", r.Path, r.Header, r.Body)
	}
}
