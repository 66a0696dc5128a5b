package wire

import "golang.org/x/sys/cpu"

// hasSIMD and hasVBMI2 report whether the AVX2 kernels and decodeRunVBMI2 can run.
var hasSIMD = cpu.X86.HasAVX2

var hasVBMI2 = hasSIMD && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VBMI && cpu.X86.HasAVX512VBMI2 && cpu.X86.HasBMI1 && cpu.X86.HasBMI2 && cpu.X86.HasPOPCNT

func init() {
	if hasSIMD {
		decodeRun = decodeRunAVX2
		scanRun = scanRunAVX2
	}
	if hasVBMI2 {
		decodeRun = decodeRunFast
	}
}

// decodeRunFast is decodeRunVBMI2, continued by decodeRunAVX2 where it stops before a quote.
func decodeRunFast(dst, src []byte) (n, m int) {
	n, m = decodeRunVBMI2(dst, src)
	if n < len(src) && src[n] != '"' {
		n2, m2 := decodeRunAVX2(dst[m:], src[n:])
		n, m = n+n2, m+m2
	}
	return n, m
}

// decodeRunVBMI2 is decodeRun for ASCII text with AVX-512, 64 bytes per step.
//
//go:noescape
func decodeRunVBMI2(dst, src []byte) (n, m int)

// decodeRunAVX2 is decodeRun with AVX2, 32 bytes per step.
//
//go:noescape
func decodeRunAVX2(dst, src []byte) (n, m int)

// scanRunAVX2 is scanRun with AVX2, 32 bytes per step.
//
//go:noescape
func scanRunAVX2(src []byte) (n int, escaped bool)

// UTF-8 error classes of the vectorised validation (Keiser and Lemire, 2021): a byte pair is
// invalid when its three nibble lookups share a class bit, except twoConts, which is valid
// exactly for the third or fourth byte of a sequence.
const (
	tooShort     = 1 << 0 // a leading byte not followed by a continuation byte
	tooLong      = 1 << 1 // a continuation byte after an ASCII byte
	overlong3    = 1 << 2 // E0 80..9F
	tooLarge     = 1 << 3 // F4 90..BF, F5..FF
	surrogate    = 1 << 4 // ED A0..BF
	overlong2    = 1 << 5 // C0, C1
	tooLarge1000 = 1 << 6 // F5..FF 80..8F
	overlong4    = 1 << 6 // F0 80..8F
	twoConts     = 1 << 7 // two continuation bytes
	carry        = tooShort | tooLong | twoConts
)

// lanes repeats a 16-byte table in both 128-bit lanes (VPSHUFB looks up per lane).
func lanes(t [16]byte) (v [32]byte) {
	copy(v[:], t[:])
	copy(v[16:], t[:])
	return
}

// The UTF-8 nibble tables: by the previous byte's high and low nibble, the byte's high one.
var (
	utf8Prev1High = lanes([16]byte{
		tooLong, tooLong, tooLong, tooLong, tooLong, tooLong, tooLong, tooLong,
		twoConts, twoConts, twoConts, twoConts,
		tooShort | overlong2,
		tooShort,
		tooShort | overlong3 | surrogate,
		tooShort | tooLarge | tooLarge1000 | overlong4,
	})
	utf8Prev1Low = lanes([16]byte{
		carry | overlong3 | overlong2 | overlong4,
		carry | overlong2,
		carry, carry,
		carry | tooLarge,
		carry | tooLarge | tooLarge1000, carry | tooLarge | tooLarge1000,
		carry | tooLarge | tooLarge1000, carry | tooLarge | tooLarge1000,
		carry | tooLarge | tooLarge1000, carry | tooLarge | tooLarge1000,
		carry | tooLarge | tooLarge1000, carry | tooLarge | tooLarge1000,
		carry | tooLarge | tooLarge1000 | surrogate,
		carry | tooLarge | tooLarge1000, carry | tooLarge | tooLarge1000,
	})
	utf8CurHigh = lanes([16]byte{
		tooShort, tooShort, tooShort, tooShort, tooShort, tooShort, tooShort, tooShort,
		tooLong | overlong2 | twoConts | overlong3 | tooLarge1000 | overlong4,
		tooLong | overlong2 | twoConts | overlong3 | tooLarge,
		tooLong | overlong2 | twoConts | surrogate | tooLarge,
		tooLong | overlong2 | twoConts | surrogate | tooLarge,
		tooShort, tooShort, tooShort, tooShort,
	})
)

// A byte after a backslash is a two-byte escape when escLow[low nibble] & escHigh[high
// nibble] != 0 (\u is left to the caller).
var (
	escLow  = lanes([16]byte{2: 1 | 4 | 8, 4: 8, 6: 4, 0xC: 2, 0xE: 4, 0xF: 1})
	escHigh = lanes([16]byte{2: 1, 5: 2, 6: 4, 7: 8})
)
