package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/store/storetest"
)

func TestMemoryContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, ttl time.Duration) store.Store { return store.NewMemory(ttl) })
}

func TestBoltContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, ttl time.Duration) store.Store {
		s, err := store.OpenBolt(filepath.Join(t.TempDir(), "state.db"), ttl)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestBoltReopenKeepsState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "state.db")
	ctx := context.Background()
	s, err := store.Open(ctx, "bolt:"+path+"?ttl=0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, "a:{b}", 0, []byte("kept"), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.PutBlob(ctx, "a:{b}", "k", []byte("blob")); err != nil {
		t.Fatal(err)
	}
	// The file is locked while open: a second opener fails with ErrUnavailable.
	if _, err := store.OpenBolt(path, 0); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("second open of a locked file = %v; want ErrUnavailable", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = store.Open(ctx, "bolt://"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	snap, err := s.Load(ctx, "a:{b}")
	if err != nil || snap.Version != 1 || string(snap.State) != "kept" {
		t.Fatalf("after reopen: %+v, %v", snap, err)
	}
	if b, err := s.GetBlob(ctx, "a:{b}", "k"); err != nil || string(b) != "blob" {
		t.Fatalf("blob after reopen: %q, %v", b, err)
	}
}

func TestDefaultBoltPath(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "/var/state")
	if p, err := store.DefaultBoltPath(); err != nil || p != "/var/state/condense/state.db" {
		t.Fatalf("with XDG_STATE_HOME: %q, %v", p, err)
	}
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("HOME", "/home/u")
	if p, err := store.DefaultBoltPath(); err != nil || p != "/home/u/.local/state/condense/state.db" {
		t.Fatalf("without XDG_STATE_HOME: %q, %v", p, err)
	}
}

func TestOpenURLs(t *testing.T) {
	ctx := context.Background()
	s, err := store.Open(ctx, "memory:?ttl=1h")
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	for _, bad := range []string{"nothing", "ftp://x", "memory:?ttl=soon", "memory:?ttl=-1s", "memory:?color=red", "bolt:/tmp/x?bogus=1", "redis://127.0.0.1:1?prefix=a{b}"} {
		if _, err := store.Open(ctx, bad); err == nil || !errors.Is(err, store.ErrInvalidArgument) {
			t.Fatalf("Open(%q) = %v; want ErrInvalidArgument", bad, err)
		}
	}
	if got := store.Describe("redis://user:secret@host:6379/0"); got != "redis://user:xxxxx@host:6379/0" {
		t.Fatalf("Describe = %q", got)
	}
}
