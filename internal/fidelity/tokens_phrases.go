package fidelity

import (
	"strings"
)

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
