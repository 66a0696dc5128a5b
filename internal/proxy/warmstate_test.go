package proxy

import (
	"bytes"
	"context"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/condense-dev/condense/internal/pruner"
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
	if !ok || v.(cachedState).version != snap.Version {
		t.Fatalf("cache holds %+v, want version %d", v, snap.Version)
	}
	got, err := v.(cachedState).state.MarshalBinary()
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
	st := v.(cachedState).state
	next, err := r.px.parses.parse(wire.Anthropic, sid, bytes.Clone(body)) // the next request, in its own buffer
	if err != nil {
		t.Fatal(err)
	}
	if next.ReusedMessages() != len(next.Messages) {
		t.Fatalf("the next request shares %d of %d messages", next.ReusedMessages(), len(next.Messages))
	}
	mallocs := func() uint64 {
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		res := pruner.RenderView(next, st, testPolicy())
		_ = res.Request.Segments()
		runtime.ReadMemStats(&b)
		if res.Unchanged {
			t.Fatal("the flushed state prunes nothing")
		}
		return b.Mallocs - a.Mallocs
	}
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	first, second := mallocs(), mallocs()
	if first > second+second/5 {
		t.Fatalf("the first render after the flush allocated %d times, the one after it %d", first, second)
	}
	t.Logf("render allocations: first after the flush %d, then %d", first, second)
}
