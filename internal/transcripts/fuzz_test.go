package transcripts

import (
	"bytes"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/testutil/corpus"
	"github.com/condense-dev/condense/internal/wire"
)

// checkImport is the property every importer keeps on any input: it never panics, and either
// fails with a *ParseError naming the file, or returns a session whose every request, in
// every form, is JSON that wire parses and that passes wire.Validate (in the OpenAI form, ids
// the agent reused within one message are kept as sent, and reported). A strict import that succeeds skipped
// nothing, so the lenient import of the same input yields the same requests.
func checkImport(t *testing.T, name string, data []byte, format Format) {
	s, err := Import(name, data, format)
	if err != nil {
		checkParseError(t, name, err)
	} else {
		checkRequests(t, s)
	}
	strict, serr := ImportWith(name, data, Options{Format: format, Strict: true})
	if serr != nil {
		checkParseError(t, name, serr)
		return
	}
	if err != nil || len(strict.Warnings) != 0 || strict.Len() != s.Len() {
		t.Fatalf("strict import succeeded (%d requests), lenient: %v, %d requests", strict.Len(), err, s.Len())
	}
	for _, p := range s.Providers() {
		for k := 0; k < s.Len(); k++ {
			a, _ := s.Request(k, p)
			b, _ := strict.Request(k, p)
			if !bytes.Equal(a, b) {
				t.Fatalf("%s request %d differs between strict and lenient imports", p, k)
			}
		}
	}
}

// checkParseError checks that an import error is a *ParseError naming the file.
func checkParseError(t *testing.T, name string, err error) {
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("error is %T, want *ParseError: %v", err, err)
	}
	if pe.File != name {
		t.Fatalf("error does not name the file: %v", err)
	}
}

// checkRequests checks that every request of s, in every form, parses and validates.
func checkRequests(t *testing.T, s *Session) {
	var body []byte
	var err error
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
				if p == OpenAI && errors.As(err, &ve) && ve.Rule == wire.RuleDuplicateCallID {
					continue
				}
				t.Fatalf("%s request %d: %v\n%s", p, k, err, body)
			}
		}
	}
}

// fuzzImport fuzzes one importer with random bytes (seeds: testdata/fuzz/<target>, plus the
// hand-made transcripts of the format).
func fuzzImport(f *testing.F, format Format) {
	for _, tr := range handMade(f) {
		if tr.format == format {
			f.Add(tr.data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkImport(t, "fuzz-input", data, format) })
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

// FuzzOpencode fuzzes the importer of `opencode export` JSON (seeds: testdata/fuzz/FuzzOpencode).
func FuzzOpencode(f *testing.F) { fuzzImport(f, FormatOpencode) }

// FuzzGeminiCLI fuzzes the Gemini CLI chat importer (seeds: testdata/fuzz/FuzzGeminiCLI).
func FuzzGeminiCLI(f *testing.F) { fuzzImport(f, FormatGeminiCLI) }

// FuzzDetect fuzzes auto-detection with every importer behind it (seeds: every hand-made
// transcript).
func FuzzDetect(f *testing.F) {
	for _, tr := range handMade(f) {
		f.Add(tr.name, tr.data)
	}
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		if name == "" {
			name = "fuzz-input"
		}
		checkImport(t, name, data, FormatAuto)
	})
}

// FuzzMutatedLine replaces one line of a real transcript — a hand-made one, or a small corpus
// file when the corpus is present — with fuzz bytes (or, for an empty replacement, deletes
// it): the importer must keep the property on the mutated file.
func FuzzMutatedLine(f *testing.F) {
	files := handMade(f)
	for _, path := range corpusFiles() {
		if st, err := os.Stat(path); err == nil && st.Size() < 300<<10 {
			data, err := os.ReadFile(path)
			if err == nil {
				files = append(files, transcript{name: filepath.Base(path), data: data})
			}
		}
	}
	for i, tr := range files {
		n := bytes.Count(tr.data, []byte("\n"))
		f.Add(uint16(i), uint16(n/2), []byte(`{"type":"message","message":{"role":"user","content":"a\*b"}}`))
		f.Add(uint16(i), uint16(n/3), []byte(`{"truncated": `))
		f.Add(uint16(i), uint16(1), []byte{})
	}
	f.Fuzz(func(t *testing.T, fi, li uint16, repl []byte) {
		tr := files[int(fi)%len(files)]
		lines := bytes.Split(tr.data, []byte("\n"))
		i := int(li) % len(lines)
		mutated := append(append([][]byte{}, lines[:i]...), repl)
		if len(repl) == 0 {
			mutated = mutated[:i]
		}
		mutated = append(mutated, lines[i+1:]...)
		checkImport(t, tr.name, bytes.Join(mutated, []byte("\n")), FormatAuto)
	})
}

// FuzzOpencodeStorage fuzzes the opencode storage reader: a session of one user message and
// one assistant message whose header and two part files are fuzz bytes.
func FuzzOpencodeStorage(f *testing.F) {
	read := func(glob string) [][]byte {
		files, _ := filepath.Glob(filepath.Join(ocStorage, glob))
		var out [][]byte
		for _, p := range files {
			if data, err := os.ReadFile(p); err == nil {
				out = append(out, data)
			}
		}
		return out
	}
	msgs, parts := read("message/*/*.json"), read("part/*/*.json")
	for i := 0; i+1 < len(parts) && i < len(msgs); i += 2 {
		f.Add(msgs[i], parts[i], parts[i+1])
	}
	f.Fuzz(func(t *testing.T, header, part1, part2 []byte) {
		fsys := fstest.MapFS{
			"message/ses_f/msg_0001.json":        {Data: []byte(`{"id":"msg_0001","sessionID":"ses_f","role":"user","time":{"created":1}}`)},
			"part/msg_0001/prt_0001.json":        {Data: []byte(`{"id":"prt_0001","messageID":"msg_0001","type":"text","text":"go"}`)},
			"message/ses_f/msg_0002.json":        {Data: header},
			"part/msg_0002/prt_0002.json":        {Data: part1},
			"part/msg_0002/prt_0003.json":        {Data: part2},
			"part/" + ocIDOf(header) + "/a.json": {Data: part1},
		}
		for _, strict := range []bool{false, true} {
			in := &input{name: "fuzz-storage", strict: strict}
			msgs, err := opencodeStorage(in, fsys, "", "ses_f")
			var s *Session
			if err == nil {
				s, err = opencodeSession(in, msgs)
			}
			if err != nil {
				var pe *ParseError
				if !errors.As(err, &pe) {
					t.Fatalf("error is %T, want *ParseError: %v", err, err)
				}
				continue
			}
			checkRequests(t, s)
		}
	})
}

// ocIDOf returns the id member of a fuzzed message header, made safe as a path element.
func ocIDOf(header []byte) string {
	id := gjson.GetBytes(header, "id").String()
	if id == "" || strings.ContainsAny(id, "/.\\") || !fs.ValidPath(id) {
		return "none"
	}
	return id
}

// transcript is one seed transcript: its file name, format and bytes.
type transcript struct {
	name   string
	format Format
	data   []byte
}

// handMade returns the hand-made transcripts of testdata/transcripts that are single files.
func handMade(tb testing.TB) []transcript {
	var out []transcript
	for _, f := range Formats {
		files, _ := filepath.Glob(filepath.Join("testdata", "transcripts", string(f), "*"))
		for _, p := range files {
			if st, err := os.Stat(p); err != nil || st.IsDir() {
				continue
			}
			data, err := os.ReadFile(p)
			if err != nil {
				tb.Fatal(err)
			}
			out = append(out, transcript{name: filepath.Base(p), format: f, data: data})
		}
	}
	if len(out) == 0 {
		tb.Fatal("no hand-made transcripts")
	}
	return out
}

// corpusFiles returns the corpus files when the corpus is present (nil otherwise).
func corpusFiles() []string {
	d := corpus.Dir()
	if d == "" {
		return nil
	}
	files, _ := filepath.Glob(filepath.Join(d, "raw", "*"))
	return files
}

// TestFuzzSeedsImport keeps the fuzz seeds meaningful: each one must import successfully
// (with auto-detection agreeing with its target's format) and yield requests.
func TestFuzzSeedsImport(t *testing.T) {
	targets := map[string]Format{"FuzzPi": FormatPi, "FuzzClaudeCode": FormatClaudeCode, "FuzzCodex": FormatCodex,
		"FuzzSWEAgent": FormatSWEAgent, "FuzzMiniSWEAgent": FormatMiniSWEAgent, "FuzzOpencode": FormatOpencode,
		"FuzzGeminiCLI": FormatGeminiCLI}
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
			name := map[Format]string{FormatSWEAgent: "seed.traj", FormatMiniSWEAgent: "seed.traj.json",
				FormatOpencode: "seed.json", FormatGeminiCLI: "session-seed.json"}[format]
			if name == "" {
				name = "seed.jsonl"
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

// TestMutatedTranscriptsKeepTheProperty runs checkImport on seeded random byte mutations of
// every hand-made transcript (flips, deletions, insertions of JSON punctuation), so that
// plain `go test` covers what fuzzing found.
func TestMutatedTranscriptsKeepTheProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 3))
	n := 300
	if testing.Short() {
		n = 30
	}
	for _, tr := range handMade(t) {
		for i := 0; i < n; i++ {
			d := append([]byte(nil), tr.data...)
			for range 1 + rng.IntN(4) {
				k := rng.IntN(len(d))
				switch rng.IntN(3) {
				case 0:
					d[k] = byte(rng.IntN(256))
				case 1:
					d = append(d[:k], d[k+1:]...)
				default:
					d = append(d[:k], append([]byte{"{}[]\":,0\n"[rng.IntN(9)]}, d[k:]...)...)
				}
				if len(d) == 0 {
					break
				}
			}
			checkImport(t, tr.name, d, tr.format)
		}
	}
}
