package wire

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// wantDecoded is what the literal of s must decode to: s with every invalid UTF-8 byte
// replaced by U+FFFD.
func wantDecoded(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		b.WriteRune(r)
		i += size
	}
	return b.String()
}

// checkQuote checks appendQuotedCheck against encoding/json's decoding of its output.
func checkQuote(t *testing.T, s string) {
	t.Helper()
	lit, replaced := appendQuotedCheck([]byte("x"), s)
	if lit[0] != 'x' {
		t.Fatal("prefix lost")
	}
	lit = lit[1:]
	var got string
	if err := json.Unmarshal(lit, &got); err != nil {
		t.Fatalf("%q: literal %s is not JSON: %v", s, lit, err)
	}
	if want := wantDecoded(s); got != want {
		t.Fatalf("%q: literal %s decodes to %q, want %q", s, lit, got, want)
	}
	if replaced == utf8.ValidString(s) {
		t.Fatalf("%q: replaced = %v", s, replaced)
	}
	if err := validJSON(lit); err != nil {
		t.Fatalf("%q: own scanner rejects %s: %v", s, lit, err)
	}
}

// TestQuoteEveryPosition puts each byte that needs escaping (and multi-byte and invalid
// sequences) at every position of the 8-byte windows the fast path skips.
func TestQuoteEveryPosition(t *testing.T) {
	specials := []string{`"`, `\`, "\n", "\r", "\t", "\x00", "\x1f", "\x7f", "é", "→", "😀", "\xff", "\xe2\x86", "\xed\xa0\x80"}
	for _, sp := range specials {
		for n := 0; n < 20; n++ {
			for pos := 0; pos <= n; pos++ {
				s := strings.Repeat("a", pos) + sp + strings.Repeat("b", n-pos)
				checkQuote(t, s)
			}
		}
	}
	checkQuote(t, "")
	checkQuote(t, strings.Repeat("plain ascii text ", 100))
}

// TestConstructedTextDecodesToText: constructed messages and blocks parse back to the
// text they were built from (invalid UTF-8 as U+FFFD in both).
func TestConstructedTextDecodesToText(t *testing.T) {
	for _, text := range []string{"", "plain", "line\n\"q\" \\ tab\t", "caf\xe9 →", strings.Repeat("x→\n", 500)} {
		for _, f := range []Format{Anthropic, OpenAI} {
			m := NewTextMessage(f, RoleUser, text)
			body := append(append([]byte(`{"model":"m","messages":[`), m.Bytes()...), ']', '}')
			r, err := Parse(f, body)
			if err != nil {
				t.Fatalf("%q: %v", text, err)
			}
			if got, want := r.Messages[0].Blocks[0].Text(), m.Blocks[0].Text(); got != want || got != wantDecoded(text) {
				t.Fatalf("%q: parsed %q, constructed %q", text, got, want)
			}
		}
		b := NewTextBlock(Anthropic, text)
		var obj struct {
			Type, Text string
		}
		if err := json.Unmarshal(b.Raw(), &obj); err != nil || obj.Type != "text" || obj.Text != wantDecoded(text) || b.Text() != obj.Text {
			t.Fatalf("%q: block %s: %v", text, b.Raw(), err)
		}
	}
}

// FuzzQuote: any string quotes to a literal that decodes back to it.
func FuzzQuote(f *testing.F) {
	for _, s := range []string{"", "a\"b", "\xff", "→\n", strings.Repeat("\\", 9)} {
		f.Add(s)
	}
	f.Fuzz(checkQuote)
}
