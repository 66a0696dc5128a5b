// Package fidelity measures what context pruning hides that an agent later uses: the salient
// tokens of its messages it could only have read in earlier tool output, and whether a rendered
// request still shows them. Pure (no I/O), deterministic; the measure is docs/fidelity.md's.
package fidelity

import (
	"strings"
	"unsafe"

	"github.com/cespare/xxhash/v2"
)

// Token is one salient token: the 64-bit xxhash of its normalized text.
type Token uint64

// TokenOf returns the token of a normalized text (as Forms and Mentions report it).
func TokenOf(s string) Token { return Token(xxhash.Sum64String(s)) }

// Phrase limits: a code line, error message or quoted fragment counts when its normalized
// text (whitespace runs collapsed to one space, trimmed) is this long.
const (
	minPhrase = 12
	maxPhrase = 240
)

// Forms calls fn with every form under which text shows a salient token: its Mentions and the
// forms docs/fidelity.md derives from them (sub-paths, identifier parts, error tails, ...).
// s is only valid during the call; fn may see a form more than once.
func Forms(text string, fn func(s string)) {
	sc := scanner{emit: func(s string, _ bool) { fn(s) }}
	sc.text(text)
}

// Mentions calls fn with the salient tokens text mentions (docs/fidelity.md), as written but
// normalized: paths, identifiers, flags, hashes, versions, locations, code and error lines.
// s is only valid during the call; fn may see a mention more than once.
func Mentions(text string, fn func(s string)) {
	sc := scanner{emit: func(s string, mention bool) {
		if mention {
			fn(s)
		}
	}}
	sc.text(text)
}

// scanner splits text into salient tokens. buf holds normalized phrases and built tokens; a
// string passed to emit may point into it.
type scanner struct {
	buf  []byte
	emit func(s string, mention bool)
}

func (sc *scanner) text(t string) {
	sc.words(t)
	sc.lines(t)
}

// wordChars are the bytes a word is made of: letters, digits and the joiners of paths,
// dotted and hyphenated names, locations, flags and issue numbers.
var wordChars = func() (t [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for _, c := range "_./-:~@#" {
		t[c] = true
	}
	return t
}()

// words emits the word tokens of t, and "line N" after the word line or lines.
func (sc *scanner) words(t string) {
	afterLine := false
	for i := 0; i < len(t); {
		c := t[i]
		if !wordChars[c] {
			if c != ' ' && c != '\t' {
				afterLine = false
			}
			i++
			continue
		}
		j := i + 1
		for j < len(t) && wordChars[t[j]] {
			j++
		}
		w := t[i:j]
		if afterLine {
			if n := leadingDigits(w); n > 0 {
				sc.buf = append(append(sc.buf[:0], "line "...), w[:n]...)
				sc.emit(bufString(sc.buf), true)
			}
		}
		afterLine = w == "line" || w == "lines" || w == "Line" || w == "Lines"
		sc.word(w, true)
		i = j
	}
}

// trimWord strips the punctuation a word picks up from prose: trailing . : - # @ ~ / and
// leading ones, except the leading "./", "../", "~/", "--flag" and "#123".
func trimWord(w string) string {
	for len(w) > 0 && strings.IndexByte(".:-#@~/", w[len(w)-1]) >= 0 {
		w = w[:len(w)-1]
	}
	for len(w) > 1 {
		c, d := w[0], w[1]
		switch {
		case c == '.' && (d == '/' || d == '.'),
			c == '~' && d == '/',
			c == '-' && d == '-' && len(w) > 2 && isLetter(w[2]),
			c == '#' && isDigit(d):
			return w
		case strings.IndexByte(".:-#@~", c) >= 0:
			w = w[1:]
			continue
		}
		return w
	}
	return w
}

// word classifies one word and emits its tokens (mention marks whether the word itself is a
// mention or only a derived form).
func (sc *scanner) word(w string, mention bool) {
	w = trimWord(w)
	if len(w) < 3 {
		return
	}
	if strings.Contains(w, "://") {
		if hasLetter(w) {
			sc.emit(w, mention)
		}
		return
	}
	if k := strings.IndexByte(w, ':'); k >= 0 {
		if strings.Contains(w, "::") {
			// A qualified name (std::io::Error): the whole and its identifier parts.
			if isQualified(w) {
				sc.emit(w, mention)
				for _, p := range strings.Split(w, "::") {
					if isIdentifier(p) {
						sc.emit(p, false)
					}
				}
			}
			return
		}
		if sc.location(w, k, mention) {
			return
		}
		for _, p := range strings.Split(w, ":") {
			sc.word(p, mention)
		}
		return
	}
	switch {
	case strings.IndexByte(w, '/') >= 0:
		sc.path(w, mention)
	case strings.IndexByte(w, '.') >= 0:
		sc.dotted(w, mention)
	default:
		sc.plain(w, mention)
	}
}

func allOf(s string, f func(byte) bool) bool {
	for i := 0; i < len(s); i++ {
		if !f(s[i]) {
			return false
		}
	}
	return true
}

func hasLetter(s string) bool {
	for i := 0; i < len(s); i++ {
		if isLetter(s[i]) {
			return true
		}
	}
	return false
}

func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
func isLower(c byte) bool  { return c >= 'a' && c <= 'z' }
func isUpper(c byte) bool  { return c >= 'A' && c <= 'Z' }
func isLetter(c byte) bool { return isLower(c) || isUpper(c) }

// bufString views b as a string without copying; it is valid until b is next written.
func bufString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
