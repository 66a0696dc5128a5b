package proxy

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestReadBodyOneBuffer checks that a body with a Content-Length is read into one buffer of
// about that size (no regrowth doubling it and copying it), and that a body without one or
// over the limit is still read (or refused) correctly.
func TestReadBodyOneBuffer(t *testing.T) {
	for _, n := range []int{1, 511, 512, 4096, 1 << 20} {
		want := bytes.Repeat([]byte{'x'}, n)
		r := httptest.NewRequest(http.MethodPost, "/v1/messages", bytes.NewReader(want))
		got, err := readBody(r, 32<<20)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("n=%d: err %v, %d bytes", n, err, len(got))
		}
		if n >= 4096 && cap(got) >= n+n/2 {
			t.Fatalf("n=%d: buffer capacity %d: the body was copied into a grown buffer", n, cap(got))
		}
	}
	r := httptest.NewRequest(http.MethodPost, "/v1/messages", bytes.NewReader([]byte("abc")))
	r.ContentLength = -1
	if got, err := readBody(r, 10); err != nil || string(got) != "abc" {
		t.Fatalf("unknown length: %q %v", got, err)
	}
	r = httptest.NewRequest(http.MethodPost, "/v1/messages", bytes.NewReader(make([]byte, 100)))
	if _, err := readBody(r, 10); err == nil {
		t.Fatal("a body over the limit was accepted")
	}
}
