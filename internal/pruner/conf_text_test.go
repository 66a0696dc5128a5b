package pruner

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// Reference catalogue: src/summary-refs.test.ts.
func TestConformanceSummaryRefs(t *testing.T) {
	refs := []string{"t1", "t2"}
	tools := []string{"read", "bash"}
	cases := []struct {
		name, in, want string
		refs, tools    []string
	}{
		{"in-range and matching name becomes inline ref", "- [[1:read]] Read a.ts", "- `t1` Read a.ts", nil, nil},
		{"no extra t prefix", "- [[2:bash]] ran", "- `t2` ran", nil, nil},
		{"name match trimmed and case-insensitive", "- [[1: READ ]] x", "- `t1` x", nil, nil},
		{"name mismatch strips the label", "- [[2:read]] x", "- x", nil, nil},
		{"out of range strips", "- [[3:read]] x", "- x", nil, nil},
		{"absent label unchanged", "- plain bullet", "- plain bullet", nil, nil},
		{"duplicate labels on two lines both substituted", "- [[1:read]] a\n- [[1:read]] b", "- `t1` a\n- `t1` b", nil, nil},
		{"single-bracket lookalikes untouched", "- used argv[1] and items[0]", "- used argv[1] and items[0]", nil, nil},
		{"mid-line label stripped", "used argv[1] and [[1:read]] mid", "used argv[1] and mid", nil, nil},
		{"label inside fenced block untouched", "```\n[[1:read]] code\n```", "```\n[[1:read]] code\n```", nil, nil},
		{"bold-wrapped label stripped", "- **[[1:read]]** x", "- **** x", nil, nil},
		{"numbered-list label stripped not substituted", "1. [[1:read]] did x", "1. did x", nil, nil},
		{"blockquote label stripped", "> [[1:read]] did x", "> did x", nil, nil},
		{"fenced non-first line exempt", "```go\nx := 1\n[[2:bash]] y\n```", "```go\nx := 1\n[[2:bash]] y\n```", nil, nil},
		{"N=0 strips", "- [[0:read]] x", "- x", nil, nil},
		{"empty input empty", "", "", nil, nil},
		{"multiple spaces after label collapse to one", "- [[1:read]]    x", "- `t1` x", nil, nil},
		{"label at end of line leaves one trailing space", "- [[1:read]]", "- `t1` ", nil, nil},
		{"dotted tool names validate", "- [[1:mcp.fs.read]] x", "- `t1` x", []string{"t1"}, []string{"mcp.fs.read"}},
		{"dotted name mismatch strips without leaking", "- [[1:mcp.fs.write]] x", "- x", []string{"t1"}, []string{"mcp.fs.read"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, tl := refs, tools
			if c.refs != nil {
				r, tl = c.refs, c.tools
			}
			if got := DecorateRefs(c.in, r, tl); got != c.want {
				t.Fatalf("DecorateRefs(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
	t.Run("inline refs and footer reference the same refs per position", func(t *testing.T) {
		got := DecorateRefs("- [[1:read]] a\n- [[2:bash]] b", refs, tools) + SummaryFooter(refs)
		want := "- `t1` a\n- `t2` b\n\n---\n**Summarized tool refs**: `t1`, `t2`\nUse `context_tree_query` with these refs to retrieve the original full outputs."
		if got != want {
			t.Fatalf("got %q", got)
		}
	})
	t.Run("inline ref survives fusion-input concatenation", func(t *testing.T) {
		p := RangeFusionPrompt([]string{DecorateRefs("- [[1:read]] a", refs, tools), "- `t9` z"})
		if !strings.Contains(p, "- `t1` a\n\n- `t9` z") {
			t.Fatalf("fusion prompt lost refs: %q", p)
		}
	})
}

// Reference catalogue: src/batch-capture.test.ts 1-2 (serialization).
func TestConformanceBatchSerialization(t *testing.T) {
	calls := []BatchCall{
		{Label: 1, Tool: "read", Args: []byte(`{"path":"a"}`), Result: "A"},
		{Label: 2, Tool: "bash", Args: []byte(`{"cmd":"ls"}`), Result: "B", IsError: true},
	}
	s := serializeBatch("thinking aloud", calls)
	t.Run("serializer prefixes each call with its label in batch order", func(t *testing.T) {
		i1 := strings.Index(s, "[[1:read]] Tool: read(")
		i2 := strings.Index(s, "[[2:bash]] Tool: bash(")
		if i1 < 0 || i2 < 0 || i1 > i2 {
			t.Fatalf("labels missing or out of order:\n%s", s)
		}
		if !strings.HasPrefix(s, "Assistant said: thinking aloud\n") {
			t.Fatalf("assistant text prefix missing: %q", s)
		}
		if !strings.Contains(s, "Result (ERROR): B") || !strings.Contains(s, "Result (OK): A") {
			t.Fatalf("status lines missing:\n%s", s)
		}
	})
	t.Run("results over 2000 units are cut with a count", func(t *testing.T) {
		long := strings.Repeat("é", 2500)
		s := serializeBatch("", []BatchCall{{Label: 1, Tool: "read", Result: long}})
		if !strings.Contains(s, " ...[500 chars truncated]") || !utf8.ValidString(s) {
			t.Fatalf("bad truncation: %q", s[len(s)-60:])
		}
	})
}

// Reference catalogue: src/protected.test.ts.
func TestConformanceProtected(t *testing.T) {
	cases := []struct {
		name    string
		tools   []string
		globs   []string
		tool    string
		path    string
		hasPath bool
		want    bool
	}{
		{"double star crosses segments", nil, []string{"a/**/z.md"}, "read", "a/b/c/z.md", true, true},
		{"double star slash matches zero directories", nil, []string{"**/SKILL.md"}, "read", "SKILL.md", true, true},
		{"star is segment-local", nil, []string{"a/*.md"}, "read", "a/b/c.md", true, false},
		{"question mark is segment-local", nil, []string{"a?b"}, "read", "a/b", true, false},
		{"question mark matches one char", nil, []string{"a?b"}, "read", "axb", true, true},
		{"regex metacharacters are literal", nil, []string{"a+(b).md"}, "read", "a+(b).md", true, true},
		{"regex metacharacters do not act", nil, []string{"a+.md"}, "read", "aa.md", true, false},
		{"full-path anchored", nil, []string{"*.md"}, "read", "dir/x.md", true, false},
		{"case-sensitive", nil, []string{"**/skills/**/*.md"}, "read", "x/Skills/y/z.md", true, false},
		{"default glob matches skill files", nil, DefaultPolicy().ProtectedPaths, "read", "/home/u/.pi/skills/go/SKILL.md", true, true},
		{"match by tool name regardless of args", []string{"todowrite"}, nil, "todowrite", "", false, true},
		{"match by path glob", nil, []string{"**/*.md"}, "read", "docs/a.md", true, true},
		{"backslashes normalized", nil, []string{"**/skills/**/*.md"}, "read", `C:\u\skills\x\a.md`, true, true},
		{"missing path not protected", nil, []string{"**"}, "read", "", false, false},
		{"empty config protects nothing", nil, nil, "read", "a.md", true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := Policy{ProtectedTools: c.tools, ProtectedPaths: c.globs}
			if got := p.IsProtected(c.tool, c.path, c.hasPath); got != c.want {
				t.Fatalf("IsProtected(%q,%q) = %v", c.tool, c.path, got)
			}
		})
	}
	t.Run("non-string path not protected", func(t *testing.T) {
		if _, ok := pathArg([]byte(`{"path":42}`)); ok {
			t.Fatal("numeric path treated as string")
		}
	})
}

// Reference catalogue: src/nested-placeholders.test.ts.
func TestConformanceNestedPlaceholders(t *testing.T) {
	lookup := func(id string) (string, bool) {
		m := map[string]string{"b1": "ONE", "b2": "TWO {b3}", "b4": ""}
		v, ok := m[id]
		return v, ok
	}
	cases := []struct{ name, in, self, want string }{
		{"empty text", "", "b9", ""},
		{"no placeholders unchanged", "plain", "b9", "plain"},
		{"single substituted", "x {b1} y", "b9", "x ONE y"},
		{"multiple substituted", "{b1} and {b2}", "b9", "ONE and TWO {b3}"},
		{"unknown id left literal", "{b7}", "b9", "{b7}"},
		{"only the unknown one left literal", "{b1} {b7}", "b9", "ONE {b7}"},
		{"self reference refused", "{b9}", "b9", "{b9}"},
		{"self refused others substituted", "{b9} {b1}", "b9", "{b9} ONE"},
		{"one level only", "{b2}", "b9", "TWO {b3}"},
		{"adjacent placeholders", "{b1}{b1}", "b9", "ONEONE"},
		{"embedded in prose", "see{b1}.", "b9", "seeONE."},
		{"lookup returning empty leaves literal", "{b4}", "b9", "{b4}"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := substituteBlocks(c.in, c.self, lookup); got != c.want {
				t.Fatalf("got %q want %q", got, c.want)
			}
		})
	}
}

// Reference catalogue: src/spill.test.ts 3-5 (head preview).
func TestConformanceHeadPreview(t *testing.T) {
	t.Run("whole string under the cap", func(t *testing.T) {
		if got := HeadPreview("abc", 10); got != "abc" {
			t.Fatal(got)
		}
	})
	t.Run("cuts at the last newline within budget", func(t *testing.T) {
		if got := HeadPreview("aaaa\nbbbb\ncccc", 7); got != "aaaa" {
			t.Fatalf("%q", got)
		}
	})
	t.Run("never exceeds the byte cap and stays valid UTF-8", func(t *testing.T) {
		s := strings.Repeat("日本語", 100)
		for n := 0; n < 40; n++ {
			got := HeadPreview(s, n)
			if len(got) > n || !utf8.ValidString(got) {
				t.Fatalf("n=%d: %q", n, got)
			}
		}
	})
}

// Reference catalogue: src/summarizer.test.ts (usable outputs).
func TestConformanceSummarizerUsable(t *testing.T) {
	for _, c := range []struct {
		name string
		out  string
		ok   bool
		want bool
	}{
		{"non-empty text usable", "- x", true, true},
		{"empty text unusable", "", true, false},
		{"whitespace-only unusable", " \n\t\u00a0", true, false},
		{"missing output unusable", "", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := usable(c.out, c.ok); got != c.want {
				t.Fatalf("usable = %v", got)
			}
		})
	}
}

// Reference catalogue: src/chain-compressor.test.ts 33-37, 44 (deterministic body).
func TestConformanceDeterministicBody(t *testing.T) {
	recs := []*Record{
		{ID: "c1", Tool: "bash", ArgsExcerpt: `{"cmd":"ls"}`},
		{ID: "c2", Tool: "bash", ArgsExcerpt: `{"cmd":"pwd"}`},
		{ID: "c3", Tool: "read", ArgsExcerpt: `{"path":"f"}`},
	}
	t.Run("full grammar pin", func(t *testing.T) {
		got := deterministicBody(recs, []string{"t1", "t2", "t3"}, 2)
		want := "Deterministic chain compression (no per-batch summary existed for this span; raw outputs recoverable via context_tree_query).\n" +
			"Calls: 3\nTools: bash x2, read x1\nSpan: 2 tool-using assistant turn(s)\n" +
			"First: bash {\"cmd\":\"ls\"}\nLast: read {\"path\":\"f\"}\nRefs: t1, t2, t3"
		if got != want {
			t.Fatalf("got\n%s\nwant\n%s", got, want)
		}
	})
	t.Run("no refs lists bare ids", func(t *testing.T) {
		if got := deterministicBody(recs, nil, 1); !strings.HasSuffix(got, "Refs: c1, c2, c3") {
			t.Fatal(got)
		}
	})
	t.Run("300-char args excerpt capped to 200 plus dots", func(t *testing.T) {
		ex := argsExcerpt([]byte(`{"a":"` + strings.Repeat("z", 300) + `"}`))
		if utf16Len(ex) != 203 || !strings.HasSuffix(ex, "...") {
			t.Fatalf("len %d", utf16Len(ex))
		}
	})
	t.Run("empty-args chain still yields every line", func(t *testing.T) {
		got := deterministicBody([]*Record{{ID: "x", Tool: "t", ArgsExcerpt: argsExcerpt(nil)}}, nil, 1)
		for _, l := range []string{"Calls: 1", "Tools: t x1", "Span: 1", "First: t {}", "Last: t {}"} {
			if !strings.Contains(got, l) {
				t.Fatalf("missing %q in %s", l, got)
			}
		}
	})
	t.Run("tools sorted by count then name", func(t *testing.T) {
		got := deterministicBody([]*Record{{Tool: "b"}, {Tool: "a"}, {Tool: "c"}, {Tool: "c"}}, []string{"t1"}, 1)
		if !strings.Contains(got, "Tools: c x2, a x1, b x1") {
			t.Fatal(got)
		}
	})
}

func TestContentHashNormalization(t *testing.T) {
	a := ContentHash("bash", "line  \r\nnext\t\n\n")
	b := ContentHash("bash", "line\nnext")
	if a != b {
		t.Fatal("normalization differs")
	}
	if ContentHash("bash", "x") == ContentHash("read", "x") {
		t.Fatal("tool name not hashed")
	}
	if ContentHash("bash", "a b") == ContentHash("bash", "a  b") {
		t.Fatal("internal whitespace must be preserved")
	}
}
