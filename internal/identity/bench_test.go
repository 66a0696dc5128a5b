package identity

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/condense-dev/condense/internal/testutil/corpus"
	"github.com/condense-dev/condense/internal/wire"
)

// bigRequest builds a ~2 MB Anthropic request from the Claude Code corpus messages.
func bigRequest(b *testing.B) *wire.Request {
	var buf bytes.Buffer
	buf.WriteString(`{"model":"m","messages":[`)
	n := 0
	for _, p := range corpus.Files(b) {
		if !strings.Contains(p, "/ccspot_") && !strings.Contains(p, "/cccodemie_") {
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() && buf.Len() < 2<<20 {
			var rec struct {
				Type    string          `json:"type"`
				Message json.RawMessage `json:"message"`
			}
			if json.Unmarshal(sc.Bytes(), &rec) != nil || (rec.Type != "user" && rec.Type != "assistant") || len(rec.Message) == 0 {
				continue
			}
			if n > 0 {
				buf.WriteByte(',')
			}
			buf.Write(rec.Message)
			n++
		}
		f.Close()
		if buf.Len() >= 2<<20 {
			break
		}
	}
	buf.WriteString(`]}`)
	r, err := wire.Parse(wire.Anthropic, buf.Bytes())
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// BenchmarkFingerprints hashes every message of a ~2 MB request (warm memo: the same
// transcript again).
func BenchmarkFingerprints(b *testing.B) {
	r := bigRequest(b)
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b, cpuTime())
	for b.Loop() {
		Fingerprints(r.Messages)
	}
}

// BenchmarkOccurrences pairs and keys every tool result of a ~2 MB request (warm memo).
func BenchmarkOccurrences(b *testing.B) {
	r := bigRequest(b)
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b, cpuTime())
	for b.Loop() {
		occurrences(r.Messages)
	}
}

// BenchmarkFingerprintsCached is Fingerprints through a warm hashCache (the per-request
// cost when the transcript repeats).
func BenchmarkFingerprintsCached(b *testing.B) {
	r := bigRequest(b)
	c := newHashCache(1 << 16)
	c.Fingerprints(r.Messages)
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b, cpuTime())
	for b.Loop() {
		c.Fingerprints(r.Messages)
	}
}

// BenchmarkFingerprintsCold is Fingerprints with the message hash memo emptied before
// every run: canonicalising and hashing every message of the ~2 MB request.
func BenchmarkFingerprintsCold(b *testing.B) {
	r := bigRequest(b)
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b, cpuTime())
	for b.Loop() {
		hashMemo.mu.Lock()
		clear(hashMemo.m)
		hashMemo.mu.Unlock()
		Fingerprints(r.Messages)
	}
}

// BenchmarkOccurrencesCold is occurrences with the key memo emptied before every run: the
// SHA-256 cost of keying every result of the ~2 MB request for the first time.
func BenchmarkOccurrencesCold(b *testing.B) {
	r := bigRequest(b)
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b, cpuTime())
	for b.Loop() {
		keyMemo.mu.Lock()
		clear(keyMemo.m)
		keyMemo.mu.Unlock()
		occurrences(r.Messages)
	}
}

// BenchmarkFingerprintsReusing is the steady state: the ~2 MB transcript parsed with
// wire.ParseReusing after the same transcript minus its last two messages, whose
// fingerprints are known, so only the two new messages are hashed.
func BenchmarkFingerprintsReusing(b *testing.B) {
	r := bigRequest(b)
	var buf bytes.Buffer
	buf.WriteString(`{"model":"m","messages":[`)
	for i, m := range r.Messages[:len(r.Messages)-2] {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(m.Raw())
	}
	buf.WriteString(`]}`)
	prev, err := wire.Parse(wire.Anthropic, buf.Bytes())
	if err != nil {
		b.Fatal(err)
	}
	prevFps := Fingerprints(prev.Messages)
	cur, err := wire.ParseReusing(wire.Anthropic, r.Raw(), prev)
	if err != nil {
		b.Fatal(err)
	}
	if cur.ReusedMessages() != len(prev.Messages) {
		b.Fatalf("reused %d of %d", cur.ReusedMessages(), len(prev.Messages))
	}
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b, cpuTime())
	for b.Loop() {
		fingerprintsReusing(cur.Messages, prev.Messages, prevFps)
	}
}

// cpuTime returns the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU adds a cpu-ns/op metric (process CPU time per op, GC included), which unlike
// wall time does not grow when other jobs compete for the machine's cores.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}
