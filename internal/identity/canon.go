package identity

import (
	"bytes"
	"sort"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/condense-dev/condense/internal/jsonesc"
)

// maxCanonDepth bounds recursion; deeper input is returned unchanged like invalid JSON.
const maxCanonDepth = 512

// canonicalizer writes canonical JSON. skipTop names a member of the top-level object to
// leave out (used to ignore cache_control when hashing blocks).
type canonicalizer struct {
	src     []byte
	out     []byte
	skipTop string
	keys    []canonMember // scratch stack shared by nested objects
}

type canonMember struct {
	key    []byte // decoded key
	cs, ce int    // canonical value in out, relative to the object's start
}

// canonicalAppend appends raw to dst with keys sorted (by decoded bytes), no insignificant
// whitespace, strings re-encoded by appendString, numbers as written and a duplicate key's
// last value; ok is false when raw is not exactly one JSON value.
func canonicalAppend(dst, raw []byte, skipTop string) (out []byte, ok bool) {
	c := canonicalizer{src: raw, out: dst, skipTop: skipTop}
	i := skipWS(raw, 0)
	end, good := c.value(i, 0)
	if !good || skipWS(raw, end) != len(raw) {
		return dst, false
	}
	return c.out, true
}

func skipWS(d []byte, i int) int {
	for i < len(d) && (d[i] == ' ' || d[i] == '\n' || d[i] == '\r' || d[i] == '\t') {
		i++
	}
	return i
}

func (c *canonicalizer) value(i, depth int) (int, bool) {
	d := c.src
	if i >= len(d) || depth > maxCanonDepth {
		return 0, false
	}
	switch d[i] {
	case '{':
		return c.object(i, depth)
	case '[':
		c.out = append(c.out, '[')
		i = skipWS(d, i+1)
		if i < len(d) && d[i] == ']' {
			c.out = append(c.out, ']')
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = c.value(i, depth+1); !ok {
				return 0, false
			}
			i = skipWS(d, i)
			if i >= len(d) {
				return 0, false
			}
			if d[i] == ']' {
				c.out = append(c.out, ']')
				return i + 1, true
			}
			if d[i] != ',' {
				return 0, false
			}
			c.out = append(c.out, ',')
			i = skipWS(d, i+1)
		}
	case '"':
		if end, ok := canonicalLiteral(d, i); ok {
			c.out = append(c.out, d[i:end]...) // already in canonical spelling
			return end, true
		}
		s, end, ok := decodeString(d, i, nil)
		if !ok {
			return 0, false
		}
		c.out = appendString(c.out, s)
		return end, true
	case 't', 'f', 'n':
		for _, lit := range []string{"true", "false", "null"} {
			if bytes.HasPrefix(d[i:], []byte(lit)) {
				c.out = append(c.out, lit...)
				return i + len(lit), true
			}
		}
		return 0, false
	default:
		end := numberEnd(d, i)
		if end == i {
			return 0, false
		}
		c.out = append(c.out, d[i:end]...)
		return end, true
	}
}

// numberEnd returns the end of a JSON number at d[i] (i when there is none).
func numberEnd(d []byte, i int) int {
	j := i
	if j < len(d) && d[j] == '-' {
		j++
	}
	digits := func() int {
		k := j
		for j < len(d) && d[j] >= '0' && d[j] <= '9' {
			j++
		}
		return j - k
	}
	if j < len(d) && d[j] == '0' {
		j++
	} else if digits() == 0 {
		return i
	}
	if j < len(d) && d[j] == '.' {
		j++
		if digits() == 0 {
			return i
		}
	}
	if j < len(d) && (d[j] == 'e' || d[j] == 'E') {
		j++
		if j < len(d) && (d[j] == '+' || d[j] == '-') {
			j++
		}
		if digits() == 0 {
			return i
		}
	}
	return j
}

func (c *canonicalizer) object(i, depth int) (int, bool) {
	d := c.src
	base := len(c.keys)
	defer func() { c.keys = c.keys[:base] }()
	i = skipWS(d, i+1)
	if i < len(d) && d[i] == '}' {
		c.out = append(c.out, '{', '}')
		return i + 1, true
	}
	// Canonicalise the values in source order, remembering where each one went, then
	// re-emit them in key order: every byte is canonicalised once per nesting level.
	objStart := len(c.out)
	for {
		if i >= len(d) || d[i] != '"' {
			return 0, false
		}
		key, end, ok := decodeString(d, i, nil)
		if !ok {
			return 0, false
		}
		i = skipWS(d, end)
		if i >= len(d) || d[i] != ':' {
			return 0, false
		}
		cs := len(c.out)
		ve, ok := c.value(skipWS(d, i+1), depth+1)
		if !ok {
			return 0, false
		}
		if depth == 0 && c.skipTop != "" && string(key) == c.skipTop {
			c.out = c.out[:cs]
		} else {
			c.keys = append(c.keys, canonMember{key: key, cs: cs - objStart, ce: len(c.out) - objStart})
		}
		i = skipWS(d, ve)
		if i >= len(d) {
			return 0, false
		}
		if d[i] == '}' {
			i++
			break
		}
		if d[i] != ',' {
			return 0, false
		}
		i = skipWS(d, i+1)
	}
	vals := append([]byte(nil), c.out[objStart:]...)
	c.out = c.out[:objStart]
	ms := c.keys[base:]
	sort.SliceStable(ms, func(a, b int) bool { return bytes.Compare(ms[a].key, ms[b].key) < 0 })
	c.out = append(c.out, '{')
	first := true
	for k, m := range ms {
		if k+1 < len(ms) && bytes.Equal(ms[k+1].key, m.key) {
			continue // duplicate key: the last one wins (the stable sort keeps source order)
		}
		if !first {
			c.out = append(c.out, ',')
		}
		first = false
		c.out = appendString(c.out, m.key)
		c.out = append(c.out, ':')
		c.out = append(c.out, vals[m.cs:m.ce]...)
	}
	c.out = append(c.out, '}')
	return i, true
}

// canonicalLiteral reports whether the string literal at d[i] == '"' is already in the
// canonical spelling appendString produces (valid UTF-8, only \", \\, \n, \r, \t
// escapes), returning its end.
func canonicalLiteral(d []byte, i int) (int, bool) {
	j := i + 1
	for j < len(d) {
		ch := d[j]
		switch {
		case ch == '"':
			return j + 1, true
		case ch == '\\':
			if j+1 >= len(d) {
				return 0, false
			}
			switch d[j+1] {
			case '"', '\\', 'n', 'r', 't':
				j += 2
			default:
				return 0, false
			}
		case ch < 0x20:
			return 0, false
		case ch < utf8.RuneSelf:
			j++
		default:
			r, size := utf8.DecodeRune(d[j:])
			if r == utf8.RuneError && size == 1 {
				return 0, false
			}
			j += size
		}
	}
	return 0, false
}

// decodeString decodes the JSON string at d[i] == '"'; invalid escapes, control
// characters or unterminated strings give ok == false. Invalid UTF-8 is kept (and
// replaced when re-encoded).
func decodeString(d []byte, i int, dst []byte) (s []byte, end int, ok bool) {
	j := i + 1
	start := j
	for j < len(d) && d[j] != '"' && d[j] != '\\' && d[j] >= 0x20 {
		j++
	}
	if j < len(d) && d[j] == '"' {
		return d[start:j], j + 1, true
	}
	dst = append(dst, d[start:j]...)
	for j < len(d) {
		ch := d[j]
		switch {
		case ch == '"':
			return dst, j + 1, true
		case ch < 0x20:
			return nil, 0, false
		case ch != '\\':
			dst = append(dst, ch)
			j++
			continue
		}
		if j+1 >= len(d) {
			return nil, 0, false
		}
		switch d[j+1] {
		case '"', '\\', '/':
			dst = append(dst, d[j+1])
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, ok := hex4(d, j+2)
			if !ok {
				return nil, 0, false
			}
			j += 6
			if utf16.IsSurrogate(r) {
				if r2, ok2 := hex4(d, j+2); ok2 && j+1 < len(d) && d[j] == '\\' && d[j+1] == 'u' {
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						dst = utf8.AppendRune(dst, dec)
						j += 6
						continue
					}
				}
				r = utf8.RuneError
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default:
			return nil, 0, false
		}
		j += 2
	}
	return nil, 0, false
}

func hex4(d []byte, i int) (rune, bool) {
	if i+4 > len(d) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(d[i:i+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	return rune(v), true
}

// appendString writes s as a JSON string escaping only '"', '\\' and control characters;
// invalid UTF-8 becomes U+FFFD.
func appendString(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		ch := s[i]
		if ch >= 0x20 && ch != '"' && ch != '\\' && ch < utf8.RuneSelf {
			i++
			continue
		}
		if ch >= utf8.RuneSelf {
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, s[start:i]...)
				dst = append(dst, "\ufffd"...)
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		dst = append(dst, s[start:i]...)
		dst = jsonesc.AppendEscapedASCII(dst, ch)
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
