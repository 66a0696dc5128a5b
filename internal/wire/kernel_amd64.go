package wire

import "golang.org/x/sys/cpu"

// hasAVX2 reports whether the AVX2 string kernels can run on this CPU.
var hasAVX2 = cpu.X86.HasAVX2

func init() {
	if hasAVX2 {
		decodeRun = decodeRunAVX2
		scanRun = scanRunAVX2
	}
}

// decodeRunAVX2 is decodeRun with AVX2: 32 bytes per step, each stored to dst as it is
// checked; two-byte escapes and valid UTF-8 sequences are handled without returning, the
// last 31 bytes of src one at a time.
//
//go:noescape
func decodeRunAVX2(dst, src []byte) (n, m int)

// scanRunAVX2 is scanRun with AVX2, 32 bytes per step.
//
//go:noescape
func scanRunAVX2(src []byte, plain bool) (n int, escaped bool)
