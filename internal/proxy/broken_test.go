package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/upstreamfake"
)

// longText is an answer long enough that the fake streams it in several large deltas.
var longText = strings.Repeat("a long answer that streams ", 120)

// postRaw posts body and reads the whole response, returning the read error too.
func postRaw(t *testing.T, url, body string) (*http.Response, string, error) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set(HeaderSession, "broken")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

// TestBrokenUpstreamIsAnErrorForTheClient: when the provider's connection breaks partway
// through a response the proxy relays, the client sees an error — an Anthropic stream gets an
// error event, and the connection is aborted in every case — never a cleanly ended, truncated
// answer. Each break is counted.
func TestBrokenUpstreamIsAnErrorForTheClient(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	broken := func(ep string) float64 {
		return testutil.ToFloat64(r.px.met.UpstreamBroken.WithLabelValues(ep))
	}
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("explain"))}

	t.Run("anthropic-sdk-stream", func(t *testing.T) {
		r.up.Enqueue(upstreamfake.Reply{Text: longText, Cut: 2200})
		st := r.anthropic("broken").Messages.NewStreaming(context.Background(), aParams(msgs))
		var m anthropic.Message
		for st.Next() {
			_ = m.Accumulate(st.Current())
		}
		if err := st.Err(); err == nil || !strings.Contains(err.Error(), "api_error") || len(m.Content) == 0 || m.Content[0].Text == "" {
			t.Fatalf("client saw %+v, err %v", m.Content, err)
		}
	})
	t.Run("anthropic-raw-stream", func(t *testing.T) {
		r.up.Enqueue(upstreamfake.Reply{Text: longText, Cut: 2200})
		_, b, err := postRaw(t, r.http.URL+"/v1/messages", `{"model":"m","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
		if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.HasSuffix(b, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"condense proxy: the provider's response broke off: unexpected EOF\"}}\n\n") {
			t.Fatalf("read err %v, body ends %q", err, b[max(0, len(b)-200):])
		}
	})
	t.Run("anthropic-continuation", func(t *testing.T) {
		r.up.Enqueue(
			upstreamfake.Reply{Text: "Checking.", ToolCalls: []upstreamfake.ToolCall{{ID: "toolu_q", Name: pruner.QueryToolName, Input: `{"toolCallIds":["t1"]}`}}},
			upstreamfake.Reply{Text: longText, Cut: 2200},
		)
		st := r.anthropic("broken").Messages.NewStreaming(context.Background(), aParams(msgs))
		for st.Next() {
		}
		if err := st.Err(); err == nil || !strings.Contains(err.Error(), "api_error") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("openai-sdk-stream", func(t *testing.T) {
		r.up.Enqueue(upstreamfake.Reply{Text: longText, Cut: 2200})
		st := r.openai("broken").Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{Model: "gpt-4o",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("explain")}})
		var acc openai.ChatCompletionAccumulator
		for st.Next() {
			acc.AddChunk(st.Current())
		}
		if err := st.Err(); err == nil || len(acc.Choices) == 0 || acc.Choices[0].Message.Content == "" {
			t.Fatalf("client saw %+v, err %v", acc.Choices, err)
		}
	})
	t.Run("openai-several-choices", func(t *testing.T) {
		r.up.Enqueue(upstreamfake.Reply{Raw: []byte(rawOpenAITwoChoices), ContentType: "text/event-stream", Cut: 400})
		_, _, err := postRaw(t, r.http.URL+"/v1/chat/completions", `{"model":"m","stream":true,"n":2,"messages":[{"role":"user","content":"hi"}]}`)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("read err %v", err)
		}
	})
	t.Run("relayed-error", func(t *testing.T) {
		r.up.Enqueue(upstreamfake.Reply{Status: 529, Raw: []byte(`{"type":"error","error":{"type":"overloaded_error","message":"` + longText + `"}}`), Cut: 100})
		resp, _, err := postRaw(t, r.http.URL+"/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)
		if resp.StatusCode != 529 || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("%d, read err %v", resp.StatusCode, err)
		}
	})
	t.Run("json", func(t *testing.T) {
		r.up.Enqueue(upstreamfake.Reply{Text: longText, Cut: 100})
		_, err := r.anthropic("broken").Messages.New(context.Background(), aParams(msgs))
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadGateway {
			t.Fatalf("err %v", err)
		}
	})
	if m, c := broken("messages"), broken("chat_completions"); m != 5 || c != 2 {
		t.Fatalf("counted %v broken messages, %v broken chat completions responses", m, c)
	}
}
