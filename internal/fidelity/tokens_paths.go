package fidelity

import (
	"strings"
)

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
