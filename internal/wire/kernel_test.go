package wire

import (
	"bytes"
	"encoding/json"
	"flag"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/condense-dev/condense/internal/testutil/corpus"
)

// portable selects the portable (pure Go) string kernels for the whole test binary, so
// that every test, benchmark and fuzz target can run on either kernel set:
// `go test ./internal/wire -args -wire.portable`. TestPortableKernels does that for the
// test suite when the fast kernels are in use.
var portable = flag.Bool("wire.portable", false, "use the portable string kernels instead of the SIMD ones")

// fastDecodeRun and fastScanRun are the kernels init chose for this CPU (the portable
// ones where there is no SIMD version); set by TestMain.
var (
	fastDecodeRun func(dst, src []byte) (int, int)
	fastScanRun   func(src []byte) (int, bool)
)

func TestMain(m *testing.M) {
	flag.Parse()
	fastDecodeRun, fastScanRun = decodeRun, scanRun
	if *portable {
		decodeRun, scanRun = decodeRunGo, scanRunGo
	}
	os.Exit(m.Run())
}

// haveFastKernels reports whether this CPU has kernels other than the portable ones.
func haveFastKernels() bool {
	return reflect.ValueOf(fastDecodeRun).Pointer() != reflect.ValueOf(decodeRunGo).Pointer()
}

// withKernels runs f with the portable or the fast string kernels.
func withKernels(portable bool, f func()) {
	d, s := decodeRun, scanRun
	defer func() { decodeRun, scanRun = d, s }()
	if portable {
		decodeRun, scanRun = decodeRunGo, scanRunGo
	} else {
		decodeRun, scanRun = fastDecodeRun, fastScanRun
	}
	f()
}

// TestPortableKernels runs this package's whole test suite (tests and fuzz seed corpora)
// again in a child process on the portable kernels.
func TestPortableKernels(t *testing.T) {
	if *portable || !haveFastKernels() {
		t.Skip("already on the portable kernels")
	}
	args := []string{"-wire.portable", "-test.run", "^(Test|Fuzz)", "-test.count", "1"}
	if testing.Short() {
		args = append(args, "-test.short")
	}
	out, err := exec.Command(os.Args[0], args...).CombinedOutput()
	if err != nil {
		t.Fatalf("test suite on the portable kernels: %v\n%s", err, out)
	}
}

// TestUTF8Size compares utf8Size (and so the table the SIMD kernels use) with
// utf8.DecodeRune for every lead byte, every second byte and a spread of later bytes,
// complete and truncated.
func TestUTF8Size(t *testing.T) {
	later := []byte{0x00, 0x41, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xff}
	for c0 := 0x80; c0 < 0x100; c0++ {
		for c1 := 0; c1 < 0x100; c1++ {
			for _, c2 := range later {
				for _, c3 := range later {
					s := []byte{byte(c0), byte(c1), c2, c3}
					for n := 1; n <= 4; n++ {
						r, size := utf8.DecodeRune(s[:n])
						want := size
						if r == utf8.RuneError && size <= 1 {
							want = 0
						}
						if got := utf8Size(s[:n]); got != want {
							t.Fatalf("% x: utf8Size %d, utf8.DecodeRune says %d", s[:n], got, want)
						}
					}
				}
			}
		}
	}
}

// kernelSpecials are byte sequences the kernels must handle or stop at, placed at every
// offset by the tests below.
var kernelSpecials = []string{
	`"`, `\`, `\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`, `\u00e9`, `\ud83d\ude00`, `\x`, `\u12`,
	"\x00", "\x1f", "\x7f", "é", "→", "😀", "\xff", "\xc0\x80", "\xe2\x86", "\xed\xa0\x80", "\xf4\x90\x80\x80",
	"\xef\xbf\xbd", `\\\"`, "\\\\\\",
}

// checkKernels checks the fast kernels against the portable ones on src, and the
// kernels' contract on both: what they consume is a prefix the portable kernel consumes
// completely with the same output, they write nothing past dst[:len(src)], and they stop
// early only near the end of src.
func checkKernels(t *testing.T, src []byte) {
	t.Helper()
	ref := make([]byte, len(src))
	rn, rm := decodeRunGo(ref, src)
	type kernel struct {
		name   string
		decode func(dst, src []byte) (int, int)
		scan   func(src []byte) (int, bool)
	}
	kernels := []kernel{{"portable", decodeRunGo, scanRunGo}, {"fast", fastDecodeRun, fastScanRun}}
	for name, d := range moreDecodeKernels {
		kernels = append(kernels, kernel{name, d, fastScanRun})
	}
	for _, k := range kernels {
		// dst exactly len(src) long inside a larger buffer whose tail must stay intact.
		buf := bytes.Repeat([]byte{0xAA}, len(src)+64)
		n, m := k.decode(buf[:len(src)], src)
		if n < 0 || n > len(src) || m < 0 || m > n {
			t.Fatalf("%s decode %q: n=%d m=%d", k.name, src, n, m)
		}
		if !bytes.Equal(buf[len(src):], bytes.Repeat([]byte{0xAA}, 64)) {
			t.Fatalf("%s decode %q wrote past dst[:len(src)]", k.name, src)
		}
		pn, pm := decodeRunGo(make([]byte, n), src[:n])
		if pn != n || pm != m {
			t.Fatalf("%s decode %q consumed %d bytes into %d; that prefix decodes portably as %d into %d", k.name, src, n, m, pn, pm)
		}
		if !bytes.Equal(buf[:m], ref[:m]) {
			t.Fatalf("%s decode %q: %q, want %q", k.name, src, buf[:m], ref[:m])
		}
		// Stopping early is allowed only within the last 3 bytes (a UTF-8 sequence the
		// SIMD kernel reads 4 bytes of).
		if n != rn && n < len(src)-3 {
			t.Fatalf("%s decode %q stopped at %d, portable at %d", k.name, src, n, rn)
		}
		if n == rn && m != rm {
			t.Fatalf("%s decode %q wrote %d bytes, portable %d", k.name, src, m, rm)
		}
		sn, esc := k.scan(src)
		wn, _ := scanRunGo(src)
		if sn > wn || (sn != wn && sn < len(src)-3) {
			t.Fatalf("%s scan %q stopped at %d, portable at %d", k.name, src, sn, wn)
		}
		pn, pesc := scanRunGo(src[:sn])
		if pn != sn || pesc != esc {
			t.Fatalf("%s scan %q: %d %v; prefix scans portably as %d %v", k.name, src, sn, esc, pn, pesc)
		}
		if esc != (bytes.IndexByte(src[:sn], '\\') >= 0) {
			t.Fatalf("%s scan %q: escaped=%v", k.name, src, esc)
		}
	}
}

// stringResult is everything the string scanners report for one literal.
type stringResult struct {
	end     int
	escaped bool
	text    string
	err     string
}

// scanAllWays runs scanString on the literal at body[start] and decodes it as Block.Text
// does.
func scanAllWays(body []byte, start int) stringResult {
	var r stringResult
	var err error
	if r.end, r.escaped, err = scanString(body, start); err != nil {
		r.err = err.Error()
	}
	if r.err == "" {
		b := &Block{}
		b.setText(bodyString(body[start+1:r.end-1]), r.escaped)
		r.text = b.Text()
	}
	return r
}

// checkLiteral compares the string scanners on both kernel sets for the literal
// `"`+s+`"` followed by pad bytes of other JSON, and the decoded text with encoding/json.
func checkLiteral(t *testing.T, s []byte, pad int) {
	t.Helper()
	body := append(append(append([]byte(`{"k":"`), s...), '"'), bytes.Repeat([]byte(" "), pad)...)
	body = append(body, '}')
	var fast, port stringResult
	withKernels(false, func() { fast = scanAllWays(body, 5) })
	withKernels(true, func() { port = scanAllWays(body, 5) })
	if fast != port {
		t.Fatalf("%q: fast kernels %+v, portable %+v", s, fast, port)
	}
	if fast.err == "" {
		var want string
		lit := body[5:fast.end]
		if err := json.Unmarshal(lit, &want); err != nil || !utf8.Valid(lit) {
			t.Fatalf("%q accepted as %s; encoding/json: %v", s, lit, err)
		}
		if want != fast.text {
			t.Fatalf("%q decoded to %q, encoding/json says %q", s, fast.text, want)
		}
	} else if lit := body[5 : 5+len(s)+2]; json.Valid(lit) && utf8.Valid(lit) {
		t.Fatalf("%q rejected (%s), but it is a valid string", s, fast.err)
	}
}

// TestKernelsEveryPosition puts each special sequence at every offset of inputs up to
// 70 bytes (more than a 64-byte block), at the very end of the input and followed by
// more text, and at every offset of two blocks followed by 150 bytes (the decoding
// kernel moves text after an escape only with 128 bytes to spare), and checks the
// kernels and the string scanners on both kernel sets.
func TestKernelsEveryPosition(t *testing.T) {
	for _, sp := range kernelSpecials {
		for n := 0; n <= 70; n++ {
			for pos := 0; pos <= n; pos++ {
				s := []byte(strings.Repeat("a", pos) + sp + strings.Repeat("b", n-pos))
				checkKernels(t, s)
				checkKernels(t, s[:len(s)-(n-pos)])
				checkLiteral(t, s, 0)
				checkLiteral(t, s, 40)
			}
		}
		for pos := 0; pos <= 135; pos++ {
			s := []byte(strings.Repeat("a", pos) + sp + strings.Repeat("b", 150))
			checkKernels(t, s)
			checkLiteral(t, s, 0)
		}
	}
}

// TestKernelsRandom checks the kernels and scanners on pseudo-random strings made of
// plain runs of every length, escapes (valid, \u and invalid, doubled backslashes),
// UTF-8 of every length, control characters, quotes and invalid bytes, with a long tail
// and without.
func TestKernelsRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{`\n`, `\"`, `\\`, `\t`, `\/`, `\u00e9`, `\q`, "é", "→", "😀", "\xff", "\xe2\x86", "\x01", `"`}
	for range 3000 {
		var b strings.Builder
		for b.Len() < 300 {
			if rng.IntN(3) == 0 {
				p := pieces[rng.IntN(len(pieces))]
				// Errors rarer than valid pieces, so that most strings go far.
				if strings.ContainsAny(p, "\xff\x01\"q") && rng.IntN(8) != 0 {
					continue
				}
				b.WriteString(p)
			} else {
				b.WriteString(strings.Repeat("x", rng.IntN(70)))
			}
		}
		s := []byte(b.String())
		checkKernels(t, s)
		checkLiteral(t, s, rng.IntN(200))
	}
}

// TestKernelsMixed runs the checks on realistic mixtures: line-numbered tool output with
// arrows and escaped newlines, code with quotes and backslashes, and long runs.
func TestKernelsMixed(t *testing.T) {
	var b strings.Builder
	for i := range 200 {
		b.WriteString(strings.Repeat(" ", i%7))
		b.WriteString(`→ func f() { return \"x\\n\" }\n\t`)
		b.WriteString(strings.Repeat("é😀", i%3))
	}
	s := []byte(b.String())
	for cut := len(s) - 80; cut <= len(s); cut++ {
		checkKernels(t, s[:cut])
		checkLiteral(t, s[:cut], 0)
	}
}

// FuzzStringKernels compares the SIMD and portable string kernels, and the string
// scanners built on them, on arbitrary bytes (invalid UTF-8, control bytes, any escape),
// with the literal ending anywhere from the end of the body to 255 bytes before it.
func FuzzStringKernels(f *testing.F) {
	for _, sp := range kernelSpecials {
		f.Add([]byte(strings.Repeat("x", 30)+sp+"tail"), uint8(0))
	}
	f.Add([]byte(`a\nb→c\"d\\e\u00e9`), uint8(3))
	f.Add([]byte(strings.Repeat(`a\nb→`, 40)), uint8(200))
	f.Fuzz(func(t *testing.T, s []byte, pad uint8) {
		checkKernels(t, s)
		checkLiteral(t, s, int(pad))
	})
}

// TestKernelsCorpus parses the 2 MB Claude Code request and the largest request of each
// Claude Code corpus file on both kernel sets and compares the results.
func TestKernelsCorpus(t *testing.T) {
	sameOnBothKernels(t, Anthropic, twoMBRequest(t))
	for _, p := range corpus.Files(t) {
		base := filepath.Base(p)
		if strings.HasPrefix(base, "ccspot_") || strings.HasPrefix(base, "cccodemie_") {
			sameOnBothKernels(t, Anthropic, claudeCodeRequest(t, p))
		}
	}
}

// moreDecodeKernels are further decodeRun implementations this CPU runs (the kernels the
// fast one is built from), checked like the fast one.
var moreDecodeKernels = map[string]func(dst, src []byte) (int, int){}
