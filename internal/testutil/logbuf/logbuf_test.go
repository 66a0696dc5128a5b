package logbuf

import (
	"log/slog"
	"sync"
	"testing"
)

func TestBuffer(t *testing.T) {
	log, b := JSON(slog.LevelInfo)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); log.Info("hello", "i", i); log.Debug("hello") }()
	}
	wg.Wait()
	log.Warn("other")
	if lines := b.Lines("hello"); len(lines) != 8 || lines[0].Get("level").Str != "INFO" {
		t.Fatalf("lines %v", lines)
	}
	if len(b.Lines("other")) != 1 || len(b.Lines("none")) != 0 {
		t.Fatalf("buffer %s", b.String())
	}
}
