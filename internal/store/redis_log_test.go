package store_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/testutil/logbuf"
)

// TestLogRedisTo: go-redis's own line about a failed dial arrives as a structured debug line
// of the given logger (lib=go-redis) instead of a raw line on standard error.
func TestLogRedisTo(t *testing.T) {
	log, buf := logbuf.JSON(slog.LevelDebug)
	store.LogRedisTo(log)
	defer store.LogRedisTo(nil)
	dead := deadAddr(t)
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
