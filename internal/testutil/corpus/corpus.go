// Package corpus locates the shared agent-session corpus (../shared/corpus next to the
// repository) for tests and benchmarks. The corpus is never copied into the repository:
// tests that need it skip with a message when it is absent.
package corpus

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/condense-dev/condense/internal/testutil/needs"
)

// EnvDir names an environment variable that overrides the corpus directory (the folder that
// holds MANIFEST.md and raw/).
const EnvDir = "CONDENSE_CORPUS"

// Dir returns the corpus directory, or "" when it cannot be found. It honours EnvDir, then
// looks for shared/corpus beside the repository root (the directory holding go.mod).
func Dir() string {
	if d := os.Getenv(EnvDir); d != "" {
		if st, err := os.Stat(filepath.Join(d, "raw")); err == nil && st.IsDir() {
			return d
		}
		return ""
	}
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "hack")); err == nil { // the repository root, not a tools module
				c := filepath.Join(filepath.Dir(dir), "shared", "corpus")
				if st, err := os.Stat(filepath.Join(c, "raw")); err == nil && st.IsDir() {
					return c
				}
				return ""
			}
		}
		if parent := filepath.Dir(dir); parent == dir {
			return ""
		}
	}
}

// Require returns the corpus directory or skips the test with a message when it is absent.
func Require(tb testing.TB) string {
	tb.Helper()
	d := Dir()
	if d == "" {
		needs.Missing(tb, "agent-session corpus not found (expected ../shared/corpus beside the repository, or $%s)", EnvDir)
	}
	return d
}

// Files returns the sorted paths of every raw corpus file, skipping the test when the corpus
// is absent.
func Files(tb testing.TB) []string {
	tb.Helper()
	d := Require(tb)
	entries, err := os.ReadDir(filepath.Join(d, "raw"))
	if err != nil {
		tb.Fatalf("read corpus: %v", err)
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() {
			out = append(out, filepath.Join(d, "raw", e.Name()))
		}
	}
	sort.Strings(out)
	return out
}

// File returns the path of one raw corpus file by name, skipping the test when the corpus or
// the file is absent.
func File(tb testing.TB, name string) string {
	tb.Helper()
	p := filepath.Join(Require(tb), "raw", name)
	if _, err := os.Stat(p); err != nil {
		needs.Missing(tb, "corpus file %s not found", name)
	}
	return p
}
