package proxy

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/condense-dev/condense/internal/flush"
	"github.com/condense-dev/condense/internal/upstreamfake"
	"github.com/condense-dev/condense/internal/wire"
)

// testClock is a settable clock for Options.Now.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *testClock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// cachedParams are requests to a priced model (claude-sonnet-4-5) with a system prompt large
// enough to be cached.
func cachedParams(msgs []anthropic.MessageParam) anthropic.MessageNewParams {
	var sys strings.Builder
	for i := 0; i < 80; i++ {
		fmt.Fprintf(&sys, "Rule %02d: you are a careful coding agent; read before you edit and run the tests after.\n", i)
	}
	return anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 1024, System: []anthropic.TextBlockParam{{Text: sys.String()}},
		Tools: []anthropic.ToolUnionParam{bashTool}, Messages: msgs}
}

func cachedTurn(t *testing.T, c *anthropic.Client, msgs []anthropic.MessageParam) *anthropic.Message {
	t.Helper()
	m, err := c.Messages.New(context.Background(), cachedParams(msgs))
	if err != nil {
		t.Fatalf("messages.new: %v", err)
	}
	return m
}

// TestCacheAwareFlushDeferredUntilCacheExpires: after a final answer the agent-message flush
// is weighed against the prompt cache the answered request just wrote. Summarizing one
// medium tool result saves less over the expected remaining requests than re-writing the
// cached messages costs, so it is deferred (counted, nothing committed) and the next request
// a minute later — cache still warm — goes out unpruned after a retried, again deferred
// flush. Seven minutes later the 5-minute cache has expired: the retried flush is free, is
// committed, and that request goes out pruned.
func TestCacheAwareFlushDeferredUntilCacheExpires(t *testing.T) {
	clock := &testClock{t: time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)}
	r := newRig(t, nil, nil, func(o *Options) {
		o.Trigger = Trigger{CacheAware: true}
		o.Now = clock.Now
	})
	met := flush.NewMetrics(nil)
	r.inpro.Orch.Metrics = met
	c := r.anthropic("sess-cache")

	r.up.Enqueue(
		upstreamfake.Reply{Text: "Let me build.", ToolCalls: []upstreamfake.ToolCall{{ID: "toolu_c1", Name: "bash", Input: `{"cmd":"make build"}`}}},
		upstreamfake.Reply{Text: "The build passed."},
		upstreamfake.Reply{Text: "Running them."},
		upstreamfake.Reply{Text: "All green."},
	)
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Please build the project."))}
	m := cachedTurn(t, c, msgs)
	clock.Advance(10 * time.Second)
	msgs = append(msgs, m.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_c1", bigOutput("build", 60), false)))
	m = cachedTurn(t, c, msgs) // final answer: the agent-message flush is weighed and deferred
	msgs = append(msgs, m.ToParam())

	clock.Advance(time.Minute)
	msgs = append(msgs, anthropic.NewUserMessage(anthropic.NewTextBlock("Now run the tests.")))
	m = cachedTurn(t, c, msgs)
	rec, _ := lastModelRequest(t, r.up, wire.Anthropic)
	if !strings.Contains(string(rec.Body), "build line 030") {
		t.Fatal("a minute later (cache warm) the flush must still be deferred: the tool output goes out verbatim")
	}
	// The agent-message flush after request 2 and its retry at request 3 (request 3's own final
	// answer may have started a third, deferred as well, by now).
	if got := testutil.ToFloat64(met.Flushes.WithLabelValues(string(flush.OutcomeDeferred))); got < 2 {
		t.Fatalf("deferred flushes = %v, want >= 2 (the agent-message flush and its retry)", got)
	}
	if got := testutil.ToFloat64(met.Flushes.WithLabelValues(string(flush.OutcomeFlushed))); got != 0 {
		t.Fatalf("flushed = %v while the cache is warm", got)
	}
	snap, err := r.st.Load(context.Background(), "sess-cache")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Version != 0 || snap.Stats[flush.StatFlushPending] != 1 || snap.Stats["flush.deferred"] < 2 {
		t.Fatalf("deferred flushes commit nothing and leave the flush pending: version %d stats %v", snap.Version, snap.Stats)
	}

	clock.Advance(7 * time.Minute) // past the 5-minute prompt cache lifetime
	msgs = append(msgs, m.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock("And the linter?")))
	cachedTurn(t, c, msgs)
	rec, _ = lastModelRequest(t, r.up, wire.Anthropic)
	if body := string(rec.Body); strings.Contains(body, "build line 030") || !strings.Contains(body, "`t1`") {
		t.Fatalf("once the cache expired the retried flush must be committed and applied (%d bytes)", len(body))
	}
	if got := testutil.ToFloat64(met.Flushes.WithLabelValues(string(flush.OutcomeFlushed))); got != 1 {
		t.Fatalf("flushed = %v, want 1", got)
	}
	if snap, err = r.st.Load(context.Background(), "sess-cache"); err != nil {
		t.Fatal(err)
	}
	if snap.Version == 0 || snap.Stats[flush.StatFlushPending] != 0 {
		t.Fatalf("after the committed flush: version %d pending %d", snap.Version, snap.Stats[flush.StatFlushPending])
	}
}

// TestCacheAwareOffCommitsAtOnce is the control: the same conversation without CacheAware
// prunes the request right after the final answer.
func TestCacheAwareOffCommitsAtOnce(t *testing.T) {
	clock := &testClock{t: time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)}
	r := newRig(t, nil, nil, func(o *Options) { o.Now = clock.Now })
	c := r.anthropic("sess-nocache")
	r.up.Enqueue(
		upstreamfake.Reply{Text: "Let me build.", ToolCalls: []upstreamfake.ToolCall{{ID: "toolu_c1", Name: "bash", Input: `{"cmd":"make build"}`}}},
		upstreamfake.Reply{Text: "The build passed."},
		upstreamfake.Reply{Text: "Running them."},
	)
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Please build the project."))}
	m := cachedTurn(t, c, msgs)
	msgs = append(msgs, m.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_c1", bigOutput("build", 60), false)))
	m = cachedTurn(t, c, msgs)
	clock.Advance(time.Minute)
	msgs = append(msgs, m.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock("Now run the tests.")))
	cachedTurn(t, c, msgs)
	rec, _ := lastModelRequest(t, r.up, wire.Anthropic)
	if strings.Contains(string(rec.Body), "build line 030") {
		t.Fatal("without cacheAware the flush is committed at once")
	}
}

// TestMidRunFlushInLongToolRun: one user prompt, then an agent run of tool calls that never
// ends in a final answer. Once the run has more than GraceTurns tool-using turns, the
// mid-run trigger flushes the transcript before the latest three turns: the first, large
// result is summarized while the three latest results stay verbatim, and every request the
// provider receives is valid.
func TestMidRunFlushInLongToolRun(t *testing.T) {
	clock := &testClock{t: time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)}
	r := newRig(t, nil, nil, func(o *Options) {
		// A long-lived context: a flush has 40 requests to pay for its cache rewrite.
		o.Trigger = Trigger{CacheAware: true, MidRun: true, GraceTurns: 3, Horizon: 40, MaxHorizon: 40}
		o.Now = clock.Now
	})
	met := flush.NewMetrics(nil)
	r.inpro.Orch.Metrics = met
	c := r.anthropic("sess-midrun")
	for i := 1; i <= 6; i++ {
		r.up.Enqueue(upstreamfake.Reply{ToolCalls: []upstreamfake.ToolCall{{ID: fmt.Sprintf("toolu_m%d", i), Name: "bash", Input: fmt.Sprintf(`{"cmd":"step %d"}`, i)}}})
	}
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Fix every failing package."))}
	outputs := []string{bigOutput("first", 200), bigOutput("second", 3), bigOutput("third", 3), bigOutput("fourth", 3), bigOutput("fifth", 3)}
	var bodies []string
	for i := 0; i < 5; i++ {
		m := cachedTurn(t, c, msgs)
		if m.StopReason != "tool_use" {
			t.Fatalf("request %d: %s", i+1, m.StopReason)
		}
		rec, _ := lastModelRequest(t, r.up, wire.Anthropic)
		bodies = append(bodies, string(rec.Body))
		clock.Advance(5 * time.Second)
		msgs = append(msgs, m.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock(fmt.Sprintf("toolu_m%d", i+1), outputs[i], false)))
	}
	m := cachedTurn(t, c, msgs)
	if m.StopReason != "tool_use" {
		t.Fatalf("request 6: %s", m.StopReason)
	}
	rec, _ := lastModelRequest(t, r.up, wire.Anthropic)
	bodies = append(bodies, string(rec.Body))
	// Request 5 carries four tool turns (cut before turn 2); request 6 five.
	if !strings.Contains(bodies[3], "first line 150") {
		t.Fatal("request 4 (three tool turns) must not be flushed mid-run")
	}
	last := bodies[5]
	if strings.Contains(bodies[4], "first line 150") || strings.Contains(last, "first line 150") {
		t.Fatalf("the oldest result must be summarized mid-run (deferred flushes: %v)", testutil.ToFloat64(met.Flushes.WithLabelValues(string(flush.OutcomeDeferred))))
	}
	for _, tag := range []string{"third", "fourth", "fifth"} {
		if !strings.Contains(last, tag+" line 002") {
			t.Fatalf("the latest three tool turns must stay verbatim (%s missing)", tag)
		}
	}
	if got := testutil.ToFloat64(met.Flushes.WithLabelValues(string(flush.OutcomeFlushed))); got < 1 {
		t.Fatalf("no mid-run flush committed (deferred: %v)", testutil.ToFloat64(met.Flushes.WithLabelValues(string(flush.OutcomeDeferred))))
	}
}

// idleReturnBody runs a cache-aware conversation whose agent-message flush is deferred while
// the cache is warm, then comes back 7 minutes later (cache expired, flush due) without any
// FlushWaitTimeout, and returns the body the provider got for that returning request.
func idleReturnBody(t *testing.T, idleWait time.Duration) string {
	clock := &testClock{t: time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)}
	r := newRig(t, nil, nil, func(o *Options) {
		o.Trigger = Trigger{CacheAware: true}
		o.Now = clock.Now
		o.FlushWaitTimeout = 0
		o.IdleFlushWait = idleWait
	})
	c := r.anthropic("sess-idle")
	r.up.Enqueue(
		upstreamfake.Reply{Text: "Let me build.", ToolCalls: []upstreamfake.ToolCall{{ID: "toolu_i1", Name: "bash", Input: `{"cmd":"make build"}`}}},
		upstreamfake.Reply{Text: "The build passed."},
		upstreamfake.Reply{Text: "Noted."},
	)
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Please build the project."))}
	m := cachedTurn(t, c, msgs)
	clock.Advance(10 * time.Second)
	msgs = append(msgs, m.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_i1", bigOutput("build", 60), false)))
	m = cachedTurn(t, c, msgs) // final answer: the agent-message flush is weighed and deferred
	r.settleFlush("sess-idle")
	clock.Advance(7 * time.Minute) // past the 5-minute prompt cache lifetime
	msgs = append(msgs, m.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock("And the linter?")))
	cachedTurn(t, c, msgs)
	rec, _ := lastModelRequest(t, r.up, wire.Anthropic)
	return string(rec.Body)
}

// TestIdleReturnWaitsForTheDueFlush: a session that comes back after its prompt cache expired
// with a flush due goes out pruned although FlushWaitTimeout is 0 (IdleFlushWait), so the
// provider writes the cache once; with IdleFlushWait off it goes out verbatim (the control).
func TestIdleReturnWaitsForTheDueFlush(t *testing.T) {
	if body := idleReturnBody(t, 0); strings.Contains(body, "build line 030") || !strings.Contains(body, "`t1`") {
		t.Fatalf("the returning request must wait for the due flush and go out pruned (%d bytes)", len(body))
	}
	if body := idleReturnBody(t, -1); !strings.Contains(body, "build line 030") {
		t.Fatal("control: without IdleFlushWait the returning request must not wait (the tool output goes out verbatim)")
	}
}
