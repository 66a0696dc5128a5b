package transcripts

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/wire"
)

// fuzzImport is the property every importer must keep on any input: either a *ParseError,
// or a session whose every request, in every form, is JSON that wire parses and that passes
// wire.Validate (reused tool-call ids excepted: they are kept as the agent sent them).
func fuzzImport(f *testing.F, format Format) {
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Import("fuzz-input", data, format)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error is %T, want *ParseError: %v", err, err)
			}
			if pe.File != "fuzz-input" {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		var body []byte
		for _, p := range s.Providers() {
			for k := 0; k < s.Len(); k++ {
				body, err = s.AppendRequest(body[:0], k, p)
				if err != nil {
					t.Fatal(err)
				}
				r, err := wire.Parse(wireFormat(p), body)
				if err != nil {
					t.Fatalf("%s request %d: %v\n%s", p, k, err, body)
				}
				if err := wire.Validate(r); err != nil {
					var ve *wire.ValidationError
					if errors.As(err, &ve) && ve.Rule == wire.RuleDuplicateCallID {
						continue
					}
					t.Fatalf("%s request %d: %v\n%s", p, k, err, body)
				}
			}
		}
	})
}

// FuzzPi fuzzes the pi session importer (seeds: testdata/fuzz/FuzzPi).
func FuzzPi(f *testing.F) { fuzzImport(f, FormatPi) }

// FuzzClaudeCode fuzzes the Claude Code importer (seeds: testdata/fuzz/FuzzClaudeCode).
func FuzzClaudeCode(f *testing.F) { fuzzImport(f, FormatClaudeCode) }

// FuzzCodex fuzzes the Codex rollout importer (seeds: testdata/fuzz/FuzzCodex).
func FuzzCodex(f *testing.F) { fuzzImport(f, FormatCodex) }

// FuzzSWEAgent fuzzes the SWE-agent importer (seeds: testdata/fuzz/FuzzSWEAgent).
func FuzzSWEAgent(f *testing.F) { fuzzImport(f, FormatSWEAgent) }

// FuzzMiniSWEAgent fuzzes the mini-SWE-agent importer (seeds: testdata/fuzz/FuzzMiniSWEAgent).
func FuzzMiniSWEAgent(f *testing.F) { fuzzImport(f, FormatMiniSWEAgent) }

// TestFuzzSeedsImport keeps the fuzz seeds meaningful: each one must import successfully
// (with auto-detection agreeing with its target's format) and yield requests.
func TestFuzzSeedsImport(t *testing.T) {
	targets := map[string]Format{"FuzzPi": FormatPi, "FuzzClaudeCode": FormatClaudeCode, "FuzzCodex": FormatCodex,
		"FuzzSWEAgent": FormatSWEAgent, "FuzzMiniSWEAgent": FormatMiniSWEAgent}
	for target, format := range targets {
		files, _ := filepath.Glob(filepath.Join("testdata", "fuzz", target, "*"))
		if len(files) == 0 {
			t.Errorf("%s: no seeds", target)
		}
		for _, path := range files {
			if isFuzzFinding(filepath.Base(path)) {
				continue // a regression input found by fuzzing: it only has to keep the property
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.SplitN(string(raw), "\n", 3)
			if len(lines) < 2 || lines[0] != "go test fuzz v1" || !strings.HasPrefix(lines[1], "[]byte(") {
				t.Fatalf("%s: not a fuzz seed file", path)
			}
			data, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			name := "seed.jsonl"
			if format == FormatSWEAgent {
				name = "seed.traj"
			} else if format == FormatMiniSWEAgent {
				name = "seed.traj.json"
			}
			s, err := Import(name, []byte(data), FormatAuto)
			if err != nil {
				t.Errorf("%s: %v", path, err)
				continue
			}
			if s.Format != format || s.Len() == 0 {
				t.Errorf("%s: format %s, %d requests", path, s.Format, s.Len())
			}
		}
	}
}

// isFuzzFinding reports whether a seed file name is one `go test -fuzz` generated (16 hex
// digits) rather than a hand-written seed.
func isFuzzFinding(name string) bool {
	if len(name) != 16 {
		return false
	}
	for _, c := range name {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
