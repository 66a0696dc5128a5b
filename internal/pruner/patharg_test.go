package pruner

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// pathArgOracle is the definition pathArg must match (its earlier implementation): a raw
// `"path"` key must occur; decode the arguments into a map with encoding/json, then decode its
// "path" member as a string (null decodes to "").
func pathArgOracle(raw []byte) (string, bool) {
	if !bytes.Contains(raw, []byte(`"path"`)) {
		return "", false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return "", false
	}
	v, ok := m["path"]
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

var pathArgSeeds = []string{
	`{"path":"a/b.go"}`, `{"path":"a","path":"b"}`, `{"path":"a","path":1}`, `{"path":42}`,
	`{"x":{"path":"inner"}}`, `{"path":"caf\u00e9 \"q\" \ud83d\ude00"}`, `{"path":"\ud800"}`,
	"{\"path\":\"bad \xff utf8\"}", `{"path":null}`, `null`, `["path"]`, `"path"`, `{"path":"x"} trailing`,
	`{"path" : "spaced" , "n":1}`, `{"pat\u0068":"escaped key"}`, `{"path":"a"`, ` {"content":"the \"path\" word"} `,
}

func TestPathArgMatchesEncodingJSON(t *testing.T) {
	for _, s := range pathArgSeeds {
		got, ok := pathArg([]byte(s))
		want, wok := pathArgOracle([]byte(s))
		if got != want || ok != wok {
			t.Errorf("pathArg(%s) = %q, %v; encoding/json: %q, %v", s, got, ok, want, wok)
		}
	}
}

func FuzzPathArg(f *testing.F) {
	for _, s := range pathArgSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := pathArg(raw)
		want, wok := pathArgOracle(raw)
		if ok != wok || got != want {
			t.Fatalf("pathArg(%q) = %q, %v; encoding/json: %q, %v", raw, got, ok, want, wok)
		}
		if json.Valid(raw) {
			if got, ok := pathArgValid(raw); ok != wok || got != want {
				t.Fatalf("pathArgValid(%q) = %q, %v; encoding/json: %q, %v", raw, got, ok, want, wok)
			}
		}
	})
}

// TestUTF16LenMatchesDecoding compares utf16Len with rune-by-rune decoding (an invalid byte
// counts one unit) on random mixes of ASCII, multi-byte, 4-byte and invalid sequences.
func TestUTF16LenMatchesDecoding(t *testing.T) {
	slow := func(s string) int {
		n := 0
		for _, r := range s {
			if r >= 0x10000 {
				n += 2
			} else {
				n++
			}
		}
		return n
	}
	pieces := []string{"a", "abcdefgh", "é", "日", "😀", "\xff", "\xf0\x9f", "\xc3", "x\x80y"}
	rng := rand.New(rand.NewPCG(3, 4))
	for n := 0; n < 3000; n++ {
		var b strings.Builder
		for k := rng.IntN(40); k > 0; k-- {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		if s := b.String(); utf16Len(s) != slow(s) {
			t.Fatalf("utf16Len(%q) = %d, want %d", s, utf16Len(s), slow(s))
		}
	}
}

// TestGlobLiteralPrefilter checks that the literal prefilter never rejects a path the glob's
// regular expression matches, on random globs and paths built from the same pieces.
func TestGlobLiteralPrefilter(t *testing.T) {
	pieces := []string{"a", "skills", "/", ".md", "**/", "**", "*", "?", "x.y", "+("}
	rng := rand.New(rand.NewPCG(5, 6))
	gen := func(wild bool) string {
		var b strings.Builder
		for k := 1 + rng.IntN(6); k > 0; k-- {
			p := pieces[rng.IntN(len(pieces))]
			if !wild && strings.ContainsAny(p, "*?") {
				p = "z"
			}
			b.WriteString(p)
		}
		return b.String()
	}
	matched := 0
	for n := 0; n < 20000; n++ {
		g := compileGlob(gen(true))
		p := gen(false)
		if got, want := g.match(p), g.re.MatchString(p); got != want {
			t.Fatalf("glob %s on %q: match %v, regexp %v", g.re, p, got, want)
		} else if want {
			matched++
		}
	}
	if matched < 100 {
		t.Fatalf("only %d matches: the test does not exercise matching paths", matched)
	}
}
