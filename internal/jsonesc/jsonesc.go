// Package jsonesc holds the one JSON string escape every JSON writer in condense uses. It
// imports nothing of condense, so any package can depend on it.
package jsonesc

const hexDigits = "0123456789abcdef"

// AppendEscapedASCII appends the JSON escape of c, an ASCII byte a JSON string must escape
// ('"', '\\' or a control character): the two-byte form for '"', '\\', '\n', '\r' and '\t',
// \u00XX for the rest.
func AppendEscapedASCII(dst []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(dst, '\\', c)
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	return append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
}
