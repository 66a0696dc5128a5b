package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// run executes cmd with args and returns its standard output, standard error and error.
func run(cmd *cobra.Command, args ...string) (string, string, error) {
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// piWithBadLine is a pi session whose third line is malformed (an invalid string escape).
const piWithBadLine = `{"type":"session","id":"s1","timestamp":"2025-12-01T10:00:00.000Z","cwd":"/w"}
{"type":"message","message":{"role":"user","content":"hi","timestamp":1}}
{"type":"message","message":{"role":"user","content":"a\*b"}}
{"type":"message","message":{"role":"assistant","content":[{"type":"text","text":"yo"}],"model":"m","stopReason":"stop","timestamp":2}}
`

// TestImportSkipsMalformedLines: the bad line is named on standard error with its file and line
// and counted, the session still imports; --strict fails on it instead and writes nothing.
func TestImportSkipsMalformedLines(t *testing.T) {
	p := writeTemp(t, "s.jsonl", piWithBadLine)
	out, errOut, err := run(importCmd(), p)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out, "\n"); n != 1 {
		t.Errorf("%d envelopes, want 1:\n%s", n, out)
	}
	if !strings.Contains(errOut, "skipped: "+p+":3: invalid JSON") || !strings.Contains(errOut, p+": 1 malformed records skipped") {
		t.Errorf("standard error: %q", errOut)
	}
	dst := filepath.Join(t.TempDir(), "out.jsonl")
	out, _, err = run(importCmd(), "--strict", "--out", dst, p)
	if err == nil || !strings.Contains(err.Error(), p+":3:") || out != "" {
		t.Fatalf("--strict: error %v, output %q", err, out)
	}
	if _, err := os.Stat(dst); !os.IsNotExist(err) {
		t.Errorf("--strict failure wrote %s", dst)
	}
}

// TestReplayStrict: replay skips the same line with the same warning, and --strict turns it into
// a file that is not replayed.
func TestReplayStrict(t *testing.T) {
	p := writeTemp(t, "s.jsonl", piWithBadLine)
	_, errOut, err := run(mustReplayCmd(), "--progress", "never", "--strategies", "none", p)
	if err != nil || !strings.Contains(errOut, "skipped: "+p+":3: invalid JSON") {
		t.Fatalf("error %v, standard error %q", err, errOut)
	}
	_, errOut, err = run(mustReplayCmd(), "--progress", "never", "--strategies", "none", "--strict", p)
	if err == nil || !strings.Contains(errOut, "not replayed: s.jsonl: "+p+":3: invalid JSON") {
		t.Fatalf("--strict: error %v, standard error %q", err, errOut)
	}
}

// TestUnknownFormatSameWording: import and replay reject a file no importer knows with the same
// error, which lists the supported formats.
func TestUnknownFormatSameWording(t *testing.T) {
	p := writeTemp(t, "x.json", "{\n  \"hello\": \"world\"\n}\n")
	_, _, ierr := run(importCmd(), p)
	_, errOut, rerr := run(mustReplayCmd(), "--progress", "never", p)
	if ierr == nil || rerr == nil {
		t.Fatalf("import %v, replay %v", ierr, rerr)
	}
	want := p + ": unknown transcript format (supported: pi, claude-code, codex, swe-agent, mini-swe-agent"
	if !strings.HasPrefix(ierr.Error(), want) {
		t.Errorf("import: %v", ierr)
	}
	if !strings.Contains(errOut, "not replayed: x.json: "+ierr.Error()+"\n") {
		t.Errorf("replay says %q, import says %q", errOut, ierr)
	}
}

// mustReplayCmd returns a fresh `condense replay` command.
func mustReplayCmd() *cobra.Command {
	cmd, _ := replayCmd()
	return cmd
}

// ocStorage is the hand-made opencode storage directory of the importer's golden tests.
const ocStorage = "../../internal/transcripts/testdata/transcripts/opencode/storage-openai"

// TestOpencodeStorageDirectory: import reads the storage directory's one session; replay of a
// directory holding the storage replays its session files, not its message and part files.
func TestOpencodeStorageDirectory(t *testing.T) {
	out, _, err := run(importCmd(), ocStorage)
	if err != nil || strings.Count(out, "\n") != 7 || !strings.HasPrefix(out, `{"provider":"openai"`) {
		t.Fatalf("import: %v\n%.300s", err, out)
	}
	parent := t.TempDir()
	if err := os.Symlink(mustAbs(t, ocStorage), filepath.Join(parent, "storage")); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := run(mustReplayCmd(), "--progress", "never", "--strategies", "none", parent)
	if err != nil || !strings.Contains(out, "TOTAL: 1 session, ") {
		t.Fatalf("replay: %v\n%s\n%s", err, out, errOut)
	}
}

// mustAbs returns p as an absolute path.
func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// codexRollout is the hand-made Codex rollout of the importer's golden tests.
const codexRollout = "../../internal/transcripts/testdata/transcripts/codex/rollout-2026-05-11T11-00-00-019e1625-0000-7000-8000-000000000001.jsonl"

// TestCodexResponsesForm: a Codex rollout imports as Responses requests by default and with
// --provider responses, as Chat Completions with --provider openai; replay bills it as
// Responses requests with 0 invalid ones; an unknown --provider names the three forms.
func TestCodexResponsesForm(t *testing.T) {
	for _, args := range [][]string{{codexRollout}, {"--provider", "responses", codexRollout}} {
		out, _, err := run(importCmd(), args...)
		if err != nil || strings.Count(out, "\n") != 5 || !strings.HasPrefix(out, `{"provider":"responses","index":0,"context":0,`) ||
			!strings.Contains(out, `"body":{"model":"gpt-5.5","instructions":`) {
			t.Fatalf("import %v: %v\n%.300s", args, err, out)
		}
	}
	if out, _, err := run(importCmd(), "--provider", "openai", codexRollout); err != nil || !strings.HasPrefix(out, `{"provider":"openai"`) {
		t.Fatalf("import --provider openai: %v\n%.200s", err, out)
	}
	if _, _, err := run(importCmd(), "--provider", "chat", codexRollout); err == nil || !strings.Contains(err.Error(), "want anthropic, openai or responses") {
		t.Fatalf("--provider chat: %v", err)
	}
	out, errOut, err := run(mustReplayCmd(), "--progress", "never", "--json", codexRollout)
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, errOut)
	}
	var rep struct {
		Sessions []struct {
			Provider   string `json:"provider"`
			Strategies []struct {
				Name    string `json:"name"`
				Invalid int    `json:"invalid_requests"`
			} `json:"strategies"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Sessions) != 1 || rep.Sessions[0].Provider != "responses" {
		t.Fatalf("replay report: %v\n%.300s", err, out)
	}
	for _, s := range rep.Sessions[0].Strategies {
		if s.Invalid != 0 {
			t.Errorf("%s: %d invalid requests", s.Name, s.Invalid)
		}
	}
}
