package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/condense-dev/condense/internal/flush"
	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/summarize"
	"github.com/condense-dev/condense/internal/testutil/redistest"
	"github.com/condense-dev/condense/internal/upstreamfake"
	"github.com/condense-dev/condense/internal/wire"
)

func TestReadEventCRLFAndMultiData(t *testing.T) {
	in := "event: a\r\ndata: {\"x\":\r\ndata: 1}\r\n\r\n\ndata: [DONE]\n\n: tail"
	br := bufio.NewReader(strings.NewReader(in))
	ev, err := readEvent(br, 1<<20)
	if err != nil || ev.name != "a" || string(ev.data) != "{\"x\":\n1}" || string(ev.raw) != "event: a\r\ndata: {\"x\":\r\ndata: 1}\r\n\r\n" {
		t.Fatalf("%+v %v", ev, err)
	}
	ev, err = readEvent(br, 1<<20)
	if err != nil || string(ev.data) != "[DONE]" {
		t.Fatalf("%+v %v", ev, err)
	}
	ev, err = readEvent(br, 1<<20)
	if err == nil || string(ev.raw) != ": tail" || ev.data != nil {
		t.Fatalf("%+v %v", ev, err)
	}
}

// TestHiddenExchangeNotReinsertedWhenClientChangedIt: a client that rewrote the assistant
// message (rewind, edit) does not get the stored exchange spliced in; it is counted.
func TestHiddenExchangeNotReinsertedWhenClientChangedIt(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	msgs, c := conversation(t, r, "sess-edit", false)
	r.up.Enqueue(
		upstreamfake.Reply{ToolCalls: []upstreamfake.ToolCall{{ID: "toolu_h", Name: pruner.QueryToolName, Input: `{"toolCallIds":["t1"]}`}}},
		upstreamfake.Reply{Text: "Original answer."},
	)
	msgs = append(msgs, anthropic.NewUserMessage(anthropic.NewTextBlock("q")))
	m := aTurn(t, c, msgs, false)
	if m.Content[0].Text != "Original answer." {
		t.Fatalf("%+v", m.Content)
	}
	r.up.Enqueue(upstreamfake.Reply{Text: "ok"})
	msgs = append(msgs, anthropic.NewAssistantMessage(anthropic.NewTextBlock("An edited answer.")), anthropic.NewUserMessage(anthropic.NewTextBlock("next")))
	aTurn(t, c, msgs, false)
	_, req := lastModelRequest(t, r.up, wire.Anthropic)
	if len(req.Messages) != len(msgs) || strings.Contains(string(req.Raw()), "toolu_h") {
		t.Fatalf("stale exchange re-inserted: %d messages", len(req.Messages))
	}
	if v := testutil.ToFloat64(r.px.met.Diagnostics.WithLabelValues("hidden-exchange-mismatch")); v != 1 {
		t.Fatalf("mismatch count %v", v)
	}
}

// TestOpenAIMixedQueryDeferred: OpenAI responses with a query call next to a client call —
// the client sees only its own call (index 0), and the next request carries the query's tool
// message right after the restored assistant message.
func TestOpenAIMixedQueryDeferred(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "sse"}[stream], func(t *testing.T) {
			r := newRig(t, nil, nil, nil)
			c := r.openai("oa-mixed")
			params := func(msgs []openai.ChatCompletionMessageParamUnion) openai.ChatCompletionNewParams {
				return openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: msgs}
			}
			do := func(msgs []openai.ChatCompletionMessageParamUnion) openai.ChatCompletionMessage {
				t.Helper()
				if !stream {
					cc, err := c.Chat.Completions.New(context.Background(), params(msgs))
					if err != nil {
						t.Fatal(err)
					}
					return cc.Choices[0].Message
				}
				st := c.Chat.Completions.NewStreaming(context.Background(), params(msgs))
				var acc openai.ChatCompletionAccumulator
				for st.Next() {
					acc.AddChunk(st.Current())
				}
				if err := st.Err(); err != nil {
					t.Fatal(err)
				}
				return acc.Choices[0].Message
			}
			r.up.Enqueue(upstreamfake.Reply{Text: "Two things.", ToolCalls: []upstreamfake.ToolCall{
				{ID: "call_q", Name: pruner.QueryToolName, Input: `{"toolCallIds":["t9"]}`},
				{ID: "call_c", Name: "bash", Input: `{"cmd":"ls"}`},
			}})
			msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("go")}
			m := do(msgs)
			if len(m.ToolCalls) != 1 || m.ToolCalls[0].ID != "call_c" || m.ToolCalls[0].Function.Arguments != `{"cmd":"ls"}` {
				t.Fatalf("client saw %+v", m.ToolCalls)
			}
			r.up.Enqueue(upstreamfake.Reply{Text: "done"})
			msgs = append(msgs, m.ToParam(), openai.ToolMessage("a b c", "call_c"))
			do(msgs)
			_, req := lastModelRequest(t, r.up, wire.OpenAI)
			if len(req.Messages) != 4 {
				t.Fatalf("%d messages upstream", len(req.Messages))
			}
			asst, tq := req.Messages[1], req.Messages[2]
			if len(asst.Blocks) < 3 || tq.Role != wire.RoleTool || tq.Blocks[0].ID != "call_q" || !strings.Contains(tq.Blocks[0].ResultText(), "t9") {
				t.Fatalf("restored %s / %s", asst.Raw(), tq.Raw())
			}
		})
	}
}

// TestRequestWaitsForAnotherReplicasFlush: a flush lease held elsewhere makes the request wait
// (up to flushWaitTimeout) and use the state committed under that lease.
func TestRequestWaitsForAnotherReplicasFlush(t *testing.T) {
	r := newRig(t, nil, nil, func(o *Options) { o.Trigger = Trigger{OnDemand: true} })
	body := benchBody(3, 40)
	// The state another replica will commit: a real flush of the same transcript elsewhere.
	other := store.NewMemory(0)
	defer other.Close()
	orch := &flush.Orchestrator{Store: other, Planner: flush.EnginePlanner{Policy: testPolicy()}, Summarizer: summarize.Extractive{}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if _, err := orch.Flush(context.Background(), &flush.Job{Queued: flush.Queued{Session: "waiter", Format: wire.Anthropic, Body: body}}); err != nil {
		t.Fatal(err)
	}
	snap, _ := other.Load(context.Background(), "waiter")
	ctx := context.Background()
	lease, err := r.st.AcquireLease(ctx, "waiter", "replica-b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	type res struct {
		code int
		body []byte
	}
	done := make(chan res, 1)
	go func() {
		resp, b := post(t, r.http.URL+"/v1/messages", string(body), map[string]string{HeaderSession: "waiter"})
		done <- res{resp.StatusCode, b}
	}()
	// The request is now waiting on the lease (or has not loaded yet: it then sees the commit).
	select {
	case got := <-done:
		t.Fatalf("request did not wait for the lease: %d %s", got.code, got.body)
	case <-time.After(200 * time.Millisecond):
	}
	if _, err := r.st.Commit(ctx, "waiter", 0, snap.State, lease.Token); err != nil {
		t.Fatal(err)
	}
	if err := r.st.ReleaseLease(ctx, lease); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.code != 200 {
		t.Fatalf("%d %s", got.code, got.body)
	}
	rec, _ := lastModelRequest(t, r.up, wire.Anthropic)
	if strings.Contains(string(rec.Body), "s1 line 020") || !strings.Contains(string(rec.Body), "`t1`") {
		t.Fatalf("the state committed under the lease was not used: %d bytes", len(rec.Body))
	}
}

// TestDeferredExchangeAtTheEndStaysValid: a deferred hidden exchange ends in the model's
// context_tree_query call, whose results go into the following user message. When the client
// sends the transcript up to that assistant message only — count_tokens on it, or the message
// as an assistant prefill — or follows it with another assistant message (the Messages API
// merges consecutive turns), there is no such user message: the client's own message goes
// upstream, never the hidden call without its result.
func TestDeferredExchangeAtTheEndStaysValid(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	msgs, c := conversation(t, r, "sess-tail", false)
	r.up.Enqueue(upstreamfake.Reply{Text: "Let me check.", ToolCalls: []upstreamfake.ToolCall{
		{ID: "toolu_own", Name: "bash", Input: `{"cmd":"ls"}`},
		{ID: "toolu_q", Name: pruner.QueryToolName, Input: `{"toolCallIds":["t1"]}`},
	}})
	msgs = append(msgs, anthropic.NewUserMessage(anthropic.NewTextBlock("what is there?")))
	m := aTurn(t, c, msgs, false)
	if m.StopReason != "tool_use" || len(m.Content) != 2 || m.Content[1].Name != "bash" {
		t.Fatalf("client saw %+v %s", m.Content, m.StopReason)
	}
	upTo := append(msgs, m.ToParam())
	if _, err := c.Messages.CountTokens(context.Background(), anthropic.MessageCountTokensParams{Model: "claude-sonnet-test",
		Messages: upTo, Tools: []anthropic.MessageCountTokensToolUnionParam{{OfTool: bashTool.OfTool}}}); err != nil {
		t.Fatal(err)
	}
	rec, _ := r.up.Last()
	if !strings.HasSuffix(rec.Path, "count_tokens") {
		t.Fatalf("last upstream request %s", rec.Path)
	}
	mustValid(t, wire.Anthropic, rec.Body)
	if strings.Contains(string(rec.Body), "toolu_q") {
		t.Fatalf("the hidden call went upstream without its result: %s", rec.Body)
	}
	r.up.Enqueue(upstreamfake.Reply{Text: " and more."})
	aTurn(t, c, append(upTo, anthropic.NewAssistantMessage(anthropic.NewTextBlock("So far:"))), false)
	if rec, _ := r.up.Last(); strings.Contains(string(rec.Body), "toolu_q") {
		t.Fatalf("the hidden call went upstream without its result: %s", rec.Body)
	}
	// The next turn (with the bash result) still gets the hidden exchange re-inserted.
	r.up.Enqueue(upstreamfake.Reply{Text: "Two files."})
	aTurn(t, c, append(upTo, anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_own", "a\nb", false))), false)
	_, req := lastModelRequest(t, r.up, wire.Anthropic)
	if !strings.Contains(string(req.Raw()), "toolu_q") {
		t.Fatalf("the hidden exchange was not re-inserted: %s", req.Raw())
	}
}

// gatedSpliceStore is a store whose reads of the hidden-exchange blobs are counted; while
// gate is set, the first such read waits for it to close: it lets a test interleave two
// requests' splice writes.
type gatedSpliceStore struct {
	store.Store
	gate  chan struct{}
	held  atomic.Bool
	reads atomic.Int64
}

func (g *gatedSpliceStore) GetBlob(ctx context.Context, session, key string) ([]byte, error) {
	if strings.HasPrefix(key, "proxy-splice") {
		g.reads.Add(1)
		if g.gate != nil && g.held.CompareAndSwap(false, true) {
			<-g.gate
		}
	}
	return g.Store.GetBlob(ctx, session, key)
}

// TestConcurrentHiddenExchangesAreKept: two requests of one session storing hidden exchanges
// at the same time (two replicas, a retried request) both keep theirs — no read-modify-write
// of one shared blob loses one — and a session's stored exchanges are read from the store once
// per process, not on every request.
func TestConcurrentHiddenExchangesAreKept(t *testing.T) {
	gs := &gatedSpliceStore{Store: store.NewMemory(0)}
	t.Cleanup(func() { _ = gs.Close() })
	r := newRig(t, nil, gs, nil)
	ctx := context.Background()
	snap, err := gs.Load(ctx, "sess-cas")
	if err != nil {
		t.Fatal(err)
	}
	mk := func(at int, text string) *splice {
		var dg digester
		dg.text(text)
		return &splice{At: at, Digest: dg.sum(), Replace: []json.RawMessage{json.RawMessage(`{"role":"assistant","content":[{"type":"text","text":"` + text + `"}]}`)}}
	}
	gs.gate = make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- r.px.saveSplice(ctx, &turn{sid: "sess-cas", snap: snap, log: r.px.log}, mk(1, "one"))
	}()
	for !gs.held.Load() && len(first) == 0 { // the first write reads what is stored, if it does
		time.Sleep(time.Millisecond)
	}
	if err := r.px.saveSplice(ctx, &turn{sid: "sess-cas", snap: snap, log: r.px.log}, mk(3, "three")); err != nil {
		t.Fatal(err)
	}
	close(gs.gate)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	gs.gate = nil
	snap, _ = gs.Load(ctx, "sess-cas")
	set, err := r.px.loadSplices(ctx, &turn{sid: "sess-cas", snap: snap, log: r.px.log})
	if err != nil || len(set.Splices) != 2 {
		t.Fatalf("stored exchanges %+v, %v; want those at 1 and 3", set, err)
	}
	// Read again: from this process's memory, not the store.
	reads := gs.reads.Load()
	if _, err := r.px.loadSplices(ctx, &turn{sid: "sess-cas", snap: snap, log: r.px.log}); err != nil || gs.reads.Load() != reads {
		t.Fatalf("%d more blob reads, %v", gs.reads.Load()-reads, err)
	}
}

// TestHiddenExchangesAcrossReplicas: on one real Redis, proxy A stores the hidden exchanges
// of two turns and proxy B re-inserts both; when the client goes back before the first and
// continues differently, the exchange B stores there replaces the first and drops the second.
func TestHiddenExchangesAcrossReplicas(t *testing.T) {
	rs := redistest.Start(t, nil)
	open := redisOpener(t, rs)
	a := newRig(t, nil, open(), nil)
	b := newRig(t, a.up, open(), nil)
	msgs, ca := conversation(t, a, "sess-replicas", false)
	cb := b.anthropic("sess-replicas")
	// A mixed turn: the query is hidden, its result owed to the next user message.
	mixed := func(c *anthropic.Client, msgs []anthropic.MessageParam, id string) []anthropic.MessageParam {
		a.up.Enqueue(upstreamfake.Reply{Text: "Checking " + id + ".", ToolCalls: []upstreamfake.ToolCall{{ID: "toolu_own" + id, Name: "bash", Input: `{"cmd":"ls"}`},
			{ID: "toolu_q" + id, Name: pruner.QueryToolName, Input: `{"toolCallIds":["t1"]}`}}})
		msgs = append(msgs, anthropic.NewUserMessage(anthropic.NewTextBlock("turn "+id)))
		m := aTurn(t, c, msgs, false)
		return append(msgs, m.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_own"+id, "x", false)))
	}
	one := mixed(ca, msgs, "1")
	two := mixed(ca, one, "2")
	a.up.Enqueue(upstreamfake.Reply{Text: "ok"})
	aTurn(t, cb, two, false)
	_, req := lastModelRequest(t, a.up, wire.Anthropic)
	if raw := string(req.Raw()); !strings.Contains(raw, "toolu_q1") || !strings.Contains(raw, "toolu_q2") {
		t.Fatalf("proxy B did not re-insert both hidden exchanges: %s", raw)
	}
	// Back to before turn 1, on B: its new exchange there replaces turn 1's and drops turn 2's.
	mixed(cb, msgs, "3")
	snap, _ := b.st.Load(context.Background(), "sess-replicas")
	if idx := listedSplices(snap.Stats); len(idx) != 1 {
		t.Fatalf("listed exchanges %v, want turn 3's alone", idx)
	}
}

// listedSplices returns the hidden exchanges a session's counters list (not the dropped ones).
func listedSplices(stats map[string]int64) map[int]int64 {
	idx := spliceIndex(stats)
	for at, stamp := range idx {
		if stamp == 0 {
			delete(idx, at)
		}
	}
	return idx
}
