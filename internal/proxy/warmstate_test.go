package proxy

import (
	"context"
	"testing"
	"time"
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
