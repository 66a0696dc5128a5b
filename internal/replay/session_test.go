package replay_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/condense-dev/condense/internal/replay"
	"github.com/condense-dev/condense/internal/testutil/corpus"
	"github.com/condense-dev/condense/internal/transcripts"
	"github.com/condense-dev/condense/internal/wire"
)

// TestOpenRequestLog opens a `condense import`-style envelope log through Open.
func TestOpenRequestLog(t *testing.T) {
	p := filepath.Join(t.TempDir(), "requests.jsonl")
	log := `{"provider":"openai","index":0,"time":"2026-05-01T10:00:00Z","model":"gpt-5","usage":{"output_tokens":12},"body":{"model":"gpt-5","messages":[{"role":"user","content":"hi"}]}}` + "\n"
	if err := os.WriteFile(p, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := replay.OpenWith(p, replay.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Len() != 1 || tr.WireFormat() != wire.OpenAI || tr.Meta(0).OutputTokens != 12 || tr.Kind() != "requests" {
		t.Fatalf("%s %d %v %+v", tr.Kind(), tr.Len(), tr.WireFormat(), tr.Meta(0))
	}
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(bad, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := replay.OpenWith(bad, replay.OpenOptions{}); err == nil {
		t.Fatal("garbage opened")
	}
}

// TestOpenSession opens a corpus session in both request forms where available.
func TestOpenSession(t *testing.T) {
	p := corpus.File(t, "sweagent_pydicom__pydicom-1458.traj")
	tr, err := replay.OpenWith(p, replay.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Kind() != "swe-agent" || tr.Len() != 12 || tr.WireFormat() != wire.OpenAI {
		t.Fatalf("%s %d %v", tr.Kind(), tr.Len(), tr.WireFormat())
	}
	body, err := tr.AppendRequest(nil, 11)
	if err != nil {
		t.Fatal(err)
	}
	if err := replay.Validate(tr.WireFormat(), body); err != nil {
		t.Fatalf("imported request invalid: %v", err)
	}
	cc := corpus.File(t, "ccspot_short.jsonl")
	if _, err := replay.OpenWith(cc, replay.OpenOptions{Provider: transcripts.OpenAI}); !errors.Is(err, transcripts.ErrProvider) {
		t.Fatalf("claude code as openai: %v", err)
	}
}
