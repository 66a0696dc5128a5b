package wire

import (
	"runtime"
	"testing"
)

// TestRetainedBytesMatchesHeap checks RetainedBytes against what the collector frees when
// the request is let go: one request, after a session of reusing parses that began either
// with the conversation or midway (a proxy that restarted, or evicted the session, parses
// its next request whole, and every later request shares that body's messages).
func TestRetainedBytesMatchesHeap(t *testing.T) {
	raws, _ := largestRequestMessages(t)
	n := min(len(raws)/2, 40)
	anthropic, openai := claudeCodeSession(raws), openAISession(raws)
	for _, tc := range []struct {
		name string
		f    Format
		body func(int) []byte
		from int // the first request, parsed whole
	}{
		{"anthropic, from the start", Anthropic, anthropic, 0},
		{"anthropic, from midway", Anthropic, anthropic, n / 2},
		{"anthropic, one whole parse", Anthropic, anthropic, n - 1},
		{"openai, from the start", OpenAI, openai, 0},
		{"openai, from midway", OpenAI, openai, n / 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			last := parseSession(t, tc.f, n-tc.from, func(i int) []byte { return tc.body(tc.from + i) }, func(int, []byte) {})
			want, body, first := last.RetainedBytes(), len(last.Raw()), len(tc.body(tc.from))
			kept := heapKept(&last)
			t.Logf("kept %d KiB, RetainedBytes %d KiB (body %d KiB, first body %d KiB)", kept>>10, want>>10, body>>10, first>>10)
			if kept < int64(body) {
				t.Fatalf("the request keeps %d bytes alive, less than its own %d-byte body: nothing measured", kept, body)
			}
			// Leaving out the memory of the earlier parses whose messages the request shares
			// (the body parsed whole, the copies made since) puts the ratio at 0.2–0.6 in
			// every case that has them.
			if ratio := float64(want) / float64(kept); ratio < 0.9 || ratio > 1.1 {
				t.Fatalf("RetainedBytes %d, but the request keeps %d bytes alive (ratio %.2f, want 0.9–1.1)", want, kept, ratio)
			}
		})
	}
}

// heapKept returns how many bytes of the heap the collector frees when *r is let go; *r is
// nil afterwards.
func heapKept(r **Request) int64 {
	var with, without runtime.MemStats
	runtime.GC()
	runtime.GC() // finalizers set by other tests free their objects in a second cycle
	runtime.ReadMemStats(&with)
	runtime.KeepAlive(*r)
	*r = nil
	runtime.GC()
	runtime.ReadMemStats(&without)
	return int64(with.HeapAlloc) - int64(without.HeapAlloc)
}
