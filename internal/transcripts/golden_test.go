package transcripts

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the importers")

// TestGolden imports every hand-made transcript under testdata/transcripts/<format>/ and
// compares, for every request form the session offers, its envelopes with
// testdata/golden/<format>/<name>.<provider>.jsonl, and its Stats and skipped records with
// <name>.stats.json. Every request must pass wire.Validate.
func TestGolden(t *testing.T) {
	seen := map[Format]int{}
	for _, f := range Formats {
		dir := filepath.Join("testdata", "transcripts", string(f))
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Errorf("%s: no hand-made transcripts: %v", f, err)
			continue
		}
		for _, e := range entries {
			path := filepath.Join(dir, e.Name())
			seen[f]++
			t.Run(string(f)+"/"+e.Name(), func(t *testing.T) {
				s, err := ImportFile(path, FormatAuto)
				if err != nil {
					t.Fatal(err)
				}
				if s.Format != f {
					t.Fatalf("detected as %s", s.Format)
				}
				checkRequests(t, s)
				golden := filepath.Join("testdata", "golden", string(f), e.Name())
				for _, p := range s.Providers() {
					var buf bytes.Buffer
					if err := WriteEnvelopes(&buf, s, p, nil); err != nil {
						t.Fatal(err)
					}
					compareGolden(t, golden+"."+string(p)+".jsonl", buf.Bytes())
				}
				var skipped []string
				for _, w := range s.Warnings {
					skipped = append(skipped, w.Error())
				}
				st, err := json.MarshalIndent(struct {
					Stats
					Skipped []string `json:",omitempty"`
				}{s.Stats, skipped}, "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				compareGolden(t, golden+".stats.json", append(st, '\n'))
			})
		}
	}
	for _, f := range Formats {
		if seen[f] == 0 {
			t.Errorf("format %s has no hand-made transcript", f)
		}
	}
}

// compareGolden compares got with the golden file (or rewrites it with -update).
func compareGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run TestGolden -update)", err)
	}
	if !bytes.Equal(got, want) {
		gl := bytes.Split(got, []byte("\n"))
		wl := bytes.Split(want, []byte("\n"))
		for i := 0; i < len(gl) || i < len(wl); i++ {
			var g, w []byte
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if !bytes.Equal(g, w) {
				t.Fatalf("%s differs at line %d:\n got %.600s\nwant %.600s", path, i+1, g, w)
			}
		}
	}
}

// TestGoldenFilesHaveTranscripts keeps testdata/golden free of outputs whose transcript is gone.
func TestGoldenFilesHaveTranscripts(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "golden", "*", "*"))
	sort.Strings(files)
	for _, g := range files {
		rel, _ := filepath.Rel(filepath.Join("testdata", "golden"), g)
		name := rel
		for _, suf := range []string{".anthropic.jsonl", ".openai.jsonl", ".responses.jsonl", ".stats.json"} {
			if n := len(name) - len(suf); n > 0 && name[n:] == suf {
				name = name[:n]
				break
			}
		}
		if _, err := os.Stat(filepath.Join("testdata", "transcripts", name)); err != nil {
			t.Errorf("%s: no transcript %s", g, name)
		}
	}
}
