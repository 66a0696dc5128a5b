package wire

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"unsafe"
)

// encoded returns r serialized, after checking that every way of serializing it agrees:
// Bytes and the concatenated Segments; that Bytes fits its size
// hint (no second allocation); and that segments of an unmodified part alias the parsed
// bytes instead of copying them.
func encoded(t testing.TB, r *Request) []byte {
	t.Helper()
	out := r.Bytes()
	segs := r.Segments()
	if got := segs.Bytes(); !bytes.Equal(got, out) {
		t.Fatalf("Segments differ from Bytes:\n%s\n%s", got, out)
	}
	if segs.Len() != len(out) {
		t.Fatalf("Segments.Len %d, want %d", segs.Len(), len(out))
	}
	if r.modified() && len(out) > r.sizeHint() {
		t.Fatalf("size hint %d below the serialized length %d", r.sizeHint(), len(out))
	}
	for _, s := range segs {
		if len(s) == 0 {
			t.Fatal("empty segment")
		}
	}
	return out
}

// aliases reports whether b lies inside within.
func aliases(b, within []byte) bool {
	if len(b) == 0 || len(within) == 0 {
		return false
	}
	p, lo := uintptr(unsafe.Pointer(&b[0])), uintptr(unsafe.Pointer(&within[0]))
	return p >= lo && p+uintptr(len(b)) <= lo+uintptr(len(within))
}

func TestSegmentsReferenceUnchangedMessages(t *testing.T) {
	big := strings.Repeat("x", 4*minSegment)
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"` + big + `"},{"role":"assistant","content":"ok"},{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"` + big + `"}]}]}`)
	r, err := Parse(Anthropic, body)
	if err != nil {
		t.Fatal(err)
	}
	if segs := r.Segments(); len(segs) != 1 || &segs[0][0] != &body[0] || len(segs[0]) != len(body) {
		t.Fatal("an unmodified request must be the one segment of its body")
	}
	msgs := append([]*Message(nil), r.Messages...)
	m := msgs[2]
	msgs[2] = m.WithBlocks([]*Block{m.Blocks[0].WithResultText("pruned")})
	nr := r.WithMessages(msgs)
	nr.Model = "m2"
	out := encoded(t, nr)
	if !bytes.Contains(out, []byte(`"model":"m2"`)) || !bytes.Contains(out, []byte(`"content":"pruned"`)) {
		t.Fatalf("modifications missing: %s", out)
	}
	var copied, aliased int
	for _, s := range nr.Segments() {
		if aliases(s, body) {
			aliased += len(s)
		} else {
			copied += len(s)
		}
	}
	if aliased < len(big) || copied > 2*minSegment {
		t.Fatalf("%d bytes referenced from the body, %d copied: the unchanged message must be referenced", aliased, copied)
	}
}

func TestSegmentsReader(t *testing.T) {
	segs := Segments{[]byte("ab"), []byte("cde"), []byte("f"), []byte("ghij")}
	for _, size := range []int{1, 2, 3, 5, 64} {
		var got []byte
		rd := segs.Reader()
		buf := make([]byte, size)
		for {
			n, err := rd.Read(buf)
			got = append(got, buf[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if string(got) != "abcdefghij" {
			t.Fatalf("reads of %d: %q", size, got)
		}
	}
	var w bytes.Buffer
	rd := segs.Reader()
	if _, err := rd.Read(make([]byte, 3)); err != nil {
		t.Fatal(err)
	}
	if n, err := rd.(io.WriterTo).WriteTo(&w); err != nil || n != 7 || w.String() != "defghij" {
		t.Fatalf("WriteTo after a partial read: %d %v %q", n, err, w.String())
	}
	if n, err := segs.Reader().Read(nil); n != 0 || err != nil {
		t.Fatalf("empty read: %d %v", n, err)
	}
	if b, err := io.ReadAll(Segments(nil).Reader()); err != nil || len(b) != 0 {
		t.Fatalf("no segments: %q %v", b, err)
	}
}

// TestSizeHintShrinkingSystem: replacing many system blocks by one keeps the hint above the
// length (the hint used to count a text-object wrapper for every original block).
func TestSizeHintShrinkingSystem(t *testing.T) {
	var blocks []string
	for i := 0; i < 12; i++ {
		blocks = append(blocks, `{"type":"text","text":"part"}`)
	}
	r := mustParse(t, Anthropic, `{"model":"m","system":[`+strings.Join(blocks, ",")+`],"messages":[]}`)
	out := encoded(t, r.WithSystem([]*Block{NewTextBlock(Anthropic, "one")}))
	if want := `{"model":"m","system":[{"type":"text","text":"one"}],"messages":[]}`; string(out) != want {
		t.Fatalf("got %s", out)
	}
}
