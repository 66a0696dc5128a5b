package proxy

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/upstreamfake"
)

// hiddenKnown is a store without store.KnownStateLoader: every load carries the state.
type hiddenKnown struct{ store.Store }

// countingKnown passes LoadKnown through and counts the loads that left the state out.
type countingKnown struct {
	*store.EmbeddedStore
	skipped atomic.Int64
}

func (c *countingKnown) LoadKnown(ctx context.Context, session string, known uint64) (*store.Snapshot, error) {
	snap, err := c.EmbeddedStore.LoadKnown(ctx, session, known)
	if err == nil && snap.StateKnown {
		c.skipped.Add(1)
	}
	return snap, err
}

// TestKnownStateLeftOutForwardsTheSame: a request whose session state this process holds
// decoded loads the session without it, and forwards byte for byte what a proxy loading the
// whole state forwards.
func TestKnownStateLeftOutForwardsTheSame(t *testing.T) {
	run := func(st store.Store) []upstreamfake.Recorded {
		r := newRig(t, nil, st, nil)
		msgs, c := conversation(t, r, "sess-known", false)
		for i, text := range []string{"third", "fourth", "fifth"} {
			r.up.Enqueue(upstreamfake.Reply{Text: "ok " + text})
			msgs = append(msgs, anthropic.NewUserMessage(anthropic.NewTextBlock(text)))
			m := aTurn(t, c, msgs, false)
			msgs = append(msgs, m.ToParam())
			if i == 0 {
				time.Sleep(50 * time.Millisecond) // let the final answer's flush end
			}
		}
		return r.up.Requests()
	}
	known := &countingKnown{EmbeddedStore: store.NewMemory(0)}
	t.Cleanup(func() { _ = known.Close() })
	whole := store.NewMemory(0)
	t.Cleanup(func() { _ = whole.Close() })

	got, want := run(known), run(hiddenKnown{whole})
	if known.skipped.Load() == 0 {
		t.Fatal("no load left out a state the proxy held decoded")
	}
	if len(got) != len(want) {
		t.Fatalf("%d upstream requests, want %d", len(got), len(want))
	}
	pruned := false
	for i := range got {
		if string(got[i].Body) != string(want[i].Body) {
			t.Fatalf("upstream request %d differs:\n got %s\nwant %s", i, got[i].Body, want[i].Body)
		}
		body := string(got[i].Body)
		if strings.Contains(body, "toolu_b1") && !strings.Contains(body, "build line 030") {
			pruned = true // the build output was replaced by its summary
		}
	}
	if !pruned {
		t.Fatal("no request was pruned: the test does not exercise a committed state")
	}
}
