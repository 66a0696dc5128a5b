package wire

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
)

// String kernels walk JSON string contents many bytes per step and stop at anything they do
// not handle, which callers check byte by byte (docs/design/wire.md, "String kernels").
var (
	// decodeRun decodes a handled prefix of src into dst, returning the bytes read and
	// written; it needs len(dst) >= len(src) and may write anywhere in dst[:len(src)].
	decodeRun = decodeRunGo
	// scanRun validates a handled prefix of src, returning its length and whether it has
	// an escape.
	scanRun = scanRunGo
)

// escDecode maps the character after a backslash to the byte a two-byte escape stands
// for, and everything else (including 'u') to 0.
var escDecode = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// utf8Lead describes each leading byte of a multi-byte UTF-8 sequence (0: none): bits 0–7 the
// size, 8–15 and 16–23 lo and hi-lo of the valid second bytes (as utf8.DecodeRune accepts),
// 32–63 the mask of the continuation bits of bytes 3 and 4 in a little-endian 32-bit load.
var utf8Lead = func() (t [256]uint64) {
	set := func(from, to, size int, lo, hi uint64) {
		cont := uint64(0xC0C00000) >> (8 * (4 - size)) & 0xC0C00000
		for c := from; c <= to; c++ {
			t[c] = uint64(size) | lo<<8 | (hi-lo)<<16 | cont<<32
		}
	}
	set(0xC2, 0xDF, 2, 0x80, 0xBF)
	set(0xE0, 0xE0, 3, 0xA0, 0xBF)
	set(0xE1, 0xEC, 3, 0x80, 0xBF)
	set(0xED, 0xED, 3, 0x80, 0x9F)
	set(0xEE, 0xEF, 3, 0x80, 0xBF)
	set(0xF0, 0xF0, 4, 0x90, 0xBF)
	set(0xF1, 0xF3, 4, 0x80, 0xBF)
	set(0xF4, 0xF4, 4, 0x80, 0x8F)
	return
}()

// decodeRunGo is the portable decodeRun, eight bytes per step (specialMask).
func decodeRunGo(dst, src []byte) (n, m int) {
	dst = dst[:len(src)]
	i, j := 0, 0
	for {
		for i+8 <= len(src) {
			x := binary.LittleEndian.Uint64(src[i:])
			binary.LittleEndian.PutUint64(dst[j:], x)
			if sm := specialMask(x); sm != 0 {
				k := bits.TrailingZeros64(sm) / 8
				i += k
				j += k
				break
			}
			i += 8
			j += 8
		}
		for i < len(src) && strPlain[src[i]] {
			dst[j] = src[i]
			i++
			j++
		}
		if i >= len(src) {
			return i, j
		}
		size := handled(src, i)
		switch {
		case size == 0:
			return i, j
		case src[i] == '\\':
			dst[j] = escDecode[src[i+1]]
			j++
		default:
			j += copy(dst[j:], src[i:i+size])
		}
		i += size
	}
}

// scanRunGo is the portable scanRun.
func scanRunGo(src []byte) (n int, escaped bool) {
	for i := 0; ; {
		if i = skipPlain(src, i); i >= len(src) {
			return i, escaped
		}
		size := handled(src, i)
		if size == 0 {
			return i, escaped
		}
		escaped = escaped || src[i] == '\\'
		i += size
	}
}

// handled returns the length of what the kernels handle at src[i], a byte skipPlain stops
// at: a two-byte escape or a valid multi-byte UTF-8 sequence; 0 for anything else.
func handled(src []byte, i int) int {
	switch c := src[i]; {
	case c == '\\':
		if i+1 < len(src) && escDecode[src[i+1]] != 0 {
			return 2
		}
	case c >= utf8.RuneSelf:
		return utf8Size(src[i:])
	}
	return 0
}

// utf8Size returns the length of the valid multi-byte UTF-8 sequence at the start of s
// (s[0] >= 0x80), or 0 when it is invalid or incomplete.
func utf8Size(s []byte) int {
	t := utf8Lead[s[0]]
	size := int(t & 0xFF)
	if size == 0 || len(s) < size || uint64(s[1])-(t>>8&0xFF) > t>>16&0xFF {
		return 0
	}
	for _, c := range s[2:size] {
		if c&0xC0 != 0x80 {
			return 0
		}
	}
	return size
}

// skipShort skips at most 16 plain bytes from d[i] and returns the offset of the first byte
// it did not skip: most keys and many values are shorter, so they need no kernel call.
func skipShort(d []byte, i int) int {
	if i+16 <= len(d) {
		return skipPlain(d[:i+16], i)
	}
	return i
}

// skipPlain returns the offset of the first byte at or after d[i] that strPlain does not
// accept, or len(d), eight bytes per step (specialMask).
func skipPlain(d []byte, i int) int {
	for i+8 <= len(d) {
		if m := specialMask(binary.LittleEndian.Uint64(d[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
		i += 8
	}
	for i < len(d) && strPlain[d[i]] {
		i++
	}
	return i
}

// specialMask flags, in bit 7 of each byte of the little-endian word x, the bytes strPlain
// rejects. The lowest flagged byte is exact: borrows only flag bytes above a flagged one.
func specialMask(x uint64) uint64 {
	q := x ^ (lo8 * '"')
	b := x ^ (lo8 * '\\')
	return (((q - lo8) &^ q) | ((b - lo8) &^ b) | ((x - lo8*0x20) &^ x) | x) & hi8
}
