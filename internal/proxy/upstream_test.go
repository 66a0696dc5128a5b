package proxy

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/condense-dev/condense/internal/upstreamfake"
)

// TestUpstreamBounds: a provider that sends no headers, stalls mid-response, or sends an
// answer or an event past the size bound never holds the proxy: the client gets a
// provider-shaped 502 (nothing relayed yet) or an aborted stream (an Anthropic stream after an
// error event), and each case is counted by its limit.
func TestUpstreamBounds(t *testing.T) {
	r := newRig(t, nil, nil, func(o *Options) {
		o.UpstreamHeaderTimeout = 200 * time.Millisecond
		o.UpstreamIdleTimeout = 200 * time.Millisecond
		o.MaxResponseBytes = 4096
	})
	limits := func(ep, limit string) float64 {
		return testutil.ToFloat64(r.px.met.UpstreamLimits.WithLabelValues(ep, limit))
	}
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("explain"))}
	oParams := openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("explain")}}
	apiError := func(t *testing.T, err error, status int, code string) {
		t.Helper()
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != status || apiErr.Response.Header.Get("X-Condense-Error") != code {
			t.Fatalf("want a %d %s, got %v", status, code, err)
		}
	}

	t.Run("no-headers", func(t *testing.T) {
		r.up.Enqueue(upstreamfake.Reply{Text: "late", Delay: time.Hour})
		_, err := r.anthropic("bounds").Messages.New(context.Background(), aParams(msgs))
		apiError(t, err, 502, "upstream_timeout")
		if v := limits("messages", limitHeaderTimeout); v != 1 {
			t.Fatalf("header_timeout counted %v times", v)
		}
	})
	t.Run("json-stalls", func(t *testing.T) {
		r.up.Enqueue(upstreamfake.Reply{Text: "an answer that stalls", Stall: 20})
		_, err := r.anthropic("bounds").Messages.New(context.Background(), aParams(msgs))
		apiError(t, err, 502, "upstream_read_failed")
		if v := limits("messages", limitIdleTimeout); v != 1 {
			t.Fatalf("idle_timeout counted %v times", v)
		}
	})
	t.Run("anthropic-stream-stalls", func(t *testing.T) {
		r.up.Enqueue(upstreamfake.Reply{Text: longText, Stall: 1500})
		st := r.anthropic("bounds").Messages.NewStreaming(context.Background(), aParams(msgs))
		var m anthropic.Message
		for st.Next() {
			_ = m.Accumulate(st.Current())
		}
		if err := st.Err(); err == nil || !strings.Contains(err.Error(), "sent nothing") {
			t.Fatalf("client saw %+v, err %v", m.Content, err)
		}
		if v := limits("messages", limitIdleTimeout); v != 2 {
			t.Fatalf("idle_timeout counted %v times", v)
		}
	})
	t.Run("openai-stream-stalls", func(t *testing.T) {
		r.up.Enqueue(upstreamfake.Reply{Text: longText, Stall: 600})
		st := r.openai("bounds").Chat.Completions.NewStreaming(context.Background(), oParams)
		for st.Next() {
		}
		if st.Err() == nil {
			t.Fatal("a stalled stream ended cleanly for the client")
		}
		if v := limits("chat_completions", limitIdleTimeout); v != 1 {
			t.Fatalf("idle_timeout counted %v times", v)
		}
	})
	t.Run("json-too-large", func(t *testing.T) {
		r.up.Enqueue(upstreamfake.Reply{Text: strings.Repeat("x", 8000)})
		_, err := r.anthropic("bounds").Messages.New(context.Background(), aParams(msgs))
		apiError(t, err, 502, "upstream_read_failed")
		if v := limits("messages", limitResponseSize); v != 1 {
			t.Fatalf("response_too_large counted %v times", v)
		}
	})
	t.Run("event-too-large", func(t *testing.T) {
		big := `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` + strings.Repeat("x", 8000) + `"}}`
		r.up.Enqueue(upstreamfake.Reply{ContentType: "text/event-stream", Raw: []byte(
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n" +
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
				"event: content_block_delta\ndata: " + big + "\n\n")})
		st := r.anthropic("bounds").Messages.NewStreaming(context.Background(), aParams(msgs))
		for st.Next() {
		}
		if err := st.Err(); err == nil || !strings.Contains(err.Error(), "exceeds 4096 bytes") {
			t.Fatalf("err %v", err)
		}
		if v := limits("messages", limitEventSize); v != 1 {
			t.Fatalf("event_too_large counted %v times", v)
		}
	})
}
