package proxy

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/testutil/redistest"
	"github.com/condense-dev/condense/internal/upstreamfake"
	"github.com/condense-dev/condense/internal/wire"
)

// conversation drives a tool-using Anthropic conversation through the proxy: a tool call
// with a large result, a final answer (which starts a flush), then a new user prompt that
// must arrive upstream pruned.
func conversation(t *testing.T, r *rig, session string, stream bool) ([]anthropic.MessageParam, *anthropic.Client) {
	t.Helper()
	c := r.anthropic(session)
	out := bigOutput("build", 60)
	r.up.Enqueue(
		upstreamfake.Reply{Text: "Let me build.", ToolCalls: []upstreamfake.ToolCall{{ID: "toolu_b1", Name: "bash", Input: `{"cmd":"make build"}`}}},
		upstreamfake.Reply{Text: "The build passed."},
	)
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Please build the project."))}
	m := aTurn(t, c, msgs, stream)
	if m.StopReason != "tool_use" || len(m.Content) != 2 || m.Content[1].Name != "bash" {
		t.Fatalf("turn 1: %+v", m.Content)
	}
	msgs = append(msgs, m.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_b1", out, false)))
	m = aTurn(t, c, msgs, stream)
	if m.StopReason != "end_turn" || m.Content[0].Text != "The build passed." {
		t.Fatalf("turn 2: %+v", m)
	}
	msgs = append(msgs, m.ToParam())
	return msgs, c
}

func TestAnthropicSDKPrunesAfterFinalAnswer(t *testing.T) {
	for _, backend := range []string{"memory", "redis"} {
		for _, stream := range []bool{false, true} {
			t.Run(backend+"/"+map[bool]string{false: "json", true: "sse"}[stream], func(t *testing.T) {
				testPrunesAfterFinalAnswer(t, backend, stream)
			})
		}
	}
}

func testPrunesAfterFinalAnswer(t *testing.T, backend string, stream bool) {
	var st store.Store
	if backend == "redis" {
		rs := redistest.Start(t, nil)
		var err error
		if st, err = store.Open(context.Background(), rs.URL()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
	}
	r := newRig(t, nil, st, nil)
	msgs, c := conversation(t, r, "sess-prune", stream)
	rec2, _ := lastModelRequest(t, r.up, wire.Anthropic)
	if !strings.Contains(string(rec2.Body), "build line 059") {
		t.Fatal("turn 2 must carry the full tool output upstream")
	}
	if rec2.Header.Get("X-Api-Key") != "sk-ant-test" || rec2.Header.Get("Anthropic-Version") == "" || rec2.Header.Get(HeaderSession) != "" {
		t.Fatalf("headers forwarded wrongly: %v", rec2.Header)
	}
	if !strings.Contains(gjson.GetBytes(rec2.Body, "tools.#.name").Raw, `"context_tree_query"`) {
		t.Fatalf("context_tree_query must be added to tools: %s", gjson.GetBytes(rec2.Body, "tools").Raw)
	}
	r.up.Enqueue(upstreamfake.Reply{Text: "Sure."})
	msgs = append(msgs, anthropic.NewUserMessage(anthropic.NewTextBlock("Now run the tests.")))
	aTurn(t, c, msgs, stream)
	rec3, req3 := lastModelRequest(t, r.up, wire.Anthropic)
	body := string(rec3.Body)
	if strings.Contains(body, "build line 030") || !strings.Contains(body, "`t1`") {
		t.Fatalf("turn 3 not pruned:\n%s", body)
	}
	if len(rec3.Body) >= len(rec2.Body) {
		t.Fatalf("pruned body %d bytes, before %d", len(rec3.Body), len(rec2.Body))
	}
	if len(req3.Messages) < 5 {
		t.Fatalf("messages lost: %d", len(req3.Messages))
	}
	if testutil.ToFloat64(r.px.met.RequestsPruned) < 1 {
		t.Fatal("pruned requests not counted")
	}
}

func TestConsecutiveRequestsShareBytePrefix(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	msgs, c := conversation(t, r, "sess-prefix", false)
	// Turn 3 waits for the flush; turn 3's final answer starts another flush with nothing
	// new to summarize, so turn 4 sees the same state: its body must extend turn 3's.
	r.up.Enqueue(upstreamfake.Reply{Text: "ok 3"}, upstreamfake.Reply{Text: "ok 4"})
	msgs = append(msgs, anthropic.NewUserMessage(anthropic.NewTextBlock("third")))
	m := aTurn(t, c, msgs, false)
	rec3, _ := lastModelRequest(t, r.up, wire.Anthropic)
	msgs = append(msgs, m.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock("fourth")))
	time.Sleep(50 * time.Millisecond)
	aTurn(t, c, msgs, false)
	rec4, _ := lastModelRequest(t, r.up, wire.Anthropic)
	p3, p4 := messagesPrefix(rec3.Body), messagesPrefix(rec4.Body)
	if !strings.HasPrefix(p4, p3) {
		t.Fatalf("turn 4 does not extend turn 3 byte for byte:\n3: %s\n4: %s", p3, p4)
	}
	for _, k := range []string{"system", "tools"} {
		if gjson.GetBytes(rec3.Body, k).Raw != gjson.GetBytes(rec4.Body, k).Raw {
			t.Fatalf("%s changed between turns", k)
		}
	}
}

// TestQueryAnsweredInProxy: the model calls context_tree_query alone; the proxy answers it,
// continues upstream and returns one response; the hidden exchange comes back later.
func TestQueryAnsweredInProxy(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "sse"}[stream], func(t *testing.T) {
			r := newRig(t, nil, nil, func(o *Options) {})
			msgs, c := conversation(t, r, "sess-query", stream)
			r.up.Enqueue(
				upstreamfake.Reply{Text: "Let me look at the log.", ToolCalls: []upstreamfake.ToolCall{{ID: "toolu_q1", Name: pruner.QueryToolName, Input: `{"toolCallIds":["t1"]}`}},
					Usage: upstreamfake.Usage{InputTokens: 100, OutputTokens: 10}},
				upstreamfake.Reply{Text: "Line 42 says the build passed.", Usage: upstreamfake.Usage{InputTokens: 120, OutputTokens: 7}},
			)
			msgs = append(msgs, anthropic.NewUserMessage(anthropic.NewTextBlock("What did line 42 say?")))
			before := len(r.up.Requests())
			m := aTurn(t, c, msgs, stream)
			if m.StopReason != "end_turn" || len(m.Content) != 2 || m.Content[0].Text != "Let me look at the log." || m.Content[1].Text != "Line 42 says the build passed." {
				t.Fatalf("client saw %+v", m.Content)
			}
			if m.Usage.OutputTokens != 17 {
				t.Fatalf("usage not summed: %+v", m.Usage)
			}
			reqs := r.up.Requests()[before:]
			if len(reqs) != 2 {
				t.Fatalf("upstream got %d requests, want 2", len(reqs))
			}
			cont := mustValid(t, wire.Anthropic, reqs[1].Body)
			lastMsg := cont.Messages[len(cont.Messages)-1]
			if lastMsg.Role != wire.RoleUser || lastMsg.Blocks[0].Kind != wire.KindToolResult || !strings.Contains(lastMsg.Blocks[0].ResultText(), "build line 042") {
				t.Fatalf("continuation does not carry the recovered output: %s", lastMsg.Raw())
			}
			// Next turn: the hidden exchange is re-inserted where it happened.
			r.up.Enqueue(upstreamfake.Reply{Text: "You're welcome."})
			msgs = append(msgs, m.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock("Thanks.")))
			aTurn(t, c, msgs, stream)
			_, next := lastModelRequest(t, r.up, wire.Anthropic)
			n := len(next.Messages)
			if n != len(msgs)+2 {
				t.Fatalf("want %d messages upstream (client %d + hidden 2), got %d", len(msgs)+2, len(msgs), n)
			}
			q := next.Messages[n-4]
			if q.Role != wire.RoleAssistant || q.Blocks[len(q.Blocks)-1].Name != pruner.QueryToolName || next.Messages[n-3].Blocks[0].ID != "toolu_q1" {
				t.Fatalf("hidden exchange not re-inserted in place: %s / %s", q.Raw(), next.Messages[n-3].Raw())
			}
			if next.Messages[n-2].Blocks[0].Text() != "Line 42 says the build passed." {
				t.Fatalf("final round misplaced: %s", next.Messages[n-2].Raw())
			}
		})
	}
}

// TestQueryMixedWithClientCalls: context_tree_query next to a client tool call is hidden from
// the client and answered on the next request.
func TestQueryMixedWithClientCalls(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "sse"}[stream], func(t *testing.T) {
			r := newRig(t, nil, nil, nil)
			msgs, c := conversation(t, r, "sess-mixed", stream)
			r.up.Enqueue(upstreamfake.Reply{Text: "Checking.", ToolCalls: []upstreamfake.ToolCall{
				{ID: "toolu_q2", Name: pruner.QueryToolName, Input: `{"toolCallIds":["t1"]}`},
				{ID: "toolu_c2", Name: "bash", Input: `{"cmd":"git status"}`},
			}})
			msgs = append(msgs, anthropic.NewUserMessage(anthropic.NewTextBlock("status?")))
			m := aTurn(t, c, msgs, stream)
			if len(m.Content) != 2 || m.Content[1].ID != "toolu_c2" || m.StopReason != "tool_use" {
				t.Fatalf("client saw %+v", m.Content)
			}
			r.up.Enqueue(upstreamfake.Reply{Text: "Clean."})
			msgs = append(msgs, m.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_c2", "nothing to commit", false)))
			aTurn(t, c, msgs, stream)
			_, next := lastModelRequest(t, r.up, wire.Anthropic)
			n := len(next.Messages)
			asst, user := next.Messages[n-2], next.Messages[n-1]
			if len(asst.Blocks) != 3 || asst.Blocks[1].Name != pruner.QueryToolName {
				t.Fatalf("assistant not restored: %s", asst.Raw())
			}
			if len(user.Blocks) != 2 || user.Blocks[0].ID != "toolu_q2" || !strings.Contains(user.Blocks[0].ResultText(), "build line") || user.Blocks[1].ID != "toolu_c2" {
				t.Fatalf("query result not answered: %s", user.Raw())
			}
		})
	}
}

func TestUpstreamErrorRelayedAsIs(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	r.up.Enqueue(upstreamfake.Reply{Status: 529, ErrorType: "overloaded_error", ErrorMessage: "Overloaded"})
	_, err := r.anthropic("sess-err").Messages.New(context.Background(), aParams([]anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}))
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 529 || !strings.Contains(apiErr.RawJSON(), `"overloaded_error"`) || !strings.Contains(apiErr.RawJSON(), `"request_id"`) {
		t.Fatalf("err = %v", err)
	}
}
