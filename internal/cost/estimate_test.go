package cost

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/png"
	"math/rand/v2"
	"testing"
)

func TestCharEstimatorText(t *testing.T) {
	e := CharEstimator{}
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"", 0},
		{"abcd", 1},
		{"abcde", 2},          // ceil(5/4)
		{"abcdabcdabcd", 3},   // 12/4
		{"héllo", 2},          // 4 ASCII → 1, é → 1
		{"日本語", 3},            // one per non-ASCII rune
		{"func main() {}", 4}, // 14/4 → 3.5 → 4
	} {
		if got := e.Text(tc.in); got != tc.want {
			t.Errorf("Text(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
	if got := (CharEstimator{CharsPerToken: 2}).Text("abcd"); got != 2 {
		t.Errorf("CharsPerToken 2: %d", got)
	}
}

// TestCountRunes compares the word-at-a-time counter with a byte loop on random bytes (valid
// and invalid UTF-8) at every length and alignment up to 40 bytes, and on longer strings.
func TestCountRunes(t *testing.T) {
	slow := func(s string) (a, o int) {
		for i := 0; i < len(s); i++ {
			if s[i] < 0x80 {
				a++
			} else if s[i]&0xC0 != 0x80 {
				o++
			}
		}
		return a, o
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("aZ0 {\n\x7f\x80\xbf\xc3\xa9\xe6\x97\xa5\xf0\x9f\x98\x80\xff")
	buf := make([]byte, 4096)
	for n := 0; n < 2000; n++ {
		for i := range buf {
			buf[i] = alphabet[rng.IntN(len(alphabet))]
		}
		l := rng.IntN(41)
		if n%10 == 0 {
			l = rng.IntN(len(buf))
		}
		off := rng.IntN(8)
		s := string(buf[off : off+l])
		a, o := countRunes(s)
		wa, wo := slow(s)
		if a != wa || o != wo {
			t.Fatalf("countRunes(%q) = %d, %d; want %d, %d", s, a, o, wa, wo)
		}
	}
}

func TestImageTokens(t *testing.T) {
	// 1000×500 fits: 500000/750 = 666.67 → 667.
	if got := ImageTokens(1000, 500); got != 667 {
		t.Fatalf("1000x500 = %d", got)
	}
	// 2000×1000 → long edge scaled to 1568: 1568×784 = 1229312 / 750 = 1639.08 → 1640.
	if got := ImageTokens(2000, 1000); got != 1640 {
		t.Fatalf("2000x1000 = %d", got)
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, 2000, 1000))); err != nil {
		t.Fatal(err)
	}
	e := CharEstimator{}
	if got := e.Image("image/png", base64.StdEncoding.EncodeToString(buf.Bytes())); got != 1640 {
		t.Fatalf("png 2000x1000 = %d", got)
	}
	if got := e.Image("image/png", "not base64!"); got != 1600 {
		t.Fatalf("fallback = %d", got)
	}
}
