package fidelity

import (
	"os"
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/testutil/corpus"
)

func TestIsErrorLine(t *testing.T) {
	for line, want := range map[string]bool{
		"error: exit status 1":           true,
		"--- FAIL: TestX (0.00s)":        true,
		"Permission DENIED":              true,
		"file not found":                 true,
		"ls: x: No such file":            true,
		"Segmentation fault (core)":      true,
		"exited with exit code 2":        true,
		"process exit code 0":            false,
		"errorless output":               false,
		"my_error_handler":               false,
		"Traceback (most recent call)":   true,
		"everything fine, 3 tests pass":  false,
		"":                               false,
		"TypeError: undefined is not ok": true,
	} {
		if got := IsErrorLine(line); got != want {
			t.Errorf("IsErrorLine(%q) = %v", line, got)
		}
	}
}

// isErrorLineRef is the definition IsErrorLine implements, written plainly: each word compared
// case-insensitively with every error word and phrase word.
func isErrorLineRef(line string) bool {
	errorWords := []string{"error", "errors", "exception", "fatal", "panic", "fail", "failed", "failure", "fails",
		"traceback", "denied", "cannot", "undefined"}
	var prev, prev2 string
	for w, rest := nextWord(line); w != ""; w, rest = nextWord(rest) {
		for _, e := range errorWords {
			if strings.EqualFold(w, e) {
				return true
			}
		}
		switch {
		case strings.EqualFold(prev, "not") && strings.EqualFold(w, "found"),
			strings.EqualFold(prev, "no") && strings.EqualFold(w, "such"),
			strings.EqualFold(prev, "segmentation") && strings.EqualFold(w, "fault"),
			strings.EqualFold(prev2, "exit") && (strings.EqualFold(prev, "code") || strings.EqualFold(prev, "status")) && w[0] >= '1' && w[0] <= '9':
			return true
		}
		prev2, prev = prev, w
	}
	return false
}

// TestIsErrorLineMatchesDefinition checks IsErrorLine against isErrorLineRef on every line of
// the corpus sessions (tool output of real agents).
func TestIsErrorLineMatchesDefinition(t *testing.T) {
	lines, errs := 0, 0
	for _, f := range corpus.Files(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// The raw files are JSON lines; tool output sits in JSON strings, so split on both
		// real and escaped newlines.
		for _, l := range strings.Split(strings.ReplaceAll(string(data), `\n`, "\n"), "\n") {
			lines++
			want := isErrorLineRef(l)
			if want {
				errs++
			}
			if got := IsErrorLine(l); got != want {
				t.Fatalf("IsErrorLine(%q) = %v, want %v", l, got, want)
			}
		}
	}
	if errs == 0 || errs == lines {
		t.Fatalf("%d of %d lines are error lines: the check tells nothing", errs, lines)
	}
	t.Logf("%d lines, %d error lines", lines, errs)
}

// FuzzIsErrorLine checks IsErrorLine against isErrorLineRef on arbitrary lines.
func FuzzIsErrorLine(f *testing.F) {
	for _, s := range []string{"error: exit status 1", "Segmentation FAULT", "no such", "EXIT Code 7", "ſuch", "not\tfound", "segmentationx fault", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		if got, want := IsErrorLine(line), isErrorLineRef(line); got != want {
			t.Fatalf("IsErrorLine(%q) = %v, want %v", line, got, want)
		}
	})
}

// BenchmarkIsErrorLine scans the first 20,000 lines of tool output in the corpus.
func BenchmarkIsErrorLine(b *testing.B) {
	var lines []string
	for _, f := range corpus.Files(b) {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		lines = append(lines, strings.Split(strings.ReplaceAll(string(data), `\n`, "\n"), "\n")...)
		if len(lines) >= 20000 {
			break
		}
	}
	lines = lines[:min(len(lines), 20000)]
	size := 0
	for _, l := range lines {
		size += len(l)
	}
	b.SetBytes(int64(size))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, l := range lines {
			IsErrorLine(l)
		}
	}
}
