package proxy

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/condense-dev/condense/internal/flush"
	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/summarize"
	"github.com/condense-dev/condense/internal/testutil/redistest"
	"github.com/condense-dev/condense/internal/wire"
)

// TestFlushCommitWarmsStateCache checks that the state an in-process flush commits is decoded
// in the background, so the session's next request finds that version in the decoded-state
// cache, and that the cached state is the one a request would decode itself.
func TestFlushCommitWarmsStateCache(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	conversation(t, r, "sess-warm", false) // its final answer starts an agent-message flush
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, flying := r.px.flights.Load("sess-warm")
		if !flying {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the flush did not finish")
		}
		time.Sleep(5 * time.Millisecond)
	}
	snap, err := r.st.Load(context.Background(), "sess-warm")
	if err != nil || snap.Version == 0 {
		t.Fatalf("nothing committed: %+v %v", snap, err)
	}
	v, ok := r.px.states.Load("sess-warm")
	if !ok || v.version != snap.Version {
		t.Fatalf("cache holds %+v, want version %d", v, snap.Version)
	}
	got, err := v.state.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(snap.State) {
		t.Fatal("the warmed state differs from the committed one")
	}
}

// TestFlushCommitWarmsRender: after a flush of this process commits, the session's next
// request renders as cheaply as a steady one — the flush's warm-up rendered the remembered
// request with the new state, so the stubs, summaries and keys that request shares are
// computed. Measured in allocations of the render (deterministic, unlike time): without the
// warm-up the first render after the flush allocates about twice what the second does.
func TestFlushCommitWarmsRender(t *testing.T) {
	r := newRig(t, nil, nil, func(o *Options) { o.FlushWaitTimeout = 0 })
	const sid = "sess-warm-render"
	sendSettled(t, r.px, sid, benchBodyTagged(10, 40, "warm-"))
	body := benchBodyTagged(20, 40, "warm-") // the final answer to it starts a flush of 10 more turns
	sendSettled(t, r.px, sid, body)
	v, ok := r.px.states.Load(sid)
	if !ok {
		t.Fatal("no state was committed and warmed")
	}
	st := v.state
	next, err := r.px.parses.parse(wire.Anthropic, sid, bytes.Clone(body)) // the next request, in its own buffer
	if err != nil {
		t.Fatal(err)
	}
	if next.ReusedMessages() != len(next.Messages) {
		t.Fatalf("the next request shares %d of %d messages", next.ReusedMessages(), len(next.Messages))
	}
	first, second := renderAllocs(t, next, st), renderAllocs(t, next, st)
	if first > second+second/5 {
		t.Fatalf("the first render after the flush allocated %d times, the one after it %d", first, second)
	}
	t.Logf("render allocations: first after the flush %d, then %d", first, second)
}

// TestCommitElsewhereWarmsState: a state committed by another process — here a flush run
// straight on the shared store, as a condense pruner worker runs it — reaches this proxy as a
// store notification, and the proxy decodes it and renders the session's remembered request
// with it in the background, as after its own flushes: the session's next request finds the
// version decoded and renders as cheaply as a steady one. With the embedded store (one
// process) and with a real Redis (the worker on its own client: pub/sub).
func TestCommitElsewhereWarmsState(t *testing.T) {
	t.Run("embedded", func(t *testing.T) {
		st := store.NewMemory(0)
		t.Cleanup(func() { _ = st.Close() })
		commitElsewhereWarms(t, st, st, func() {})
	})
	t.Run("redis", func(t *testing.T) {
		rs := redistest.Start(t, nil)
		open := redisOpener(t, rs)
		commitElsewhereWarms(t, open(), open(), func() { waitSubscribed(t, rs) })
	})
}

// waitSubscribed waits until a client of rs is subscribed to a channel (the proxy's commit
// notifications), so that a commit published next reaches it.
func waitSubscribed(t *testing.T, rs *redistest.Server) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if chans, err := rdb.PubSubChannels(context.Background(), "*").Result(); err == nil && len(chans) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the proxy did not subscribe to the store's notifications")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// commitElsewhereWarms is TestCommitElsewhereWarmsState with the proxy on store proxySt and
// the worker on workerSt (one store, or two clients of one); subscribed returns once the
// proxy receives the store's notifications.
func commitElsewhereWarms(t *testing.T, proxySt, workerSt store.Store, subscribed func()) {
	r := newRig(t, nil, proxySt, func(o *Options) { o.Flusher = nil }) // flushes run elsewhere
	const sid = "sess-warm-elsewhere"
	body := benchBodyTagged(20, 40, "elsewhere-")
	sendSettled(t, r.px, sid, body)
	subscribed()
	worker := &flush.Orchestrator{Store: workerSt, Planner: flush.EnginePlanner{Policy: testPolicy()}, Summarizer: summarize.Extractive{},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	res, err := worker.Flush(context.Background(), &flush.Job{Queued: flush.Queued{Session: sid, Format: wire.Anthropic, Body: body, Trigger: "agent-message"}})
	if err != nil || res.Version == 0 {
		t.Fatalf("worker flush: %v %+v", err, res)
	}
	deadline := time.Now().Add(10 * time.Second)
	var st *pruner.State
	for st == nil {
		if v, ok := r.px.states.Load(sid); ok && v.version == res.Version {
			st = v.state
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the proxy did not decode the state committed elsewhere")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for testutil.ToFloat64(r.px.met.Warmups) < 1 { // the render follows the decode
		if time.Now().After(deadline) {
			t.Fatal("the proxy did not finish warming the state committed elsewhere")
		}
		time.Sleep(5 * time.Millisecond)
	}
	next, err := r.px.parses.parse(wire.Anthropic, sid, bytes.Clone(body)) // the next request, in its own buffer
	if err != nil {
		t.Fatal(err)
	}
	if first, second := renderAllocs(t, next, st), renderAllocs(t, next, st); first > second+second/5 {
		t.Fatalf("the first render after the commit allocated %d times, the one after it %d", first, second)
	}
}

// renderAllocs renders req with st as the proxy does (RenderRequest, then the forwarded segments)
// and returns how many allocations that made, with the collector off. A render that prunes
// nothing fails the test.
func renderAllocs(t *testing.T, req *wire.Request, st *pruner.State) uint64 {
	t.Helper()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	res := pruner.RenderRequest(req, st, testPolicy())
	_ = res.Request.Segments()
	runtime.ReadMemStats(&b)
	if res.Unchanged {
		t.Fatal("the state prunes nothing")
	}
	return b.Mallocs - a.Mallocs
}
