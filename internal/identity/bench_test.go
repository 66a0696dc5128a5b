package identity

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

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

// BenchmarkFingerprints hashes every message of a ~2 MB request.
func BenchmarkFingerprints(b *testing.B) {
	r := bigRequest(b)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		Fingerprints(r.Messages)
	}
}

// BenchmarkOccurrences pairs and keys every tool result of a ~2 MB request.
func BenchmarkOccurrences(b *testing.B) {
	r := bigRequest(b)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		Occurrences(r.Messages)
	}
}

// BenchmarkFingerprintsCached is Fingerprints through a warm HashCache (the per-request
// cost when the transcript repeats).
func BenchmarkFingerprintsCached(b *testing.B) {
	r := bigRequest(b)
	c := NewHashCache(1 << 16)
	c.Fingerprints(r.Messages)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		c.Fingerprints(r.Messages)
	}
}
