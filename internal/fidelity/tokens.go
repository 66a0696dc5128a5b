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

// location emits "file:N" (head is a path or file name, N digits, an optional ":col" dropped)
// with its head's forms and the location under every shorter path of the head, then the
// word's remainder (grep -n output: "a.go:12:func"). It reports whether w was a location.
func (sc *scanner) location(w string, k int, mention bool) bool {
	head, rest := w[:k], w[k+1:]
	n := leadingDigits(rest)
	if n == 0 || (n < len(rest) && rest[n] != ':') || !isFileLike(head) {
		return false
	}
	line := rest[:n]
	sc.emit(w[:k+1+n], mention)
	p := strings.TrimPrefix(head, "./")
	for i := 0; i < len(p); i++ {
		if p[i] == '/' && i+1 < len(p) && isFileLike(p[i+1:]) {
			sc.buf = append(append(append(sc.buf[:0], p[i+1:]...), ':'), line...)
			sc.emit(bufString(sc.buf), false)
		}
	}
	sc.word(head, mention)
	if n < len(rest) {
		rest = rest[n+1:]
		if m := leadingDigits(rest); m > 0 && (m == len(rest) || rest[m] == ':') {
			rest = strings.TrimPrefix(rest[m:], ":") // the column
		}
		if rest != "" {
			sc.word(rest, mention)
		}
	}
	return true
}

// isFileLike reports whether a location's head is a path or a file name with an extension.
func isFileLike(s string) bool {
	s = strings.TrimPrefix(s, "./")
	if strings.IndexByte(s, '/') >= 0 {
		return acceptPath(s)
	}
	return hasExtension(s)
}

// acceptPath reports whether p (holding a '/') is salient as a path: it has a letter and
// starts with ../ or ~/, has two or more slashes, or ends in a file name with an extension
// ("and/or", "n/a", "src/main" and the "/div" of "</div>" are not; "/usr/bin" is).
func acceptPath(p string) bool {
	if !hasLetter(p) {
		return false
	}
	if strings.HasPrefix(p, "../") || strings.HasPrefix(p, "~/") || strings.Count(p, "/") >= 2 {
		return true
	}
	return hasExtension(p[strings.LastIndexByte(p, '/')+1:])
}

// hasExtension reports whether a file name ends in "." + a letter and up to five more
// letters or digits, after a base with a letter or digit.
func hasExtension(name string) bool {
	d := strings.LastIndexByte(name, '.')
	if d <= 0 || d == len(name)-1 || len(name)-d-1 > 6 || !isLetter(name[d+1]) {
		return false
	}
	for i := d + 1; i < len(name); i++ {
		if !isLetter(name[i]) && !isDigit(name[i]) {
			return false
		}
	}
	return isAlnum(name[d-1])
}

// path emits a salient path (without a leading "./") and, as derived forms, each trailing
// sub-path that is itself salient and the forms of the base name. A path that is not salient
// contributes the tokens of its parts.
func (sc *scanner) path(w string, mention bool) {
	p := strings.TrimPrefix(w, "./")
	if !acceptPath(p) {
		for _, part := range strings.Split(p, "/") {
			if part != "" && strings.IndexByte(part, '/') < 0 {
				sc.word(part, mention)
			}
		}
		return
	}
	sc.emit(p, mention)
	for i := 0; i < len(p); i++ {
		if p[i] != '/' || i+1 >= len(p) {
			continue
		}
		sub := p[i+1:]
		if strings.IndexByte(sub, '/') >= 0 {
			if acceptPath(sub) {
				sc.emit(sub, false)
			}
			continue
		}
		sc.word(sub, false)
	}
}

// dotted emits a dotted word: a version or address ("1.2.3", "v0.4.1-rc1", "127.0.0.1", three
// or more numeric parts), or a dotted name or file name of five or more bytes ("redis.go",
// "os.path.join") with its identifier parts as derived forms.
func (sc *scanner) dotted(w string, mention bool) {
	v := w
	if v[0] == 'v' && len(v) > 1 && isDigit(v[1]) {
		v = v[1:]
	}
	if isDigit(v[0]) {
		if numericParts(v) >= 3 {
			sc.emit(w, mention)
		}
		return
	}
	if len(w) < 5 || !hasLetter(w) {
		return
	}
	sc.emit(w, mention)
	for _, part := range strings.Split(w, ".") {
		if strings.IndexByte(part, '-') >= 0 {
			sc.plain(part, false)
		} else if isIdentifier(part) {
			sc.emit(part, false)
		}
	}
}

// numericParts counts the leading dot-separated all-digit parts of v.
func numericParts(v string) int {
	n := 0
	for {
		d := leadingDigits(v)
		if d == 0 {
			return n
		}
		n++
		if d == len(v) || v[d] != '.' {
			return n
		}
		v = v[d+1:]
	}
}

// plain emits a word of letters, digits, '_' and '-' that is a flag, an issue number, a hash
// or UUID, a hyphenated name or an identifier (the rules of docs/fidelity.md); other
// hyphenated words contribute their parts.
func (sc *scanner) plain(w string, mention bool) {
	if strings.HasPrefix(w, "--") {
		if name := w[2:]; len(name) >= 2 && isLetter(name[0]) && allOf(name, func(c byte) bool { return isAlnum(c) || c == '-' }) {
			sc.emit(w, mention)
		}
		return
	}
	if w[0] == '#' {
		if len(w) >= 3 && leadingDigits(w[1:]) == len(w)-1 {
			sc.emit(w, mention)
		}
		return
	}
	w = strings.TrimLeft(w, "-#@~.")
	if w == "" || !allOf(w, func(c byte) bool { return isAlnum(c) || c == '-' }) {
		return
	}
	if strings.IndexByte(w, '-') >= 0 {
		if isHexID(w) || isHyphenName(w) {
			sc.emit(w, mention)
			for _, part := range strings.Split(w, "-") {
				if isIdentifier(part) {
					sc.emit(part, false)
				}
			}
			return
		}
		for _, part := range strings.Split(w, "-") {
			if part != "" {
				sc.plain(part, mention)
			}
		}
		return
	}
	if isHexID(w) || isIdentifier(w) {
		sc.emit(w, mention)
	}
}

// isHexID reports a hash or UUID: hex digits and hyphens, at least seven hex digits, at least
// one decimal digit and one letter a-f.
func isHexID(w string) bool {
	hex, digit, letter := 0, false, false
	for i := 0; i < len(w); i++ {
		c := w[i]
		switch {
		case isDigit(c):
			hex++
			digit = true
		case c >= 'a' && c <= 'f', c >= 'A' && c <= 'F':
			hex++
			letter = true
		case c != '-':
			return false
		}
	}
	return hex >= 7 && digit && letter
}

// isHyphenName reports a salient hyphenated name: eight or more bytes with a letter, no empty
// part, and two or more hyphens or a digit.
func isHyphenName(w string) bool {
	if len(w) < 8 || !hasLetter(w) || strings.Contains(w, "--") || w[len(w)-1] == '-' {
		return false
	}
	return strings.Count(w, "-") >= 2 || strings.IndexAny(w, "0123456789") >= 0
}

// isIdentifier reports a code identifier: 4+ bytes of [A-Za-z0-9_] from a letter or '_', with
// a letter and an underscore, a lower-to-upper change, an upper-case run before a lower-case
// letter or (5+ bytes) a digit after a letter: user_id, TestX, HTTPServer, sha256; not Error.
func isIdentifier(w string) bool {
	if len(w) < 4 || !(isLetter(w[0]) || w[0] == '_') {
		return false
	}
	letter, under, camel, digitAfter := false, false, false, false
	for i := 0; i < len(w); i++ {
		c := w[i]
		switch {
		case isLetter(c):
			letter = true
			if i > 0 && isUpper(c) && isLower(w[i-1]) {
				camel = true
			}
			if i > 1 && isLower(c) && isUpper(w[i-1]) && isUpper(w[i-2]) {
				camel = true
			}
		case isDigit(c):
			if i > 0 && isLetter(w[i-1]) {
				digitAfter = true
			}
		case c == '_':
			under = true
		default:
			return false
		}
	}
	return letter && (under || camel || (digitAfter && len(w) >= 5))
}

// isQualified reports a "::"-qualified name with identifier-like parts (std::io::Error).
func isQualified(w string) bool {
	parts := strings.Split(w, "::")
	if len(parts) < 2 || len(w) < 5 {
		return false
	}
	for _, p := range parts {
		if p == "" || !allOf(p, isAlnum) || !hasLetter(p) {
			return false
		}
	}
	return true
}

// lines emits the phrase tokens of t: per line, after stripping a line-number prefix, the
// normalized line when it is code or an error message, the same for its text after a short
// "label: " prefix, and the quoted fragments of the line.
func (sc *scanner) lines(t string) {
	for len(t) > 0 {
		line := t
		if i := strings.IndexByte(t, '\n'); i >= 0 {
			line, t = t[:i], t[i+1:]
		} else {
			t = ""
		}
		l := stripLinePrefix(line)
		if len(l) >= minPhrase && len(l) <= 4*maxPhrase {
			norm := sc.normalize(l)
			if len(norm) <= maxPhrase {
				sc.phrase(norm, true)
				if k := strings.Index(norm, ": "); k > 0 && k <= 24 {
					sc.phrase(norm[k+2:], false)
				}
			}
		}
		sc.quoted(l, '`')
		sc.quoted(l, '"')
	}
}

// phrase emits s when it is a code line (it holds one of ( ) { } [ ] ; = < >) or an error
// line (IsErrorLine), and for an error line also each tail after a ": ".
func (sc *scanner) phrase(s string, mention bool) {
	if len(s) < minPhrase {
		return
	}
	isErr := IsErrorLine(s)
	if !isErr && strings.IndexAny(s, "(){}[];=<>") < 0 {
		return
	}
	sc.emit(s, mention)
	if !isErr {
		return
	}
	for rest := s; ; {
		k := strings.Index(rest, ": ")
		if k < 0 {
			return
		}
		rest = rest[k+2:]
		if len(rest) >= minPhrase {
			sc.emit(rest, false)
		}
	}
}

// quoted emits the fragments of line between pairs of the quote byte q that hold a space and
// normalize to minPhrase..maxPhrase bytes.
func (sc *scanner) quoted(line string, q byte) {
	for {
		i := strings.IndexByte(line, q)
		if i < 0 {
			return
		}
		j := strings.IndexByte(line[i+1:], q)
		if j < 0 {
			return
		}
		frag := line[i+1 : i+1+j]
		line = line[i+2+j:]
		if len(frag) < minPhrase || len(frag) > 4*maxPhrase || strings.IndexByte(frag, ' ') < 0 {
			continue
		}
		if norm := sc.normalize(frag); len(norm) >= minPhrase && len(norm) <= maxPhrase && strings.IndexByte(norm, ' ') > 0 {
			sc.emit(norm, true)
		}
	}
}

// normalize trims s and collapses its runs of spaces and tabs to one space (into sc.buf when
// that changes anything), and strips a trailing '.', ',' or ';' after a letter.
func (sc *scanner) normalize(s string) string {
	s = strings.Trim(s, " \t\r")
	clean := true
	for i := 0; i < len(s); i++ {
		if s[i] == '\t' || s[i] == '\r' || (s[i] == ' ' && i > 0 && s[i-1] == ' ') {
			clean = false
			break
		}
	}
	if !clean {
		sc.buf = sc.buf[:0]
		space := false
		for i := 0; i < len(s); i++ {
			c := s[i]
			if c == ' ' || c == '\t' || c == '\r' {
				space = true
				continue
			}
			if space {
				sc.buf = append(sc.buf, ' ')
				space = false
			}
			sc.buf = append(sc.buf, c)
		}
		s = bufString(sc.buf)
	}
	if n := len(s); n > 1 && strings.IndexByte(".,;", s[n-1]) >= 0 && isLetter(s[n-2]) {
		s = s[:n-1]
	}
	return s
}

// stripLinePrefix removes the line-number prefix of numbered output: "   42→" (Claude Code's
// read), "42\t" (cat -n), "42: " or "42| ", and "path:42:" or "path:42:7:" (grep -n, compilers).
func stripLinePrefix(line string) string {
	s := strings.TrimLeft(line, " \t")
	if n := leadingDigits(s); n > 0 && n < len(s) {
		rest := s[n:]
		switch {
		case strings.HasPrefix(rest, "→"):
			return rest[len("→"):]
		case rest[0] == '\t':
			return rest[1:]
		case strings.HasPrefix(rest, ": "), strings.HasPrefix(rest, "| "):
			return rest[2:]
		}
		return line
	}
	// grep -n: a file-like head without spaces, ':', digits, ':'.
	k := strings.IndexAny(s, ": ")
	if k <= 0 || s[k] == ' ' || !isFileLike(s[:k]) {
		return line
	}
	rest := s[k+1:]
	if n := leadingDigits(rest); n > 0 && n < len(rest) && rest[n] == ':' {
		rest = rest[n+1:]
		if m := leadingDigits(rest); m > 0 && m < len(rest) && rest[m] == ':' { // the column
			rest = rest[m+1:]
		}
		return rest
	}
	return line
}

func leadingDigits(s string) int {
	n := 0
	for n < len(s) && isDigit(s[n]) {
		n++
	}
	return n
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
