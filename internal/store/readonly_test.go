package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/testutil/redistest"
)

// checkReadOnly loads session from a read-only store after its last-seen went stale (a
// read-write Load would refresh it), checks that the load wrote nothing, and that every write
// fails with ErrReadOnly.
func checkReadOnly(t *testing.T, ro store.Store, session string, seen time.Time) {
	t.Helper()
	ctx := context.Background()
	snap, err := ro.Load(ctx, session)
	if err != nil || snap.Version != 1 || string(snap.State) != "kept" {
		t.Fatalf("read-only Load = %+v, %v", snap, err)
	}
	if !snap.LastSeen.Equal(seen) {
		t.Fatalf("read-only Load refreshed last-seen: %v, was %v", snap.LastSeen, seen)
	}
	if infos, err := ro.List(ctx); err != nil || len(infos) != 1 || !infos[0].LastSeen.Equal(seen) {
		t.Fatalf("read-only List = %+v, %v", infos, err)
	}
	writes := map[string]func() error{
		"Commit":         func() error { _, err := ro.Commit(ctx, session, 1, []byte("x"), 0); return err },
		"AddDiagnostics": func() error { return ro.AddDiagnostics(ctx, session, []store.Diagnostic{{Kind: "k", Key: "k"}}) },
		"IncrStats":      func() error { return ro.IncrStats(ctx, session, map[string]int64{"n": 1}) },
		"PutBlob":        func() error { return ro.PutBlob(ctx, session, "b", []byte("x")) },
		"DeleteBlob":     func() error { return ro.DeleteBlob(ctx, session, "b") },
		"AcquireLease":   func() error { _, err := ro.AcquireLease(ctx, session, "o", time.Second); return err },
		"Delete":         func() error { return ro.Delete(ctx, session) },
	}
	for name, w := range writes {
		if err := w(); !errors.Is(err, store.ErrReadOnly) {
			t.Errorf("read-only %s = %v, want ErrReadOnly", name, err)
		}
	}
}

// TestBoltReadOnly: a read-only open of a missing file creates neither the file nor its
// directory; of an existing one it reads without writing, and refuses writes.
func TestBoltReadOnly(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "state")
	path := filepath.Join(dir, "state.db")
	if _, err := store.OpenReadOnly(ctx, "bolt:"+path); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("read-only open of a missing file = %v, want ErrNotFound", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("read-only open created %s: %v", dir, err)
	}

	// ttl=2s: a Load refreshes last-seen once it is 200ms old.
	rw, err := store.Open(ctx, "bolt:"+path+"?ttl=2s")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rw.Commit(ctx, "s", 0, []byte("kept"), 0); err != nil {
		t.Fatal(err)
	}
	snap, err := rw.Load(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if err := rw.Close(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	ro, err := store.OpenReadOnly(ctx, "bolt:"+path+"?ttl=2s")
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	checkReadOnly(t, ro, "s", snap.LastSeen)
}

// TestRedisReadOnly: a read-only Redis store's Load leaves last-seen and the idle TTL alone
// and its writes fail before reaching the server.
func TestRedisReadOnly(t *testing.T) {
	srv := redistest.Start(t, nil)
	ctx := context.Background()
	url := srv.URL() + "?prefix=ro&ttl=2s"
	rw, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	if _, err := rw.Commit(ctx, "s", 0, []byte("kept"), 0); err != nil {
		t.Fatal(err)
	}
	snap, err := rw.Load(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	ro, err := store.OpenReadOnly(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	checkReadOnly(t, ro, "s", snap.LastSeen)
	pttl, err := srv.Do("PTTL", "ro:{s}:m")
	if err != nil {
		t.Fatal(err)
	}
	if ms, _ := strconv.Atoi(pttl); ms <= 0 || ms > 1800 {
		t.Fatalf("idle TTL after the read-only load: %s ms, want below 1800 (not refreshed)", pttl)
	}
}
