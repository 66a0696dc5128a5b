package fidelity

import (
	"strings"
)

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
