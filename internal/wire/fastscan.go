package wire

import (
	"unicode/utf8"
	"unsafe"
)

// bodyString returns b as a string sharing its memory: only for bytes never written again,
// the parsed body's (Parse's contract) and decoded strings'.
func bodyString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// plainRun validates the string starting at d[start] == '"' up to its first quote or
// backslash and returns that offset. The checks and errors are those of scanString for
// the same bytes.
func plainRun(d []byte, start int) (int, error) {
	i := skipShort(d, start+1)
	if i < len(d) && d[i] == '"' {
		return i, nil
	}
	for {
		n, _ := scanRun(d[i:], true)
		i += n
		if i >= len(d) {
			return 0, synErr(start, "unterminated string")
		}
		c := d[i]
		switch {
		case c == '"' || c == '\\':
			return i, nil
		case c < 0x20:
			return 0, synErr(i, "control character 0x%02x in string", c)
		default:
			r, size := utf8.DecodeRune(d[i:])
			if r == utf8.RuneError && size <= 1 {
				return 0, synErr(i, "invalid UTF-8 in string")
			}
			i += size
		}
	}
}

// offset returns the body offset of b, a subslice of the body (0 when it is not one).
func (p *parser) offset(b []byte) int {
	if len(b) == 0 || len(p.d) == 0 {
		return 0
	}
	off := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) - uintptr(unsafe.Pointer(unsafe.SliceData(p.d))))
	if off < 0 || off > len(p.d) {
		return 0
	}
	return off
}
