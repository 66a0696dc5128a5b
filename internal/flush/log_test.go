package flush

import (
	"context"
	"log/slog"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/testutil/logbuf"
)

// captureLog returns an info-level JSON logger and what it wrote.
func captureLog() (*slog.Logger, *logbuf.Buffer) { return logbuf.JSON(slog.LevelInfo) }

// TestFlushLogLine: a flush that commits logs one info line with its trigger and its duration
// in milliseconds; a flush with nothing to do logs no info line.
func TestFlushLogLine(t *testing.T) {
	r := newRig(t, "memory")
	log, buf := captureLog()
	o := r.orch("a", nil)
	o.Log = log
	ctx := context.Background()
	if res, err := o.Flush(ctx, job("s1", "log", 2)); err != nil || res.Outcome != OutcomeFlushed {
		t.Fatalf("flush: %+v, %v", res, err)
	}
	lines := buf.Lines("flush")
	if len(lines) != 1 {
		t.Fatalf("%d flush lines, want 1", len(lines))
	}
	l := lines[0]
	if l.Get("trigger").Str != "agent-message" || l.Get("outcome").Str != "flushed" || l.Get("ms").Type != gjson.Number ||
		l.Get("ms").Float() <= 0 || l.Get("ms").Float() > 60e3 || l.Get("duration").Exists() {
		t.Fatalf("flush line %s", l.Raw)
	}
	if res, err := o.Flush(ctx, job("s1", "log", 2)); err != nil || res.Outcome != OutcomeEmpty {
		t.Fatalf("second flush: %+v, %v", res, err)
	}
	if n := len(buf.Lines("flush")); n != 1 {
		t.Fatalf("a flush with nothing to do logged at info level: %d lines", n)
	}
}
