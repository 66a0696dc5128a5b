package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/condense-dev/condense/internal/upstreamfake"
)

// TestReadBodyOneBuffer checks that a body with a Content-Length is read into a buffer of
// about that size (never one doubled past it), and that a body without one or over the
// limit is still read (or refused) correctly.
func TestReadBodyOneBuffer(t *testing.T) {
	for _, n := range []int{1, 511, 512, 4096, 1 << 20, 3<<20 + 7} {
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

// stalledBody sends a few bytes, then fails as a connection whose client stopped sending.
type stalledBody struct{ sent bool }

func (b *stalledBody) Read(p []byte) (int, error) {
	if !b.sent {
		b.sent = true
		return copy(p, `{"model":"x",`), nil
	}
	return 0, errors.New("client stalled")
}

// TestReadBodyDoesNotTrustContentLength: a declared Content-Length of 32 MiB with a few bytes
// behind it does not make readBody allocate 32 MiB up front.
func TestReadBodyDoesNotTrustContentLength(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/v1/messages", io.NopCloser(&stalledBody{}))
	r.ContentLength = 32 << 20
	got, err := readBody(r, 32<<20)
	if err == nil || len(got) == 0 {
		t.Fatalf("%d bytes, err %v", len(got), err)
	}
	if cap(got) > maxPreGrow+bytes.MinRead {
		t.Fatalf("a declared Content-Length made readBody hold %d bytes before they arrived", cap(got))
	}
}

// TestBodyReadTimeout: a client that declares a body and stops sending it gets a 408 once
// BodyReadTimeout passed, instead of holding the connection (and its buffer) forever.
func TestBodyReadTimeout(t *testing.T) {
	r := newRig(t, nil, nil, func(o *Options) { o.BodyReadTimeout = 100 * time.Millisecond })
	conn, err := net.Dial("tcp", strings.TrimPrefix(r.http.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"model\":", 32<<20)
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second)) // only so a failing test ends
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no response to a stalled body: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || resp.Header.Get("X-Condense-Error") != "body_read_timeout" {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if n := len(r.up.Requests()); n != 0 {
		t.Fatalf("%d requests reached upstream", n)
	}

	// The bound covers the body only: a response that takes longer is relayed whole.
	release := make(chan struct{})
	r.up.Enqueue(upstreamfake.Reply{Text: "slow but whole", Hold: release})
	go func() { time.Sleep(300 * time.Millisecond); close(release) }()
	m := aTurn(t, r.anthropic("slow"), []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}, true)
	if len(m.Content) != 1 || m.Content[0].Text != "slow but whole" {
		t.Fatalf("%+v", m.Content)
	}
}
