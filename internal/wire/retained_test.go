package wire

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/testutil/codexrollout"
)

// TestRetainedBytesMatchesHeap checks RetainedBytes against what the collector frees when
// the request is let go: one request, after a session of reusing parses that began either
// with the conversation or midway (a proxy that restarted, or evicted the session, parses
// its next request whole, and every later request shares that body's messages).
func TestRetainedBytesMatchesHeap(t *testing.T) {
	raws, _ := largestRequestMessages(t)
	n := min(len(raws)/2, 40)
	anthropic, openai := claudeCodeSession(raws), openAISession(raws)
	// 300 requests of small turns: more than 256 messages at the end, and every request's
	// list of its messages' positions is its own, not the parses' it shares.
	small := make([]json.RawMessage, 0, 600)
	for j := range 300 {
		small = append(small,
			json.RawMessage(fmt.Sprintf(`{"role":"assistant","content":[{"type":"tool_use","id":"t%d","name":"bash","input":{"command":"ls\n%d"}}]}`, j, j)),
			json.RawMessage(fmt.Sprintf(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t%d","content":"file %d\nother"}]}`, j, j)))
	}
	long := claudeCodeSession(small)
	codex := codexrollout.Require(t, codexrollout.Files(t)[0])
	// After a compaction: new messages, the same large tools and system, which keep the body
	// parsed whole alive on their own.
	tools := `"tools":[` + strings.Repeat(`{"name":"tool","description":"`+strings.Repeat(`d\n`, 500)+`","input_schema":{"type":"object"}},`, 100) + `{"name":"last","input_schema":{"type":"object"}}]`
	compacted := func(i int) []byte {
		var b bytes.Buffer
		b.WriteString(`{"model":"claude-sonnet-4-5","max_tokens":1000,` + tools + `,"system":"` + strings.Repeat(`be brief\n`, 3000) + `","messages":[`)
		for j, m := range raws[10*i : 10*i+6] {
			if j > 0 {
				b.WriteByte(',')
			}
			b.Write(m)
		}
		b.WriteString(`]}`)
		return b.Bytes()
	}
	for _, tc := range []struct {
		name     string
		f        Format
		body     func(int) []byte
		from, to int     // the requests parsed (from, parsed whole, up to to)
		over     float64 // the largest ratio of count to memory accepted (default 1.1)
	}{
		{"anthropic, from the start", Anthropic, anthropic, 0, n, 0},
		{"anthropic, from midway", Anthropic, anthropic, n / 2, n, 0},
		{"anthropic, one whole parse", Anthropic, anthropic, n - 1, n, 0},
		// Each request's last message carries a cache marker and is parsed again without it
		// by the next: its values are freed, but its parse's memory is counted whole while
		// the other message is shared: 1.36.
		{"anthropic, 300 requests", Anthropic, long, 0, 300, 1.4},
		// The whole parse's messages and the slab chunks only they used are freed, but a
		// parse's memory is counted whole while any of its values is shared: 1.12.
		{"anthropic, messages replaced", Anthropic, compacted, 0, 2, 1.2},
		{"openai, from the start", OpenAI, openai, 0, n, 0},
		{"openai, from midway", OpenAI, openai, n / 2, n, 0},
		{"responses, from the start", Responses, codex.Request, 0, min(codex.Len(), n), 0},
		{"responses, from midway", Responses, codex.Request, codex.Len() / 2, codex.Len(), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			last := parseSession(t, tc.f, tc.to-tc.from, func(i int) []byte { return tc.body(tc.from + i) }, func(int, []byte) {})
			want, body, first := last.RetainedBytes(), len(last.Raw()), len(tc.body(tc.from))
			kept := heapKept(&last)
			t.Logf("kept %d KiB, RetainedBytes %d KiB (body %d KiB, first body %d KiB)", kept>>10, want>>10, body>>10, first>>10)
			if kept < int64(body) {
				t.Fatalf("the request keeps %d bytes alive, less than its own %d-byte body: nothing measured", kept, body)
			}
			// Leaving out the memory of the earlier parses whose values the request shares
			// (the body parsed whole, the copies made since) puts the ratio at 0.2–0.6 in
			// every case that has them; counting each request's own lists in the parses'
			// shared memory puts the 300 requests' at 1.6.
			over := cmp.Or(tc.over, 1.1)
			if ratio := float64(want) / float64(kept); ratio < 0.9 || ratio > over {
				t.Fatalf("RetainedBytes %d, but the request keeps %d bytes alive (ratio %.2f, want 0.9–%.1f)", want, kept, ratio, over)
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
