package proxy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/upstreamfake"
	"github.com/condense-dev/condense/internal/wire"
)

// responsesVariants runs a test for each kind of Responses client, streamed or not:
// Codex-like (store false, ids dropped when items are sent back) or an openai-go user who
// appends the output as it came. Each gets a rig and a session past codexConversation, its
// next user message, prompt, added.
func responsesVariants(t *testing.T, session, prompt string, run func(t *testing.T, r *rig, cs *codexSession)) {
	for _, stream := range []bool{false, true} {
		for _, keep := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/%s", map[bool]string{false: "json", true: "sse"}[stream], map[bool]string{false: "codex", true: "ids"}[keep]), func(t *testing.T) {
				r := newRig(t, nil, nil, nil)
				cs := r.codex(session, stream)
				cs.keepIDs = keep
				codexConversation(t, r, cs)
				cs.user(prompt)
				run(t, r, cs)
			})
		}
	}
}

// TestResponsesAPIQueryAnsweredInProxy: the model calls context_tree_query alone (after a
// reasoning item); the proxy answers it with the original output byte for byte, continues
// upstream with the call and its output appended, and the client gets one coherent response
// without the query's items and with the usage summed; the next request carries the hidden
// exchange where it happened, its items as the continuation sent them.
func TestResponsesAPIQueryAnsweredInProxy(t *testing.T) {
	responsesVariants(t, "codex-query", "What did line 42 say?", func(t *testing.T, r *rig, cs *codexSession) {
		r.up.Enqueue(
			upstreamfake.Reply{Thinking: "I need the log.", ToolCalls: []upstreamfake.ToolCall{{ID: "call_q1", Name: pruner.QueryToolName, Input: `{"toolCallIds":["t1"]}`}},
				Usage: upstreamfake.Usage{InputTokens: 100, CacheReadTokens: 50, OutputTokens: 10}},
			upstreamfake.Reply{Thinking: "Found it.", Text: "Line 42 says the build passed.", Usage: upstreamfake.Usage{InputTokens: 120, CacheReadTokens: 80, OutputTokens: 7}},
		)
		before := len(r.up.Requests())
		resp := cs.turn(t)
		if got := fmt.Sprint(outputTypes(resp)); got != "[reasoning message]" || resp.OutputText() != "Line 42 says the build passed." || resp.Status != "completed" {
			t.Fatalf("client saw %s: %s", got, resp.RawJSON())
		}
		if u := resp.Usage; u.InputTokens != 350 || u.InputTokensDetails.CachedTokens != 130 || u.OutputTokens != 17 || u.TotalTokens != 367 {
			t.Fatalf("usage not summed: %s", u.RawJSON())
		}
		reqs := r.up.Requests()[before:]
		if len(reqs) != 2 {
			t.Fatalf("upstream got %d requests, want 2", len(reqs))
		}
		mustValid(t, wire.Responses, reqs[0].Body)
		mustValid(t, wire.Responses, reqs[1].Body)
		if !strings.HasPrefix(inputPrefix(reqs[1].Body), inputPrefix(reqs[0].Body)) {
			t.Fatalf("the continuation does not extend the request:\n%s\n%s", reqs[0].Body, reqs[1].Body)
		}
		items := gjson.GetBytes(reqs[1].Body, "input").Array()
		rs, fc, out := items[len(items)-3], items[len(items)-2], items[len(items)-1]
		if rs.Get("type").Str != "reasoning" || rs.Get("encrypted_content").Str == "" || fc.Get("name").Str != pruner.QueryToolName || fc.Get("call_id").Str != "call_q1" {
			t.Fatalf("the continuation does not append the model's items: %s %s", rs.Raw, fc.Raw)
		}
		if fc.Get("id").Exists() != cs.keepIDs || rs.Get("id").Exists() != cs.keepIDs {
			t.Fatalf("item ids (store %s): %s %s", gjson.GetBytes(reqs[1].Body, "store").Raw, rs.Raw, fc.Raw)
		}
		if out.Get("type").Str != "function_call_output" || out.Get("call_id").Str != "call_q1" || !strings.Contains(out.Get("output").Str, codexOutput(0, bigOutput("build", 60))) {
			t.Fatalf("the continuation does not carry the original output: %s", out.Raw)
		}
		cs.user("Thanks.")
		r.up.Enqueue(upstreamfake.Reply{Text: "You're welcome."})
		cs.turn(t)
		rec, next := lastModelRequest(t, r.up, wire.Responses)
		n := len(next.Messages)
		q, res, final := next.Messages[n-4], next.Messages[n-3], next.Messages[n-2]
		if q.Role != wire.RoleAssistant || q.Blocks[len(q.Blocks)-1].Name != pruner.QueryToolName || res.Blocks[0].ID != "call_q1" || final.Blocks[len(final.Blocks)-1].Text() != "Line 42 says the build passed." {
			t.Fatalf("hidden exchange not re-inserted in place: %s / %s / %s", q.Raw(), res.Raw(), final.Raw())
		}
		if !strings.Contains(string(rec.Body), rs.Raw) || !strings.Contains(string(rec.Body), fc.Raw) {
			t.Fatalf("the hidden items changed between the continuation and the next request:\n%s\n%s\n%s", rs.Raw, fc.Raw, rec.Body)
		}
	})
}

// TestResponsesAPIQueryMixedWithClientCalls: a context_tree_query call (and the reasoning before
// it) next to a client call is hidden from the client, answered at once, and on the next
// request the model's items come back whole with the query's output before the client's.
func TestResponsesAPIQueryMixedWithClientCalls(t *testing.T) {
	responsesVariants(t, "codex-mixed", "status?", func(t *testing.T, r *rig, cs *codexSession) {
		r.up.Enqueue(upstreamfake.Reply{Thinking: "Two things.", ToolCalls: []upstreamfake.ToolCall{
			{ID: "call_q2", Name: pruner.QueryToolName, Input: `{"toolCallIds":["t1"]}`},
			{ID: "call_c2", Name: "exec_command", Input: `{"cmd":"git status"}`},
		}})
		resp := cs.turn(t)
		if got := fmt.Sprint(outputTypes(resp)); got != "[function_call]" || resp.Output[0].CallID != "call_c2" || resp.Status != "completed" {
			t.Fatalf("client saw %s: %s", got, resp.RawJSON())
		}
		cs.output("call_c2", codexOutput(0, "nothing to commit"))
		r.up.Enqueue(upstreamfake.Reply{Text: "Clean."})
		cs.turn(t)
		_, next := lastModelRequest(t, r.up, wire.Responses)
		n := len(next.Messages)
		asst, q, c := next.Messages[n-3], next.Messages[n-2], next.Messages[n-1]
		if len(asst.Blocks) != 3 || asst.Blocks[0].Kind != wire.KindReasoning || asst.Blocks[1].Name != pruner.QueryToolName || asst.Blocks[2].ID != "call_c2" {
			t.Fatalf("the model's items not restored: %s", asst.Raw())
		}
		if q.Blocks[0].ID != "call_q2" || !strings.Contains(q.Blocks[0].ResultText(), "build line 042") || c.Blocks[0].ID != "call_c2" {
			t.Fatalf("query not answered before the client's output: %s / %s", q.Raw(), c.Raw())
		}
	})
}

// TestResponsesAPIHiddenCallsNeverLeaveAnEmptyResponse: a query call the proxy hides without
// answering at once (in-proxy answering off, or the answer cut off) leaves the client a
// message item without id (none the provider made), never an empty output, and the next
// request goes out valid.
func TestResponsesAPIHiddenCallsNeverLeaveAnEmptyResponse(t *testing.T) {
	cases := map[string]struct {
		rounds int
		reply  upstreamfake.Reply
		status string
	}{
		"deferred": {0, upstreamfake.Reply{Thinking: "hm", ToolCalls: []upstreamfake.ToolCall{{ID: "call_q3", Name: pruner.QueryToolName, Input: `{"toolCallIds":["t1"]}`}}}, "completed"},
		"dropped":  {3, upstreamfake.Reply{ToolCalls: []upstreamfake.ToolCall{{ID: "call_q3", Name: pruner.QueryToolName, Input: `{}`}}, Stop: "max_output_tokens"}, "incomplete"},
	}
	for name, tc := range cases {
		for _, stream := range []bool{false, true} {
			t.Run(name+"/"+map[bool]string{false: "json", true: "sse"}[stream], func(t *testing.T) {
				r := newRig(t, nil, nil, func(o *Options) { o.MaxRecoveryRounds = tc.rounds })
				cs := codexConversation(t, r, r.codex("codex-hidden", stream))
				cs.user("what did the build print?")
				r.up.Enqueue(tc.reply)
				resp := cs.turn(t)
				if fmt.Sprint(outputTypes(resp)) != "[message]" || resp.OutputText() != hiddenOnlyText || string(resp.Status) != tc.status || resp.Output[0].ID != "" {
					t.Fatalf("client saw %s", resp.RawJSON())
				}
				cs.user("go on")
				r.up.Enqueue(upstreamfake.Reply{Text: "It printed 60 lines."})
				cs.turn(t)
				rec, _ := lastModelRequest(t, r.up, wire.Responses)
				if restored := strings.Contains(string(rec.Body), `"call_id":"call_q3"`); restored != (name == "deferred") {
					t.Fatalf("query call restored %v: %s", restored, rec.Body)
				}
			})
		}
	}
}

// TestResponsesAPIContinuationErrorReachesTheClient: a refused continuation fails the client's
// request — the provider's error as it came for a JSON answer, an error event (numbered on)
// and an aborted stream for a streamed one — and nothing is stored for the turn.
func TestResponsesAPIContinuationErrorReachesTheClient(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "sse"}[stream], func(t *testing.T) {
			r := newRig(t, nil, nil, nil)
			cs := r.codex("codex-cont", stream)
			cs.user("what did the build print?")
			r.up.Enqueue(upstreamfake.Reply{Text: "Checking.", ToolCalls: []upstreamfake.ToolCall{{ID: "call_q4", Name: pruner.QueryToolName, Input: `{}`}}},
				upstreamfake.Reply{Status: 429, ErrorType: "rate_limit_exceeded", ErrorMessage: "slow down"})
			var err error
			var evs []responses.ResponseStreamEventUnion
			if stream {
				st := cs.c.Responses.NewStreaming(context.Background(), cs.params())
				for st.Next() {
					evs = append(evs, st.Current())
				}
				err = st.Err()
			} else {
				_, err = cs.c.Responses.New(context.Background(), cs.params())
			}
			var oErr *openai.Error
			switch {
			case err == nil:
				t.Fatal("the client got a whole response for a refused continuation")
			case !stream && (!errors.As(err, &oErr) || oErr.StatusCode != 429 || oErr.Message != "slow down"):
				t.Fatalf("want the provider's 429 as it came, got %v", err)
			case stream:
				last := evs[len(evs)-1]
				if last.Type != "error" || last.Message != "slow down" || last.Code != "rate_limit_exceeded" || last.SequenceNumber != evs[len(evs)-2].SequenceNumber+1 {
					t.Fatalf("stream ended with %s", last.RawJSON())
				}
			}
			if v := testutil.ToFloat64(r.px.met.Recoveries.WithLabelValues("failed")); v != 1 {
				t.Fatalf("failed continuations counted %v times", v)
			}
			r.settle()
			if snap, _ := r.st.Load(context.Background(), "codex-cont"); hasSplices(snap.Stats) {
				t.Fatal("a hidden exchange was stored for a turn the client never got")
			}
		})
	}
}
