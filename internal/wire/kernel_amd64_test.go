package wire

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// utf8VectorValid applies utf8Check at every position of s (ASCII before it) and
// requires no sequence to be left incomplete at its end: how the SIMD kernels accept a
// block whose bytes are not followed by a continuation byte.
func utf8VectorValid(s []byte) bool {
	var p3, p2, p1 byte
	for _, c := range s {
		if utf8Check(p3, p2, p1, c) != 0 {
			return false
		}
		p3, p2, p1 = p2, p1, c
	}
	return utf8Check(p3, p2, p1, ' ') == 0
}

// TestUTF8VectorTables checks the nibble tables of the vectorised UTF-8 validation
// against utf8.Valid on every sequence of one to three bytes and on four-byte sequences
// of every lead and second byte with a spread of later bytes.
func TestUTF8VectorTables(t *testing.T) {
	check := func(s []byte) {
		if got, want := utf8VectorValid(s), utf8.Valid(s); got != want {
			t.Fatalf("% x: vector validation %v, utf8.Valid %v", s, got, want)
		}
	}
	later := []byte{0x00, 0x41, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc2, 0xe0, 0xed, 0xf0, 0xf4, 0xf5, 0xff}
	for a := 0; a < 256; a++ {
		check([]byte{byte(a)})
		for b := 0; b < 256; b++ {
			check([]byte{byte(a), byte(b)})
			for c := 0; c < 256; c++ {
				check([]byte{byte(a), byte(b), byte(c)})
			}
			for _, c := range later {
				for _, d := range later {
					check([]byte{byte(a), byte(b), c, d})
				}
			}
		}
	}
}

// TestEscapeTables checks the escape nibble tables on every byte.
func TestEscapeTables(t *testing.T) {
	for c := 0; c < 256; c++ {
		valid := escLow[c&15]&escHigh[c>>4] != 0
		if want := escDecode[c] != 0; valid != want {
			t.Fatalf("%q: valid %v, want %v", rune(c), valid, want)
		}
	}
}

func init() {
	if hasSIMD {
		moreDecodeKernels["avx2"] = decodeRunAVX2
	}
}

// TestVBMI2Kernel checks that decodeRunVBMI2, where it runs, takes ASCII text with
// two-byte escapes (no escaped backslash) whole up to the closing quote.
func TestVBMI2Kernel(t *testing.T) {
	if !hasVBMI2 {
		t.Skip("no AVX-512 VBMI2")
	}
	src := []byte(strings.Repeat(`line of text\n\t\"quoted\" back\/slash\r\b\f `, 20) + `"` + strings.Repeat(" ", 64))
	dst := make([]byte, len(src))
	n, m := decodeRunVBMI2(dst, src)
	rn, rm := decodeRunGo(make([]byte, len(src)), src)
	if n != rn || m != rm || src[n] != '"' {
		t.Fatalf("VBMI2 kernel stopped at %d (wrote %d), portable at %d (%d)", n, m, rn, rm)
	}
}

// utf8Check is the vectorised validation for one byte position, as the kernels compute
// it in every lane: the error class bits for byte cur after prev1, prev2, prev3 (0 when
// valid so far).
func utf8Check(prev3, prev2, prev1, cur byte) byte {
	special := utf8Prev1High[prev1>>4] & utf8Prev1Low[prev1&15] & utf8CurHigh[cur>>4]
	var must byte
	if prev2 >= 0xE0 || prev3 >= 0xF0 {
		must = 0x80
	}
	return special ^ must
}
