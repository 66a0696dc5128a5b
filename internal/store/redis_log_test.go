package store_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/store"
)

// lockedBuffer is a bytes.Buffer safe for go-redis's background goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestLogRedisTo: go-redis's own line about a failed dial arrives as a structured debug line
// of the given logger (lib=go-redis) instead of a raw line on standard error.
func TestLogRedisTo(t *testing.T) {
	var buf lockedBuffer
	store.LogRedisTo(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	defer store.LogRedisTo(nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	_ = l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := store.Open(ctx, "redis://"+dead); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Open on a dead port = %v", err)
	}
	var found bool
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if gjson.Get(line, "lib").Str == "go-redis" && gjson.Get(line, "level").Str == "DEBUG" &&
			strings.Contains(gjson.Get(line, "msg").Str, "failed to dial") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no go-redis debug line about the failed dial in:\n%s", buf.String())
	}
}
