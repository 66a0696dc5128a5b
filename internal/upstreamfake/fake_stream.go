package upstreamfake

import (
	"fmt"
	"net/http"
	"time"
)

// sse writes events and flushes after each one.
type sse struct {
	w     http.ResponseWriter
	f     http.Flusher
	delay time.Duration
	hold  <-chan struct{}
}

func newSSE(w http.ResponseWriter, rep Reply) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(200)
	f, _ := w.(http.Flusher)
	return &sse{w: w, f: f, delay: rep.ChunkDelay, hold: rep.Hold}
}

func (s *sse) event(name, data string) {
	if name != "" {
		fmt.Fprintf(s.w, "event: %s\n", name)
	}
	fmt.Fprintf(s.w, "data: %s\n\n", data)
	if s.f != nil {
		s.f.Flush()
	}
	if s.delay > 0 {
		time.Sleep(s.delay)
	}
	if s.hold != nil {
		<-s.hold
		s.hold = nil
	}
}

// chunks splits s into up to three pieces so deltas are really incremental.
func chunks(s string) []string {
	if len(s) < 3 {
		return []string{s}
	}
	a, b := len(s)/3, 2*len(s)/3
	// keep UTF-8 sequences whole
	for a > 0 && s[a]&0xC0 == 0x80 {
		a--
	}
	for b > a && s[b]&0xC0 == 0x80 {
		b--
	}
	out := []string{}
	for _, p := range []string{s[:a], s[a:b], s[b:]} {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}
