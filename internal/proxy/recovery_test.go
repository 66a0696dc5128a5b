package proxy

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/upstreamfake"
	"github.com/condense-dev/condense/internal/wire"
)

var queryCall = upstreamfake.ToolCall{ID: "toolu_q1", Name: pruner.QueryToolName, Input: `{"toolCallIds":["t1"]}`}

// TestContinuationErrorReachesTheClient: when the provider refuses the continuation the
// proxy sends after answering a context_tree_query call itself, the client gets that error —
// as it came for a JSON answer, as an error event and an aborted stream for an Anthropic
// stream, an aborted stream for OpenAI — never a 200 with an empty assistant message, and
// nothing is stored for the turn.
func TestContinuationErrorReachesTheClient(t *testing.T) {
	overloaded := upstreamfake.Reply{Status: 529, ErrorType: "overloaded_error", ErrorMessage: "Overloaded",
		Header: map[string][]string{"Retry-After": {"7"}}}
	for _, stream := range []bool{false, true} {
		name := map[bool]string{false: "json", true: "sse"}[stream]
		t.Run("anthropic-"+name, func(t *testing.T) {
			r := newRig(t, nil, nil, nil)
			msgs, c := conversation(t, r, "cont-a", stream)
			r.up.Enqueue(upstreamfake.Reply{Text: "Checking.", ToolCalls: []upstreamfake.ToolCall{queryCall}}, overloaded)
			msgs = append(msgs, anthropic.NewUserMessage(anthropic.NewTextBlock("what did the build print?")))
			var err error
			var m anthropic.Message
			if stream {
				st := c.Messages.NewStreaming(context.Background(), aParams(msgs))
				for st.Next() {
					_ = m.Accumulate(st.Current())
				}
				err = st.Err()
			} else {
				var got *anthropic.Message
				got, err = c.Messages.New(context.Background(), aParams(msgs))
				if got != nil {
					m = *got
				}
			}
			var apiErr *anthropic.Error
			switch {
			case err == nil:
				t.Fatalf("the client got a 200 (%s, content %+v) for a refused continuation", m.StopReason, m.Content)
			case !stream && (!errors.As(err, &apiErr) || apiErr.StatusCode != 529 || apiErr.Response.Header.Get("Retry-After") != "7" || !strings.Contains(apiErr.RawJSON(), "overloaded_error")):
				t.Fatalf("want the provider's 529 as it came, got %v", err)
			case stream && !strings.Contains(err.Error(), "overloaded_error"):
				t.Fatalf("want the provider's overloaded_error in the stream, got %v", err)
			}
			if v := testutil.ToFloat64(r.px.met.Recoveries.WithLabelValues("failed")); v != 1 {
				t.Fatalf("failed continuations counted %v times", v)
			}
			snap, _ := r.st.Load(context.Background(), "cont-a")
			if hasSplices(snap.Stats) {
				t.Fatal("a hidden exchange was stored for a turn the client never got")
			}
			// The client retries the same request: it goes out valid and is answered.
			r.up.Enqueue(upstreamfake.Reply{ToolCalls: []upstreamfake.ToolCall{queryCall}}, upstreamfake.Reply{Text: "It printed 60 lines."})
			if m := aTurn(t, c, msgs, stream); m.StopReason != "end_turn" || len(m.Content) != 1 || m.Content[0].Text != "It printed 60 lines." {
				t.Fatalf("retry: %+v %s", m.Content, m.StopReason)
			}
			lastModelRequest(t, r.up, wire.Anthropic)
		})
		t.Run("openai-"+name, func(t *testing.T) {
			r := newRig(t, nil, nil, nil)
			r.up.Enqueue(upstreamfake.Reply{ToolCalls: []upstreamfake.ToolCall{queryCall}},
				upstreamfake.Reply{Status: 429, ErrorType: "rate_limit_exceeded", ErrorMessage: "slow down"})
			p := openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("what did the build print?")}}
			var err error
			var cc *openai.ChatCompletion
			if stream {
				st := r.openai("cont-o").Chat.Completions.NewStreaming(context.Background(), p)
				var acc openai.ChatCompletionAccumulator
				for st.Next() {
					acc.AddChunk(st.Current())
				}
				err, cc = st.Err(), &acc.ChatCompletion
			} else {
				cc, err = r.openai("cont-o").Chat.Completions.New(context.Background(), p)
			}
			var oErr *openai.Error
			switch {
			case err == nil:
				t.Fatalf("the client got a 200 (%+v) for a refused continuation", cc.Choices)
			case !stream && (!errors.As(err, &oErr) || oErr.StatusCode != 429 || oErr.Message != "slow down"):
				t.Fatalf("want the provider's 429 as it came, got %v", err)
			}
		})
	}
}

// TestHiddenCallsNeverLeaveAnEmptyMessage: when the proxy hides a context_tree_query call it
// does not answer at once (in-proxy answering off, or the answer cut off by max_tokens) and
// the model said nothing else, the client still gets a non-empty assistant message (an empty
// one is invalid when replayed), and the next request goes out valid.
func TestHiddenCallsNeverLeaveAnEmptyMessage(t *testing.T) {
	cases := map[string]struct {
		rounds int
		reply  upstreamfake.Reply
		stop   string
	}{
		"deferred": {0, upstreamfake.Reply{ToolCalls: []upstreamfake.ToolCall{queryCall}}, "end_turn"},
		"dropped":  {3, upstreamfake.Reply{ToolCalls: []upstreamfake.ToolCall{queryCall}, Stop: "max_tokens"}, "max_tokens"},
	}
	for name, tc := range cases {
		for _, stream := range []bool{false, true} {
			t.Run(name+"/anthropic-"+map[bool]string{false: "json", true: "sse"}[stream], func(t *testing.T) {
				r := newRig(t, nil, nil, func(o *Options) { o.MaxRecoveryRounds = tc.rounds })
				msgs, c := conversation(t, r, "hidden-only", stream)
				r.up.Enqueue(tc.reply)
				msgs = append(msgs, anthropic.NewUserMessage(anthropic.NewTextBlock("what did the build print?")))
				m := aTurn(t, c, msgs, stream)
				if string(m.StopReason) != tc.stop || len(m.Content) == 0 || m.Content[0].Text == "" {
					t.Fatalf("client saw %+v %s", m.Content, m.StopReason)
				}
				r.up.Enqueue(upstreamfake.Reply{Text: "It printed 60 lines."})
				aTurn(t, c, append(msgs, m.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock("go on"))), stream)
				lastModelRequest(t, r.up, wire.Anthropic)
			})
			t.Run(name+"/openai-"+map[bool]string{false: "json", true: "sse"}[stream], func(t *testing.T) {
				r := newRig(t, nil, nil, func(o *Options) { o.MaxRecoveryRounds = tc.rounds })
				reply := tc.reply
				if reply.Stop == "max_tokens" {
					reply.Stop = "length"
				}
				r.up.Enqueue(reply)
				c := r.openai("hidden-only-o")
				msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("what did the build print?")}
				cc := oTurn(t, c, openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: msgs}, stream)
				if ch := cc.Choices[0]; ch.Message.Content == "" || len(ch.Message.ToolCalls) != 0 {
					t.Fatalf("client saw %+v finish=%s", ch.Message, ch.FinishReason)
				}
				r.up.Enqueue(upstreamfake.Reply{Text: "It printed 60 lines."})
				msgs = append(msgs, cc.Choices[0].Message.ToParam(), openai.UserMessage("go on"))
				oTurn(t, c, openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: msgs}, stream)
				lastModelRequest(t, r.up, wire.OpenAI)
			})
		}
	}
}
