package fidelity

import (
	"slices"
	"sort"
	"strings"
	"testing"
)

func mentions(text string) []string {
	var out []string
	Mentions(text, func(s string) { out = append(out, strings.Clone(s)) })
	return distinct(out)
}

func formsOf(text string) []string {
	var out []string
	Forms(text, func(s string) { out = append(out, strings.Clone(s)) })
	return distinct(out)
}

func distinct(ss []string) []string {
	sort.Strings(ss)
	return slices.Compact(ss)
}

// TestMentions pins the definition of a salient token (docs/fidelity.md) on one example per
// rule, and on the prose, numbers and punctuation that must not count.
func TestMentions(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
	}{
		// Paths: two or more slashes, ../ or ~/, or an extension; a leading ./ dropped.
		{"read internal/store/redis.go now", []string{"internal/store/redis.go"}},
		{"see ./cmd/main.go and ../x/y", []string{"../x/y", "cmd/main.go"}},
		{"/usr/bin/chromium ~/.cache", []string{"/usr/bin/chromium", "~/.cache"}},
		{"and/or n/a src/main /div", nil},
		{"https://example.com/a?b", []string{"https://example.com/a"}},
		// Locations: file:line (the column dropped), and "line N".
		{"redis.go:42:7: undefined: Open", []string{"redis.go:42", "redis.go", "undefined: Open"}},
		{"at line 17 of it", []string{"line 17"}},
		{"lines 3-9", []string{"line 3"}},
		// Code identifiers: underscore, camelCase, an upper-case run, a digit after a letter.
		{"call handleFlush or user_id, HTTPServer, sha256 and TestX", []string{"HTTPServer", "TestX", "handleFlush", "sha256", "user_id"}},
		{"Return the value of function", nil},
		// Dotted names, qualified names, flags, issue numbers, hashes, versions, hyphen names.
		{"os.path.join std::io::Result", []string{"os.path.join", "std::io::Result"}},
		{"pass --no-cache or -v, see #1234 and #7", []string{"#1234", "--no-cache"}},
		{"commit fbc0b7c, id 4d5611e5-241a-462a-8d15-5122611a9569", []string{"4d5611e5-241a-462a-8d15-5122611a9569", "fbc0b7c"}},
		{"v1.2.3 127.0.0.1 3.14 e.g. etc.", []string{"127.0.0.1", "v1.2.3"}},
		{"model claude-haiku-4-5, create-tech-spec, well-known", []string{"claude-haiku-4-5", "create-tech-spec"}},
		// Phrases: code lines, error lines, quoted fragments with a space.
		{"func Open() error {", []string{"func Open() error {"}},
		{"    42→	if err != nil {", []string{"if err != nil {"}},
		{"error: dial tcp: connection refused", []string{"error: dial tcp: connection refused"}},
		{"it says `no such file or directory` here", []string{"it says `no such file or directory` here", "no such file or directory"}},
		{`run "go test ./..." now`, []string{"go test ./..."}},
		{"a short `x y` quote", nil},
	} {
		if got := mentions(tc.text); !slices.Equal(got, distinct(append([]string(nil), tc.want...))) {
			t.Errorf("Mentions(%q) = %q, want %q", tc.text, got, distinct(tc.want))
		}
	}
}

// TestFormsDerive: a text shows, besides its mentions, the shorter forms an agent may write
// of them, so a use written differently from the output is still recognised.
func TestFormsDerive(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string // forms that must be present
		not  []string // forms that must not
	}{
		{"/Users/me/repo/src/agents/codex.plugin.ts",
			[]string{"/Users/me/repo/src/agents/codex.plugin.ts", "src/agents/codex.plugin.ts", "agents/codex.plugin.ts", "codex.plugin.ts"},
			[]string{"codex", "plugin"}},
		{"internal/store/redis.go:42:func Open()",
			[]string{"internal/store/redis.go:42", "store/redis.go:42", "redis.go:42", "redis.go", "internal/store/redis.go"}, nil},
		{"self.assertEqual(a, b)", []string{"self.assertEqual", "assertEqual", "self.assertEqual(a, b)"}, []string{"self"}},
		{"  - first: func Open() {}", []string{"func Open() {}", "- first: func Open() {}"}, nil},
		{"error: open x.txt: no such file or directory",
			[]string{"error: open x.txt: no such file or directory", "open x.txt: no such file or directory", "no such file or directory", "x.txt"}, nil},
		{"error: dial tcp: connection refused", []string{"dial tcp: connection refused", "connection refused"}, nil},
	} {
		got := formsOf(tc.text)
		for _, w := range tc.want {
			if !slices.Contains(got, w) {
				t.Errorf("Forms(%q) lacks %q: %q", tc.text, w, got)
			}
		}
		for _, w := range tc.not {
			if slices.Contains(got, w) {
				t.Errorf("Forms(%q) has %q", tc.text, w)
			}
		}
	}
}

// FuzzMentionsAreForms: every mention of a text is one of its forms, and neither panics.
func FuzzMentionsAreForms(f *testing.F) {
	for _, s := range []string{"a/b/c.go:12:3: undefined: x_y", "line 7", "`a b c d e f g h`", "--x-y #12 v1.2.3", "→\t", ":::://..", "ü/ä.go"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		fs := formsOf(text)
		for _, m := range mentions(text) {
			if !slices.Contains(fs, m) {
				t.Fatalf("mention %q of %q is not a form (%q)", m, text, fs)
			}
			if strings.TrimSpace(m) != m || m == "" {
				t.Fatalf("mention %q of %q is not normalized", m, text)
			}
		}
	})
}
