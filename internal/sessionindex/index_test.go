package sessionindex

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/testutil/poll"
	"github.com/condense-dev/condense/internal/testutil/redistest"
)

// recorder collects Index notifications.
type recorder struct {
	mu      sync.Mutex
	changes []Change
}

func (r *recorder) notify(ch Change) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changes = append(r.changes, ch)
}

// reported reports whether any notification lists id in the field pick selects.
func (r *recorder) reported(pick func(Change) []string, id string) bool {
	for _, ch := range r.snapshot() {
		if slices.Contains(pick(ch), id) {
			return true
		}
	}
	return false
}

func changed(ch Change) []string { return ch.Changed }
func removed(ch Change) []string { return ch.Removed }

func (r *recorder) snapshot() []Change {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Change(nil), r.changes...)
}

// openTestStore opens a second client on the store the index watches, as a proxy would.
func openTestStore(t *testing.T, url string) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

var eventually = poll.Until

// listing returns the latest listing of the policy's store (nil when not watched).
func (x *Index) listing(policy types.NamespacedName) map[string]store.SessionInfo {
	p := x.get(policy)
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.sessions)
}

func startIndex(t *testing.T, x *Index) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = x.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	// Start must have recorded its context before Ensure starts loops under it.
	for x.baseContext() == context.Background() {
		time.Sleep(time.Millisecond)
	}
}

// TestSessionIndexCoalescesNotifications checks that a burst of store changes produces few
// listings (rate limited) and that every changed session is reported.
func TestSessionIndexCoalescesNotifications(t *testing.T) {
	rds := redistest.Start(t, nil)
	rec := &recorder{}
	x := &Index{MinInterval: 300 * time.Millisecond, Resync: time.Hour, Notify: rec.notify}
	startIndex(t, x)
	key := types.NamespacedName{Namespace: "ns", Name: "p"}
	if err := x.Ensure(context.Background(), key, rds.URL()); err != nil {
		t.Fatal(err)
	}
	if got := rec.snapshot(); len(got) != 1 || !got[0].ReachabilityChanged || len(got[0].Changed) != 0 {
		t.Fatalf("first listing must report reachability only: %+v", got)
	}
	st := openTestStore(t, rds.URL())
	ctx := context.Background()
	const n = 40
	for i := 0; i < n; i++ {
		if _, err := st.Commit(ctx, fmt.Sprintf("s-%02d", i), 0, []byte("x"), 0); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	eventually(t, 10*time.Second, "all sessions reported", func() (bool, string) {
		for _, ch := range rec.snapshot() {
			for _, id := range ch.Changed {
				seen[id] = true
			}
		}
		return len(seen) == n, fmt.Sprintf("%d of %d reported", len(seen), n)
	})
	// 40 notifications inside well under a second: the 300ms limit allows only a few listings.
	time.Sleep(700 * time.Millisecond)
	if got := len(rec.snapshot()) - 1; got > 4 {
		t.Fatalf("%d listings for a burst of %d commits; want them coalesced", got, n)
	}
	if info, ok, err := x.Lookup(key, "s-07"); err != nil || !ok || info.Version != 1 {
		t.Fatalf("Lookup = %+v %v %v", info, ok, err)
	}
	if len(x.listing(key)) != n {
		t.Fatalf("Sessions() has %d entries", len(x.listing(key)))
	}

	// Deletion is reported as a removal.
	if err := st.Delete(ctx, "s-00"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "removal reported", func() (bool, string) {
		return rec.reported(removed, "s-00"), "not yet"
	})
	if _, ok, _ := x.Lookup(key, "s-00"); ok {
		t.Fatal("deleted session still listed")
	}
}

// failingWatch wraps a store whose Watch always fails, so only the periodic resync sees changes.
type failingWatch struct{ store.Store }

func (failingWatch) Watch(context.Context) (<-chan store.Event, error) {
	return nil, errors.New("watch refused by test")
}

func TestSessionIndexResyncWithoutWatch(t *testing.T) {
	rds := redistest.Start(t, nil)
	rec := &recorder{}
	x := &Index{
		Open: func(ctx context.Context, url string) (store.Store, error) {
			s, err := OpenRedis(ctx, url)
			if err != nil {
				return nil, err
			}
			return failingWatch{s}, nil
		},
		Resync: 200 * time.Millisecond, Notify: rec.notify,
	}
	startIndex(t, x)
	key := types.NamespacedName{Namespace: "ns", Name: "p"}
	if err := x.Ensure(context.Background(), key, rds.URL()); err != nil {
		t.Fatal(err)
	}
	st := openTestStore(t, rds.URL())
	if err := st.IncrStats(context.Background(), "only-resync", map[string]int64{store.StatRequests: 2}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "resync picks up the session", func() (bool, string) {
		info, ok, err := x.Lookup(key, "only-resync")
		return ok && err == nil && info.Stats[store.StatRequests] == 2, fmt.Sprint(ok, err)
	})
}

func TestSessionIndexUnreachable(t *testing.T) {
	var opens atomic.Int32
	x := &Index{Open: func(ctx context.Context, url string) (store.Store, error) {
		opens.Add(1)
		return OpenRedis(ctx, url)
	}}
	startIndex(t, x)
	key := types.NamespacedName{Namespace: "ns", Name: "p"}
	rds := redistest.Start(t, nil)
	url := rds.URL()
	rds.Kill()
	err := x.Ensure(context.Background(), key, url)
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("want ErrUnavailable, got %v", err)
	}
	// Within the retry interval the failure is reported without dialing again.
	if err2 := x.Ensure(context.Background(), key, url); err2 == nil || err2.Error() != err.Error() {
		t.Fatalf("second Ensure = %v", err2)
	}
	if n := opens.Load(); n != 1 {
		t.Fatalf("the store was opened %d times, want once: the second Ensure dialed again instead of reporting the remembered failure", n)
	}
	if _, _, lerr := x.Lookup(key, "x"); !errors.Is(lerr, ErrNotWatched) {
		t.Fatalf("Lookup on an unopened store = %v", lerr)
	}
	if _, err := OpenRedis(context.Background(), "memory:"); err == nil {
		t.Fatal("the operator must refuse a non-shared store URL")
	}
}

// slowWatch is a store whose subscription takes a while to become active.
type slowWatch struct {
	store.Store
	delay time.Duration
}

func (s slowWatch) Watch(ctx context.Context) (<-chan store.Event, error) {
	time.Sleep(s.delay)
	return s.Store.Watch(ctx)
}

// TestSessionIndexMissesNoChangeAfterEnsure: a session committed right after Ensure returns
// is reported, even when subscribing to the store's change hints is slow (Ensure subscribes
// before its first listing; with an hour-long resync nothing else would report it).
func TestSessionIndexMissesNoChangeAfterEnsure(t *testing.T) {
	rds := redistest.Start(t, nil)
	rec := &recorder{}
	x := &Index{MinInterval: 50 * time.Millisecond, Resync: time.Hour, Notify: rec.notify,
		Open: func(ctx context.Context, url string) (store.Store, error) {
			st, err := OpenRedis(ctx, url)
			if err != nil {
				return nil, err
			}
			return slowWatch{Store: st, delay: 300 * time.Millisecond}, nil
		}}
	startIndex(t, x)
	key := types.NamespacedName{Namespace: "ns", Name: "p"}
	if err := x.Ensure(context.Background(), key, rds.URL()); err != nil {
		t.Fatal(err)
	}
	st := openTestStore(t, rds.URL())
	if _, err := st.Commit(context.Background(), "s-right-after", 0, []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the session committed right after Ensure reported", func() (bool, string) {
		return rec.reported(changed, "s-right-after"), "not yet"
	})
}
