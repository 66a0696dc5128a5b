package wire

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// text decodes a validated JSON string literal: the body's own bytes without escapes (Parse
// never copies them), else a string of its own.
func (p *parser) text(lit []byte) string {
	s := lit[1 : len(lit)-1]
	if !hasBackslash(s) {
		return bodyString(s)
	}
	p.keep(len(s))
	return decoded(bodyString(s))
}

// noZeroBytes returns an empty slice with room for at least n bytes whose memory is not
// cleared (strings.Builder.Grow's allocation): for buffers of which only the bytes written
// are read.
func noZeroBytes(n int) []byte {
	var b strings.Builder
	b.Grow(n)
	b.WriteByte(0) // so that String has the buffer's address
	return unsafe.Slice(unsafe.StringData(b.String()), b.Cap())[:0]
}

// decodeU decodes the \uXXXX escape (or surrogate pair) at the start of s, returning the
// UTF-8 bytes appended to dst and the number of input bytes used.
func decodeU(s, dst []byte) ([]byte, int) {
	r := rune(hex4(s[2:6]))
	if utf16.IsSurrogate(r) {
		if len(s) >= 12 && s[6] == '\\' && s[7] == 'u' {
			if r2 := utf16.DecodeRune(r, rune(hex4(s[8:12]))); r2 != utf8.RuneError {
				return utf8.AppendRune(dst, r2), 12
			}
		}
		r = utf8.RuneError
	}
	return utf8.AppendRune(dst, r), 6
}

// lazyText returns the body of the validated string literal lit and whether it has escapes,
// for setText.
func lazyText(lit []byte) (string, bool) {
	body := lit[1 : len(lit)-1]
	return bodyString(body), hasBackslash(body)
}

// appendText appends the text s stands for: s itself, or when escaped the decoding of the
// string literal body s.
func appendText(dst []byte, s string, escaped bool) []byte {
	if escaped {
		return appendDecoded(dst, s)
	}
	return append(dst, s...)
}

// textBlock returns the string-form text block of the string literal lit (esc: it has
// escapes).
func (p *parser) textBlock(lit []byte, esc bool) *Block {
	c := p.newBlock()
	c.Kind, c.Type, c.str = KindText, "text", lit
	c.setText(bodyString(lit[1:len(lit)-1]), esc)
	return c
}

// keyMatch reports whether the validated string literal lit decodes to name (without
// decoding it unless it holds an escape).
func keyMatch(lit []byte, name string) bool {
	body := lit[1 : len(lit)-1]
	if len(body) <= len(name) {
		return len(body) == len(name) && string(body) == name
	}
	if len(name) > 0 && body[0] != '\\' && body[0] != name[0] {
		return false // the first byte decodes to itself
	}
	return hasBackslash(body) && unquote(lit) == name
}

func stringBlock(f Format, lit []byte) *Block {
	b := &Block{f: f, Kind: KindText, Type: "text", str: lit}
	b.setText(lazyText(lit))
	return b
}

// stringAt returns the decoded string value at d[vs] of the member at path and its end (a
// schema error when it is not a string).
func (p *parser) stringAt(vs, depth int, path jpath) (string, int, error) {
	if vs >= len(p.d) || p.d[vs] != '"' {
		return "", 0, p.wrongType(vs, depth, path, "string")
	}
	e, _, err := scanString(p.d, vs)
	if err != nil {
		return "", 0, err
	}
	return p.text(p.d[vs:e]), e, nil
}
