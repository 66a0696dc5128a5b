package flush

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"
)

// logBuffer collects JSON log lines; safe for concurrent writers.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines returns the lines whose msg is msg.
func (l *logBuffer) lines(msg string) []gjson.Result {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []gjson.Result
	for _, line := range strings.Split(l.b.String(), "\n") {
		if r := gjson.Parse(line); r.Get("msg").Str == msg {
			out = append(out, r)
		}
	}
	return out
}

// captureLog returns an info-level JSON logger and what it wrote.
func captureLog() (*slog.Logger, *logBuffer) {
	var b logBuffer
	return slog.New(slog.NewJSONHandler(&b, nil)), &b
}

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
	lines := buf.lines("flush")
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
	if n := len(buf.lines("flush")); n != 1 {
		t.Fatalf("a flush with nothing to do logged at info level: %d lines", n)
	}
}
