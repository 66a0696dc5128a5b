// Package logbuf captures what a test's code logs: a buffer safe for the goroutines that write
// to it, and the JSON lines (log/slog's JSON handler) with a given message.
package logbuf

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"

	"github.com/tidwall/gjson"
)

// Buffer is a bytes.Buffer safe for concurrent use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Lines returns the JSON lines written so far whose "msg" is msg.
func (b *Buffer) Lines(msg string) []gjson.Result {
	var out []gjson.Result
	for _, line := range strings.Split(b.String(), "\n") {
		if r := gjson.Parse(line); r.Get("msg").Str == msg {
			out = append(out, r)
		}
	}
	return out
}

// JSON returns a logger writing JSON lines at level and up to a new Buffer.
func JSON(level slog.Level) (*slog.Logger, *Buffer) {
	b := &Buffer{}
	return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: level})), b
}
