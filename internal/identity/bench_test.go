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
