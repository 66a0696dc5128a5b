// Package storetest is the one contract test suite every store.Store implementation passes.
// Backends call Run with a factory that opens a fresh, empty store.
package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/condense-dev/condense/internal/store"
)

// Factory opens a fresh, empty store with idle expiry ttl (0 disables expiry). The suite
// closes it; the factory registers any server cleanup with t.Cleanup.
type Factory func(t *testing.T, ttl time.Duration) store.Store

// Run runs the whole contract suite as subtests of t.
func Run(t *testing.T, open Factory) {
	tests := []struct {
		name string
		fn   func(*testing.T, Factory)
	}{
		{"LoadUnknown", testLoadUnknown},
		{"CommitCompareAndSet", testCommitCAS},
		{"LoadKnownState", testLoadKnown},
		{"Fencing", testFencing},
		{"Lease", testLease},
		{"LeaseExpiry", testLeaseExpiry},
		{"Diagnostics", testDiagnostics},
		{"Stats", testStats},
		{"UpdateStatsSet", testUpdateStatsSet},
		{"UpdateStats", testUpdateStats},
		{"Blobs", testBlobs},
		{"ListAndDelete", testListDelete},
		{"Watch", testWatch},
		{"IdleExpiry", testIdleExpiry},
		{"ConcurrentCommitters", testConcurrent},
		{"SessionIDs", testSessionIDs},
		{"LargeValues", testLarge},
		{"CanceledContext", testCanceled},
		{"Closed", testClosed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open) })
	}
}

func mustOpen(t *testing.T, open Factory, ttl time.Duration) store.Store {
	t.Helper()
	s := open(t, ttl)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func testLoadUnknown(t *testing.T, open Factory) {
	s, ctx := mustOpen(t, open, 0), ctxT(t)
	snap, err := s.Load(ctx, "never-seen")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Version != 0 || snap.State != nil || snap.Lease != nil || !snap.LastSeen.IsZero() {
		t.Fatalf("unknown session snapshot = %+v", snap)
	}
	if snap.Stats == nil || snap.Diagnostics == nil || snap.DiagnosticCounts == nil {
		t.Fatal("nil maps/slices in an empty snapshot")
	}
	if snap.Session != "never-seen" {
		t.Fatalf("Session = %q", snap.Session)
	}
	infos, err := s.List(ctx)
	if err != nil || len(infos) != 0 {
		t.Fatalf("List after a Load of an unknown session = %v, %v; want empty (Load must not create)", infos, err)
	}
}

func testCommitCAS(t *testing.T, open Factory) {
	s, ctx := mustOpen(t, open, 0), ctxT(t)
	const id = "sess-cas"
	allBytes := make([]byte, 256)
	for i := range allBytes {
		allBytes[i] = byte(i)
	}
	before := time.Now().Add(-2 * time.Second)
	v, err := s.Commit(ctx, id, 0, allBytes, 0)
	if err != nil || v != 1 {
		t.Fatalf("first commit = %d, %v; want 1", v, err)
	}
	snap, err := s.Load(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Version != 1 || !bytes.Equal(snap.State, allBytes) {
		t.Fatalf("loaded version %d state %x", snap.Version, snap.State)
	}
	if snap.LastSeen.Before(before) || snap.LastSeen.After(time.Now().Add(2*time.Second)) {
		t.Fatalf("LastSeen %v not near now", snap.LastSeen)
	}
	// A stale expectation changes nothing and reports the stored version.
	_, err = s.Commit(ctx, id, 0, []byte("lost"), 0)
	var ce *store.ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, store.ErrConflict) || ce.Actual != 1 || ce.Expected != 0 {
		t.Fatalf("stale commit error = %v; want ConflictError{Expected 0, Actual 1}", err)
	}
	if _, err = s.Commit(ctx, id, 7, []byte("lost"), 0); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("future expectation: %v", err)
	}
	big := bytes.Repeat([]byte(`{"tool":"read","text":"hello world"} `), 1000)
	if v, err = s.Commit(ctx, id, 1, big, 0); err != nil || v != 2 {
		t.Fatalf("second commit = %d, %v", v, err)
	}
	if v, err = s.Commit(ctx, id, 2, []byte{}, 0); err != nil || v != 3 {
		t.Fatalf("empty-state commit = %d, %v", v, err)
	}
	snap, err = s.Load(ctx, id)
	if err != nil || snap.Version != 3 || snap.State == nil || len(snap.State) != 0 {
		t.Fatalf("after empty commit: %+v, %v; want version 3 with an empty non-nil state", snap, err)
	}
	if v, err = s.Commit(ctx, id, 3, big, 0); err != nil || v != 4 {
		t.Fatalf("commit = %d, %v", v, err)
	}
	snap, err = s.Load(ctx, id)
	if err != nil || !bytes.Equal(snap.State, big) {
		t.Fatalf("compressible state did not round-trip: %v", err)
	}
}

func testLoadKnown(t *testing.T, open Factory) {
	s, ctx := mustOpen(t, open, 0), ctxT(t)
	kl, ok := s.(store.KnownStateLoader)
	if !ok {
		t.Fatalf("%T does not implement store.KnownStateLoader", s)
	}
	const id = "sess-known"
	if snap, err := kl.LoadKnown(ctx, id, 1); err != nil || snap.Version != 0 || snap.StateKnown || snap.State != nil {
		t.Fatalf("unknown session: %+v, %v", snap, err)
	}
	state := bytes.Repeat([]byte("state of version one "), 200)
	if _, err := s.Commit(ctx, id, 0, state, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.IncrStats(ctx, id, map[string]int64{store.StatRequests: 3}); err != nil {
		t.Fatal(err)
	}
	full, err := s.Load(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		known     uint64
		wantKnown bool
	}{
		{"known version: state left out", 1, true},
		{"no version known: like Load", 0, false},
		{"an older or other version: like Load", 7, false},
	} {
		snap, err := kl.LoadKnown(ctx, id, tc.known)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if snap.StateKnown != tc.wantKnown || snap.Version != 1 {
			t.Fatalf("%s: version %d, StateKnown %v", tc.name, snap.Version, snap.StateKnown)
		}
		if tc.wantKnown && snap.State != nil {
			t.Fatalf("%s: state returned (%d bytes)", tc.name, len(snap.State))
		}
		if !tc.wantKnown && !bytes.Equal(snap.State, state) {
			t.Fatalf("%s: state %q", tc.name, trunc(string(snap.State)))
		}
		if snap.Stats[store.StatRequests] != 3 || snap.LastSeen.Before(full.LastSeen) {
			t.Fatalf("%s: the rest of the snapshot differs from Load's: %+v vs %+v", tc.name, snap, full)
		}
	}
	// A newer commit is loaded whole although the caller knows the version before it.
	if _, err := s.Commit(ctx, id, 1, []byte("two"), 0); err != nil {
		t.Fatal(err)
	}
	if snap, err := kl.LoadKnown(ctx, id, 1); err != nil || snap.Version != 2 || snap.StateKnown || string(snap.State) != "two" {
		t.Fatalf("after a newer commit: %+v, %v", snap, err)
	}
}

func testFencing(t *testing.T, open Factory) {
	s, ctx := mustOpen(t, open, 0), ctxT(t)
	const id = "sess-fence"
	a, err := s.AcquireLease(ctx, id, "replica-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if a.Token == 0 || a.Owner != "replica-a" || a.Session != id {
		t.Fatalf("lease = %+v", a)
	}
	if v, err := s.Commit(ctx, id, 0, []byte("by a"), a.Token); err != nil || v != 1 {
		t.Fatalf("fenced commit by the holder = %d, %v", v, err)
	}
	if err := s.ReleaseLease(ctx, a); err != nil {
		t.Fatal(err)
	}
	b, err := s.AcquireLease(ctx, id, "replica-b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if b.Token <= a.Token {
		t.Fatalf("token did not increase: %d then %d", a.Token, b.Token)
	}
	_, err = s.Commit(ctx, id, 1, []byte("late a"), a.Token)
	var fe *store.FencedError
	if !errors.As(err, &fe) || !errors.Is(err, store.ErrFenced) || fe.Current != b.Token || fe.Token != a.Token {
		t.Fatalf("stale token commit = %v; want FencedError{%d, current %d}", err, a.Token, b.Token)
	}
	if _, err = s.Commit(ctx, id, 1, []byte("bogus"), b.Token+1); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("never-issued token commit = %v; want ErrFenced", err)
	}
	snap, _ := s.Load(ctx, id)
	if snap.Version != 1 || string(snap.State) != "by a" {
		t.Fatalf("fenced commits changed state: %d %q", snap.Version, snap.State)
	}
	if snap.Lease == nil || snap.Lease.Token != b.Token || snap.Lease.Owner != "replica-b" {
		t.Fatalf("snapshot lease = %+v; want b's", snap.Lease)
	}
	if v, err := s.Commit(ctx, id, 1, []byte("by b"), b.Token); err != nil || v != 2 {
		t.Fatalf("commit by b = %d, %v", v, err)
	}
	if v, err := s.Commit(ctx, id, 2, []byte("unfenced"), 0); err != nil || v != 3 {
		t.Fatalf("unfenced commit = %d, %v", v, err)
	}
	// A conflict is reported before fencing is considered: both are checked, neither writes.
	if _, err := s.Commit(ctx, id, 1, []byte("x"), a.Token); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale version and token = %v; want ErrConflict", err)
	}
}

func testLease(t *testing.T, open Factory) {
	s, ctx := mustOpen(t, open, 0), ctxT(t)
	const id = "sess-lease"
	a, err := s.AcquireLease(ctx, id, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if time.Until(a.Expires) < 30*time.Second || time.Until(a.Expires) > 2*time.Minute {
		t.Fatalf("Expires %v not about a minute away", a.Expires)
	}
	_, err = s.AcquireLease(ctx, id, "b", time.Minute)
	var he *store.LeaseHeldError
	if !errors.As(err, &he) || !errors.Is(err, store.ErrLeaseHeld) || he.Lease.Owner != "a" || he.Lease.Token != a.Token {
		t.Fatalf("second owner = %v; want LeaseHeldError naming a", err)
	}
	again, err := s.AcquireLease(ctx, id, "a", 2*time.Minute)
	if err != nil || again.Token != a.Token || !again.Expires.After(a.Expires) {
		t.Fatalf("re-acquire by the holder = %+v, %v; want same token, later expiry", again, err)
	}
	r, err := s.RenewLease(ctx, a, 3*time.Minute)
	if err != nil || r.Token != a.Token || time.Until(r.Expires) < 2*time.Minute {
		t.Fatalf("renew = %+v, %v", r, err)
	}
	forged := a
	forged.Token++
	if err := s.ReleaseLease(ctx, forged); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("release with a wrong token = %v; want ErrLeaseLost", err)
	}
	forged = a
	forged.Owner = "b"
	if _, err := s.RenewLease(ctx, forged, time.Minute); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("renew by a non-holder = %v; want ErrLeaseLost", err)
	}
	if err := s.ReleaseLease(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := s.ReleaseLease(ctx, a); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("double release = %v; want ErrLeaseLost", err)
	}
	if snap, _ := s.Load(ctx, id); snap.Lease != nil {
		t.Fatalf("lease after release: %+v", snap.Lease)
	}
	b, err := s.AcquireLease(ctx, id, "b", time.Minute)
	if err != nil || b.Token <= a.Token {
		t.Fatalf("acquire after release = %+v, %v", b, err)
	}
	if _, err := s.AcquireLease(ctx, id, "", time.Minute); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("empty owner = %v", err)
	}
	if _, err := s.AcquireLease(ctx, "other", "x", 0); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("zero ttl = %v", err)
	}
}

func testLeaseExpiry(t *testing.T, open Factory) {
	s, ctx := mustOpen(t, open, 0), ctxT(t)
	const id = "sess-lease-expiry"
	a, err := s.AcquireLease(ctx, id, "a", 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	var b store.Lease
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err = s.AcquireLease(ctx, id, "b", time.Minute)
		if err == nil {
			break
		}
		if !errors.Is(err, store.ErrLeaseHeld) || time.Now().After(deadline) {
			t.Fatalf("lease never expired: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if b.Token <= a.Token {
		t.Fatalf("token after expiry %d <= %d", b.Token, a.Token)
	}
	if _, err := s.RenewLease(ctx, a, time.Minute); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("renew of an expired, taken-over lease = %v; want ErrLeaseLost", err)
	}
	if _, err := s.Commit(ctx, id, 0, []byte("a"), a.Token); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("commit with the expired token = %v; want ErrFenced", err)
	}
}

func testDiagnostics(t *testing.T, open Factory) {
	s, ctx := mustOpen(t, open, 0), ctxT(t)
	const id = "sess-diag"
	if _, err := s.Commit(ctx, id, 0, []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	err := s.AddDiagnostics(ctx, id, []store.Diagnostic{
		{Kind: "resolve-failed", Key: "fp:b", Detail: "first b"},
		{Kind: "resolve-failed", Key: "fp:a", Detail: "first a"},
		{Kind: "invalid-request", Key: "req:1", Detail: "line\nbreak and \"quotes\" and \x00 nul"},
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.AddDiagnostics(ctx, id, []store.Diagnostic{
		{Kind: "resolve-failed", Key: "fp:a", Detail: "second a (duplicate)"},
		{Kind: "other-kind", Key: "fp:b", Detail: "duplicate key, other kind"},
		{Kind: "resolve-failed", Key: "fp:c"},
	})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := s.Load(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.Diagnostic{
		{Kind: "resolve-failed", Key: "fp:a", Detail: "first a"},
		{Kind: "resolve-failed", Key: "fp:b", Detail: "first b"},
		{Kind: "resolve-failed", Key: "fp:c"},
		{Kind: "invalid-request", Key: "req:1", Detail: "line\nbreak and \"quotes\" and \x00 nul"},
	}
	if fmt.Sprint(snap.Diagnostics) != fmt.Sprint(want) {
		t.Fatalf("diagnostics = %q\nwant %q", snap.Diagnostics, want)
	}
	if len(snap.DiagnosticCounts) != 2 || snap.DiagnosticCounts["resolve-failed"] != 3 || snap.DiagnosticCounts["invalid-request"] != 1 {
		t.Fatalf("counts = %v", snap.DiagnosticCounts)
	}
	if snap.Version != 1 {
		t.Fatalf("diagnostics changed the version to %d", snap.Version)
	}
	for _, bad := range []store.Diagnostic{{Kind: "k"}, {Key: "k"}, {Kind: "k", Key: strings.Repeat("x", store.MaxNameLen+1)}} {
		if err := s.AddDiagnostics(ctx, id, []store.Diagnostic{{Kind: "ok", Key: "never-stored"}, bad}); !errors.Is(err, store.ErrInvalidArgument) {
			t.Fatalf("diagnostic %+v: %v; want ErrInvalidArgument", bad, err)
		}
	}
	snap, _ = s.Load(ctx, id)
	if len(snap.Diagnostics) != 4 {
		t.Fatalf("a refused batch stored something: %v", snap.Diagnostics)
	}
}

func testStats(t *testing.T, open Factory) {
	s, ctx := mustOpen(t, open, 0), ctxT(t)
	const id = "sess-stats"
	if err := s.IncrStats(ctx, id, map[string]int64{store.StatRequests: 1, store.StatBytesBefore: 1000}); err != nil {
		t.Fatal(err)
	}
	if err := s.IncrStats(ctx, id, map[string]int64{store.StatRequests: 1, store.StatBytesBefore: -250, "custom": 1 << 40}); err != nil {
		t.Fatal(err)
	}
	snap, err := s.Load(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{store.StatRequests: 2, store.StatBytesBefore: 750, "custom": 1 << 40}
	if fmt.Sprint(snap.Stats) != fmt.Sprint(want) {
		t.Fatalf("stats = %v; want %v", snap.Stats, want)
	}
	if snap.Version != 0 || snap.State != nil {
		t.Fatalf("stats created a state: %+v", snap)
	}
	// A stats-only session is listed, and its first commit still expects version 0.
	if v, err := s.Commit(ctx, id, 0, []byte("s"), 0); err != nil || v != 1 {
		t.Fatalf("commit after stats = %d, %v", v, err)
	}
	for _, bad := range []string{"", strings.Repeat("n", store.MaxNameLen+1)} {
		if err := s.IncrStats(ctx, id, map[string]int64{"ok": 1, bad: 1}); !errors.Is(err, store.ErrInvalidArgument) {
			t.Fatalf("counter name of %d bytes = %v", len(bad), err)
		}
	}
	if snap, _ := s.Load(ctx, id); snap.Stats["ok"] != 0 {
		t.Fatal("a refused IncrStats stored a counter")
	}
	// An increment past the int64 range fails the whole call and writes nothing (it wrapped
	// around in the embedded stores and stopped partway on Redis).
	if err := s.IncrStats(ctx, id, map[string]int64{"near-top": math.MaxInt64 - 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.IncrStats(ctx, id, map[string]int64{"ok": 1, "near-top": 2, "zz": 1}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("an overflowing IncrStats = %v; want ErrInvalidArgument", err)
	}
	if snap, _ := s.Load(ctx, id); snap.Stats["near-top"] != math.MaxInt64-1 || snap.Stats["ok"] != 0 || snap.Stats["zz"] != 0 {
		t.Fatalf("an overflowing IncrStats wrote part of itself: %v", snap.Stats)
	}
	// Concurrent increments are not lost.
	concurrently(t, func(_, _ int) error { return s.IncrStats(ctx, id, map[string]int64{store.StatFlushes: 1}) })
	snap, _ = s.Load(ctx, id)
	if snap.Stats[store.StatFlushes] != 200 {
		t.Fatalf("flushes = %d; want 200", snap.Stats[store.StatFlushes])
	}
}

func testUpdateStatsSet(t *testing.T, open Factory) {
	s, ctx := mustOpen(t, open, 0), ctxT(t)
	const id = "sess-setstats"
	if err := s.IncrStats(ctx, id, map[string]int64{"last": 5, store.StatRequests: 1}); err != nil {
		t.Fatal(err)
	}
	// UpdateStats with Set replaces a counter's value, creates missing ones and leaves the others alone.
	if err := s.UpdateStats(ctx, id, store.StatsUpdate{Set: map[string]int64{"last": 3, "new": -7, "big": 1 << 50}}); err != nil {
		t.Fatal(err)
	}
	snap, err := s.Load(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"last": 3, "new": -7, "big": 1 << 50, store.StatRequests: 1}
	if fmt.Sprint(snap.Stats) != fmt.Sprint(want) {
		t.Fatalf("stats = %v; want %v", snap.Stats, want)
	}
	if snap.Version != 0 || snap.State != nil {
		t.Fatalf("UpdateStats (Set) created a state: %+v", snap)
	}
	if err := s.IncrStats(ctx, id, map[string]int64{"last": 1}); err != nil {
		t.Fatal(err)
	}
	if snap, _ := s.Load(ctx, id); snap.Stats["last"] != 4 {
		t.Fatalf("an increment after a set = %d; want 4", snap.Stats["last"])
	}
	for _, bad := range []string{"", strings.Repeat("n", store.MaxNameLen+1)} {
		if err := s.UpdateStats(ctx, id, store.StatsUpdate{Set: map[string]int64{"ok": 1, bad: 1}}); !errors.Is(err, store.ErrInvalidArgument) {
			t.Fatalf("counter name of %d bytes = %v", len(bad), err)
		}
	}
	if snap, _ := s.Load(ctx, id); snap.Stats["ok"] != 0 {
		t.Fatal("a refused UpdateStats (Set) stored a counter")
	}
	// Concurrent writers of one value leave one of their values, never a sum.
	concurrently(t, func(g, _ int) error {
		return s.UpdateStats(ctx, id, store.StatsUpdate{Set: map[string]int64{"last": int64(g)}})
	})
	if snap, _ := s.Load(ctx, id); snap.Stats["last"] < 1 || snap.Stats["last"] > 8 {
		t.Fatalf("last = %d after concurrent sets of 1..8", snap.Stats["last"])
	}
}

func testUpdateStats(t *testing.T, open Factory) {
	s, ctx := mustOpen(t, open, 0), ctxT(t)
	const id = "sess-updatestats"
	if err := s.UpdateStats(ctx, id, store.StatsUpdate{Set: map[string]int64{"n": 5, "last": 5, "high": 100, "neg": -3, "big": 1<<53 + 1}}); err != nil {
		t.Fatal(err)
	}
	// One write adds, sets and raises; a maximum below the stored value changes nothing.
	u := store.StatsUpdate{
		Incr: map[string]int64{"n": 2, "fresh": 1},
		Set:  map[string]int64{"last": 1},
		Max:  map[string]int64{"high": 99, "neg": -2, "big": 1<<53 + 2, "new-max": -9},
	}
	if err := s.UpdateStats(ctx, id, u); err != nil {
		t.Fatal(err)
	}
	snap, err := s.Load(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"n": 7, "fresh": 1, "last": 1, "high": 100, "neg": -2, "big": 1<<53 + 2, "new-max": -9}
	if fmt.Sprint(snap.Stats) != fmt.Sprint(want) {
		t.Fatalf("stats = %v; want %v", snap.Stats, want)
	}
	if snap.Version != 0 || snap.State != nil {
		t.Fatalf("UpdateStats created a state: %+v", snap)
	}
	if err := s.UpdateStats(ctx, id, store.StatsUpdate{Max: map[string]int64{"big": 1 << 53, "neg": -5}}); err != nil {
		t.Fatal(err)
	}
	if snap, _ := s.Load(ctx, id); snap.Stats["big"] != 1<<53+2 || snap.Stats["neg"] != -2 {
		t.Fatalf("a smaller maximum lowered a counter: %v", snap.Stats)
	}
	// Refused: a bad name, or one name in two maps; nothing of the call is stored.
	for _, bad := range []store.StatsUpdate{
		{Incr: map[string]int64{"ok": 1}, Max: map[string]int64{"": 1}},
		{Set: map[string]int64{"ok": 1, strings.Repeat("n", store.MaxNameLen+1): 1}},
		{Incr: map[string]int64{"ok": 1}, Max: map[string]int64{"ok": 1}},
	} {
		if err := s.UpdateStats(ctx, id, bad); !errors.Is(err, store.ErrInvalidArgument) {
			t.Fatalf("UpdateStats(%v) = %v", bad, err)
		}
	}
	if snap, _ := s.Load(ctx, id); snap.Stats["ok"] != 0 {
		t.Fatal("a refused UpdateStats stored a counter")
	}
	// An increment past the int64 range fails the whole call, before anything is written;
	// up to the limits, and of opposite signs, they add exactly.
	if err := s.UpdateStats(ctx, id, store.StatsUpdate{Set: map[string]int64{"top": math.MaxInt64 - 1000, "bottom": math.MinInt64 + 1000, "other": 1}}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []map[string]int64{
		{"other": 5, "top": 1001},
		{"other": 5, "bottom": -1001},
		{"other": 5, "top": math.MaxInt64},
	} {
		if err := s.UpdateStats(ctx, id, store.StatsUpdate{Incr: bad, Set: map[string]int64{"last": 42}}); !errors.Is(err, store.ErrInvalidArgument) {
			t.Fatalf("UpdateStats(Incr %v) = %v; want ErrInvalidArgument", bad, err)
		}
	}
	if snap, _ := s.Load(ctx, id); snap.Stats["other"] != 1 || snap.Stats["last"] != 1 || snap.Stats["top"] != math.MaxInt64-1000 || snap.Stats["bottom"] != math.MinInt64+1000 {
		t.Fatalf("an overflowing UpdateStats wrote part of itself: %v", snap.Stats)
	}
	if err := s.UpdateStats(ctx, id, store.StatsUpdate{Incr: map[string]int64{"top": 1000, "bottom": -1000, "other": math.MinInt64 + 1}}); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateStats(ctx, id, store.StatsUpdate{Incr: map[string]int64{"top": math.MinInt64, "other": math.MinInt64 + 1}}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("an increment below the int64 range: %v", err)
	}
	if snap, _ := s.Load(ctx, id); snap.Stats["top"] != math.MaxInt64 || snap.Stats["bottom"] != math.MinInt64 || snap.Stats["other"] != math.MinInt64+2 {
		t.Fatalf("increments up to the int64 limits: %v", snap.Stats)
	}
	// Concurrent writers: increments are not lost, and a maximum ends at the largest value.
	concurrently(t, func(g, i int) error {
		return s.UpdateStats(ctx, id, store.StatsUpdate{Incr: map[string]int64{"count": 1}, Max: map[string]int64{"at": int64(g*100 + i)}})
	})
	if snap, _ := s.Load(ctx, id); snap.Stats["count"] != 200 || snap.Stats["at"] != 824 {
		t.Fatalf("count = %d (want 200), at = %d (want 824)", snap.Stats["count"], snap.Stats["at"])
	}
}

func testBlobs(t *testing.T, open Factory) {
	s, ctx := mustOpen(t, open, 0), ctxT(t)
	const id = "sess-blob"
	text := []byte(strings.Repeat("func main() { fmt.Println(\"hello\") }\n", 500))
	random := make([]byte, 100_000)
	_, _ = rand.Read(random)
	for key, val := range map[string][]byte{"orig/toolu_1": text, "spill:2": random, "empty": {}, "tiny": []byte("x")} {
		if err := s.PutBlob(ctx, id, key, val); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetBlob(ctx, id, key)
		if err != nil || !bytes.Equal(got, val) || got == nil {
			t.Fatalf("blob %q round trip: %d bytes, %v", key, len(got), err)
		}
	}
	if err := s.PutBlob(ctx, id, "tiny", []byte("replaced")); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetBlob(ctx, id, "tiny"); string(got) != "replaced" {
		t.Fatalf("replaced blob = %q", got)
	}
	if _, err := s.GetBlob(ctx, id, "missing"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing blob = %v; want ErrNotFound", err)
	}
	if _, err := s.GetBlob(ctx, "other-session", "tiny"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("blob of another session = %v; want ErrNotFound", err)
	}
	if err := s.PutBlob(ctx, id, "", text); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("empty key = %v", err)
	}
	if err := s.PutBlob(ctx, id, strings.Repeat("k", store.MaxBlobKeyLen+1), text); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("long key = %v", err)
	}
	if snap, _ := s.Load(ctx, id); snap.Version != 0 {
		t.Fatalf("blobs changed the version to %d", snap.Version)
	}
	// DeleteBlob removes one blob; a missing blob or session is not an error.
	if err := s.DeleteBlob(ctx, id, "tiny"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetBlob(ctx, id, "tiny"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted blob = %v; want ErrNotFound", err)
	}
	if got, err := s.GetBlob(ctx, id, "empty"); err != nil || got == nil {
		t.Fatalf("DeleteBlob removed another blob: %v", err)
	}
	if err := s.DeleteBlob(ctx, id, "tiny"); err != nil {
		t.Fatalf("deleting a missing blob: %v", err)
	}
	if err := s.DeleteBlob(ctx, "no-such-session", "tiny"); err != nil {
		t.Fatalf("deleting a blob of an unknown session: %v", err)
	}
	if snap, _ := s.Load(ctx, "no-such-session"); snap.Version != 0 || !snap.LastSeen.IsZero() {
		t.Fatalf("DeleteBlob created a session: %+v", snap)
	}
	if err := s.DeleteBlob(ctx, id, ""); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("empty key = %v", err)
	}
}

func testListDelete(t *testing.T, open Factory) {
	s, ctx := mustOpen(t, open, 0), ctxT(t)
	ids := []string{"b-session", "a-session", "{brace}:colon", strings.Repeat("long", 100)}
	for i, id := range ids {
		for v := 0; v <= i; v++ {
			if _, err := s.Commit(ctx, id, uint64(v), []byte(fmt.Sprintf("state %d", v)), 0); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.IncrStats(ctx, id, map[string]int64{store.StatRequests: int64(i + 1)}); err != nil {
			t.Fatal(err)
		}
		if err := s.AddDiagnostics(ctx, id, []store.Diagnostic{{Kind: "k", Key: "x"}, {Kind: "k", Key: "y"}}); err != nil {
			t.Fatal(err)
		}
		if err := s.PutBlob(ctx, id, "blob", []byte("data")); err != nil {
			t.Fatal(err)
		}
	}
	infos, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != len(ids) {
		t.Fatalf("List = %d sessions; want %d", len(infos), len(ids))
	}
	for i := 1; i < len(infos); i++ {
		if infos[i-1].Session >= infos[i].Session {
			t.Fatalf("List not sorted: %q before %q", infos[i-1].Session, infos[i].Session)
		}
	}
	byID := map[string]store.SessionInfo{}
	for _, in := range infos {
		byID[in.Session] = in
	}
	for i, id := range ids {
		in, ok := byID[id]
		if !ok {
			t.Fatalf("List misses %q", id)
		}
		if in.Version != uint64(i+1) || in.Stats[store.StatRequests] != int64(i+1) || in.DiagnosticCounts["k"] != 2 ||
			in.StateBytes <= 0 || time.Since(in.LastSeen) > time.Minute {
			t.Fatalf("info for %q = %+v", id, in)
		}
	}
	lease, err := s.AcquireLease(ctx, ids[0], "flusher", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "never-existed"); err != nil {
		t.Fatalf("delete of an unknown session = %v", err)
	}
	snap, err := s.Load(ctx, ids[0])
	if err != nil || snap.Version != 0 || len(snap.Stats) != 0 || len(snap.Diagnostics) != 0 || snap.Lease != nil {
		t.Fatalf("after delete: %+v, %v", snap, err)
	}
	if _, err := s.GetBlob(ctx, ids[0], "blob"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("blob after delete = %v", err)
	}
	if err := s.ReleaseLease(ctx, lease); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("lease after delete = %v; want ErrLeaseLost", err)
	}
	// A flusher still holding the deleted session's token cannot resurrect it.
	if _, err := s.Commit(ctx, ids[0], 0, []byte("resurrected"), lease.Token); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("fenced commit after delete = %v; want ErrFenced", err)
	}
	infos, _ = s.List(ctx)
	if len(infos) != len(ids)-1 {
		t.Fatalf("List after delete = %d sessions", len(infos))
	}
	for _, in := range infos {
		if in.Session == ids[0] {
			t.Fatal("deleted session listed")
		}
	}
	// Others are untouched.
	if got, err := s.GetBlob(ctx, ids[1], "blob"); err != nil || string(got) != "data" {
		t.Fatalf("neighbour blob = %q, %v", got, err)
	}
}

func testWatch(t *testing.T, open Factory) {
	s, ctx := mustOpen(t, open, 0), ctxT(t)
	wctx, cancel := context.WithCancel(ctx)
	events, err := s.Watch(wctx)
	if err != nil {
		t.Fatal(err)
	}
	const id = "sess:{watch}"
	if _, err := s.Commit(ctx, id, 0, []byte("a"), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.AddDiagnostics(ctx, id, []store.Diagnostic{{Kind: "k", Key: "1"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddDiagnostics(ctx, id, []store.Diagnostic{{Kind: "k", Key: "1"}}); err != nil { // duplicate: no event
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, id, 1, []byte("b"), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	want := []store.Event{
		{Kind: store.EventCommitted, Session: id, Version: 1},
		{Kind: store.EventDiagnostics, Session: id, Version: 1},
		{Kind: store.EventCommitted, Session: id, Version: 2},
		{Kind: store.EventDeleted, Session: id},
	}
	for i, w := range want {
		select {
		case got := <-events:
			if got != w {
				t.Fatalf("event %d = %+v; want %+v", i, got, w)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("event %d (%+v) not delivered", i, w)
		}
	}
	cancel()
	for {
		select {
		case _, ok := <-events:
			if !ok {
				return
			}
		case <-time.After(10 * time.Second):
			t.Fatal("channel not closed after the context ended")
		}
	}
}

func testIdleExpiry(t *testing.T, open Factory) {
	const ttl = 400 * time.Millisecond
	s, ctx := mustOpen(t, open, ttl), ctxT(t)
	if _, err := s.Commit(ctx, "expiring", 0, []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.PutBlob(ctx, "expiring", "b", []byte("blob")); err != nil {
		t.Fatal(err)
	}
	if err := s.AddDiagnostics(ctx, "expiring", []store.Diagnostic{{Kind: "k", Key: "1"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.IncrStats(ctx, "expiring", map[string]int64{"n": 1}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		infos, err := s.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(infos) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session never expired: %+v", infos)
		}
		time.Sleep(50 * time.Millisecond)
	}
	snap, err := s.Load(ctx, "expiring")
	if err != nil || snap.Version != 0 || len(snap.Stats) != 0 || len(snap.Diagnostics) != 0 {
		t.Fatalf("expired session still loads: %+v, %v", snap, err)
	}
	if _, err := s.GetBlob(ctx, "expiring", "b"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("expired blob = %v", err)
	}
	if v, err := s.Commit(ctx, "expiring", 0, []byte("fresh"), 0); err != nil || v != 1 {
		t.Fatalf("recommit after expiry = %d, %v", v, err)
	}
}

// history is the committed payload of the concurrency test: the allocated tN labels in order.
type history struct {
	Labels []string `json:"labels"`
	Owners []string `json:"owners"`
}

// CommitLoop appends n labels t<N> (N = position+1) to session's history as owner, retrying
// on conflicts, and returns the number of conflicts it saw. It is exported for the
// multi-process tests of backends.
func CommitLoop(ctx context.Context, s store.Store, session, owner string, n int) (conflicts int, err error) {
	for done := 0; done < n; {
		snap, err := s.Load(ctx, session)
		if err != nil {
			return conflicts, err
		}
		var h history
		if snap.Version > 0 {
			if err := json.Unmarshal(snap.State, &h); err != nil {
				return conflicts, fmt.Errorf("version %d: %w", snap.Version, err)
			}
		}
		if uint64(len(h.Labels)) != snap.Version {
			return conflicts, fmt.Errorf("version %d holds %d labels", snap.Version, len(h.Labels))
		}
		h.Labels = append(h.Labels, fmt.Sprintf("t%d", len(h.Labels)+1))
		h.Owners = append(h.Owners, owner)
		raw, _ := json.Marshal(h)
		if _, err := s.Commit(ctx, session, snap.Version, raw, 0); err != nil {
			if errors.Is(err, store.ErrConflict) {
				conflicts++
				continue
			}
			return conflicts, err
		}
		done++
	}
	return conflicts, nil
}

// CheckHistory verifies the final history of session: exactly want labels t1..t<want>, each
// once, and perOwner[o] entries written by owner o.
func CheckHistory(t testing.TB, s store.Store, session string, want int, perOwner map[string]int) {
	t.Helper()
	snap, err := s.Load(context.Background(), session)
	if err != nil {
		t.Fatal(err)
	}
	var h history
	if err := json.Unmarshal(snap.State, &h); err != nil {
		t.Fatal(err)
	}
	if snap.Version != uint64(want) || len(h.Labels) != want {
		t.Fatalf("version %d with %d labels; want %d", snap.Version, len(h.Labels), want)
	}
	seen := map[string]bool{}
	for i, l := range h.Labels {
		if l != fmt.Sprintf("t%d", i+1) || seen[l] {
			t.Fatalf("label %d = %q (duplicate or out of order)", i, l)
		}
		seen[l] = true
	}
	got := map[string]int{}
	for _, o := range h.Owners {
		got[o]++
	}
	if fmt.Sprint(got) != fmt.Sprint(perOwner) {
		t.Fatalf("commits per owner = %v; want %v (a lost or duplicated commit)", got, perOwner)
	}
}

func testConcurrent(t *testing.T, open Factory) {
	s, ctx := mustOpen(t, open, 0), ctxT(t)
	const id, goroutines, each = "sess-race", 8, 25
	var wg sync.WaitGroup
	want := map[string]int{}
	conflicts := make([]int, goroutines)
	for g := 0; g < goroutines; g++ {
		owner := fmt.Sprintf("g%d", g)
		want[owner] = each
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := CommitLoop(ctx, s, id, owner, each)
			conflicts[g] = n
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	CheckHistory(t, s, id, goroutines*each, want)
	total := 0
	for _, c := range conflicts {
		total += c
	}
	t.Logf("%d commits, %d conflicts retried", goroutines*each, total)
}

func testSessionIDs(t *testing.T, open Factory) {
	s, ctx := mustOpen(t, open, 0), ctxT(t)
	long := strings.Repeat("x", 10<<10)
	accepted := []string{
		"{", "}", "{}", "{a}", "a", ":", "a:b", "{a}:b", "prefix:{tag}:m", long, long + "y",
		strings.Repeat("é", 200), "with space", "日本語", "~abc", "~" + strings.Repeat("0", 64),
	}
	for i, id := range accepted {
		if _, err := s.Commit(ctx, id, 0, []byte(fmt.Sprintf("state-%d", i)), 0); err != nil {
			t.Fatalf("id %d (%q...): %v", i, trunc(id), err)
		}
		if err := s.PutBlob(ctx, id, "b", []byte(fmt.Sprintf("blob-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	for i, id := range accepted {
		snap, err := s.Load(ctx, id)
		if err != nil || snap.Version != 1 || string(snap.State) != fmt.Sprintf("state-%d", i) {
			t.Fatalf("id %d (%q...) loads %+v, %v: ids collide or were mangled", i, trunc(id), snap, err)
		}
		if b, err := s.GetBlob(ctx, id, "b"); err != nil || string(b) != fmt.Sprintf("blob-%d", i) {
			t.Fatalf("id %d blob = %q, %v", i, b, err)
		}
	}
	infos, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, in := range infos {
		listed[in.Session] = true
	}
	for i, id := range accepted {
		if !listed[id] {
			t.Fatalf("id %d (%q...) not listed verbatim", i, trunc(id))
		}
	}
	refused := []string{"", "a\nb", "nul\x00byte", "\r", "tab\t", "del\x7f", "c1\u0085", "bad\xffutf8", strings.Repeat("z", store.MaxSessionIDLen+1)}
	for _, id := range refused {
		checks := map[string]error{}
		_, checks["Load"] = s.Load(ctx, id)
		_, checks["Commit"] = s.Commit(ctx, id, 0, []byte("x"), 0)
		checks["AddDiagnostics"] = s.AddDiagnostics(ctx, id, []store.Diagnostic{{Kind: "k", Key: "k"}})
		checks["IncrStats"] = s.IncrStats(ctx, id, map[string]int64{"n": 1})
		checks["UpdateStats(Set)"] = s.UpdateStats(ctx, id, store.StatsUpdate{Set: map[string]int64{"n": 1}})
		checks["UpdateStats"] = s.UpdateStats(ctx, id, store.StatsUpdate{Max: map[string]int64{"n": 1}})
		checks["DeleteBlob"] = s.DeleteBlob(ctx, id, "b")
		checks["PutBlob"] = s.PutBlob(ctx, id, "b", []byte("x"))
		_, checks["GetBlob"] = s.GetBlob(ctx, id, "b")
		_, checks["AcquireLease"] = s.AcquireLease(ctx, id, "o", time.Minute)
		checks["Delete"] = s.Delete(ctx, id)
		for op, err := range checks {
			var se *store.SessionIDError
			if !errors.Is(err, store.ErrInvalidSession) || !errors.As(err, &se) || se.Reason == "" {
				t.Fatalf("%s(%q...) = %v; want a *SessionIDError", op, trunc(id), err)
			}
		}
	}
	if infos2, _ := s.List(ctx); len(infos2) != len(infos) {
		t.Fatalf("refused ids stored something: %d sessions, want %d", len(infos2), len(infos))
	}
}

func trunc(s string) string {
	if len(s) > 20 {
		return s[:20]
	}
	return s
}

func testLarge(t *testing.T, open Factory) {
	if testing.Short() {
		t.Skip("50 MB values: skipped in -short mode")
	}
	s, ctx := mustOpen(t, open, 0), ctxT(t)
	const size = 50 << 20
	// Half incompressible, half text: the store must neither truncate nor choke on either.
	val := make([]byte, size)
	_, _ = rand.Read(val[:size/2])
	line := []byte("2026-11-29T21:00:00Z INFO request served path=/v1/messages status=200\n")
	for i := size / 2; i < size; i += len(line) {
		copy(val[i:], line)
	}
	const id = "sess-large"
	if v, err := s.Commit(ctx, id, 0, val, 0); err != nil || v != 1 {
		t.Fatalf("50 MB commit = %d, %v", v, err)
	}
	if err := s.PutBlob(ctx, id, "big", val); err != nil {
		t.Fatalf("50 MB blob: %v", err)
	}
	snap, err := s.Load(ctx, id)
	if err != nil || !bytes.Equal(snap.State, val) {
		t.Fatalf("50 MB state round trip: %d bytes, %v", len(snap.State), err)
	}
	b, err := s.GetBlob(ctx, id, "big")
	if err != nil || !bytes.Equal(b, val) {
		t.Fatalf("50 MB blob round trip: %d bytes, %v", len(b), err)
	}
}

func testCanceled(t *testing.T, open Factory) {
	s := mustOpen(t, open, 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Load(ctx, "x"); !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Load with a canceled context = %v; want ErrUnavailable wrapping context.Canceled", err)
	}
	if _, err := s.Commit(ctx, "x", 0, []byte("x"), 0); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Commit with a canceled context = %v", err)
	}
	if snap, err := s.Load(context.Background(), "x"); err != nil || snap.Version != 0 {
		t.Fatalf("a canceled commit stored something: %+v, %v", snap, err)
	}
}

func testClosed(t *testing.T, open Factory) {
	s := open(t, 0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.Load(ctx, "x"); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Load after Close = %v", err)
	}
	if _, err := s.Commit(ctx, "x", 0, nil, 0); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Commit after Close = %v", err)
	}
	if _, err := s.List(ctx); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("List after Close = %v", err)
	}
	if _, err := s.Watch(ctx); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Watch after Close = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
}

// concurrently runs write 25 times (i = 0..24) on each of 8 goroutines (g = 1..8) at once
// and waits for them; a goroutine whose write fails reports it and stops.
func concurrently(t *testing.T, write func(g, i int) error) {
	var wg sync.WaitGroup
	for g := 1; g <= 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				if err := write(g, i); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
