package proxy

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/upstreamfake"
	"github.com/condense-dev/condense/internal/wire"
)

// rawConn opens a TCP connection to the rig's proxy and sends head (the request line and
// headers, without the blank line ending them) and then body.
func rawConn(t *testing.T, r *rig, head, body string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(r.http.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second)) // only so a failing test ends
	if _, err := io.WriteString(conn, head+"\r\n\r\n"+body); err != nil {
		t.Fatal(err)
	}
	return conn, bufio.NewReader(conn)
}

// readResponse reads the next response on a raw connection: its status, X-Condense-Error and
// body.
func readResponse(t *testing.T, br *bufio.Reader) (int, string, []byte) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no response: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("X-Condense-Error"), b
}

const smallBody = `{"model":"claude-test","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`

// TestDeclaredLengthOverLimitBefore100Continue: a client that sends Expect: 100-continue and
// waits for the interim response before it writes its body gets a 413 at once when the
// declared Content-Length is over maxBodyBytes — never 100 Continue, nothing read — and a
// body within the limit still gets its 100 Continue and is served.
func TestDeclaredLengthOverLimitBefore100Continue(t *testing.T) {
	r := newRig(t, nil, nil, func(o *Options) { o.MaxBodyBytes = 4096 })
	for _, declared := range []int64{4097, 100 << 30} {
		_, br := rawConn(t, r, fmt.Sprintf("POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: %d", declared), "")
		code, cerr, b := readResponse(t, br)
		if code != http.StatusRequestEntityTooLarge || cerr != "request_too_large" || !strings.Contains(string(b), "Content-Length") {
			t.Fatalf("declared %d: first response %d %q %s, want an immediate 413", declared, code, cerr, b)
		}
	}
	r.up.Enqueue(upstreamfake.Reply{Text: "served"})
	conn, br := rawConn(t, r, fmt.Sprintf("POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: %d", len(smallBody)), "")
	if code, _, _ := readResponse(t, br); code != http.StatusContinue {
		t.Fatalf("a body within the limit got %d before it was sent, want 100 Continue", code)
	}
	_, _ = io.WriteString(conn, smallBody)
	if code, _, b := readResponse(t, br); code != http.StatusOK || gjson.GetBytes(b, "content.0.text").Str != "served" {
		t.Fatalf("%d %s", code, b)
	}
	if n := len(r.up.Requests()); n != 1 {
		t.Fatalf("%d requests reached upstream, want the one within the limit", n)
	}
}

// TestShortBody: a body shorter than its declared length is answered at once when the client
// half-closes its connection (400 body_incomplete, how much came), and within
// BodyIdleTimeout when the client just stops sending (408), not after BodyReadTimeout.
func TestShortBody(t *testing.T) {
	r := newRig(t, nil, nil, func(o *Options) { o.BodyReadTimeout, o.BodyIdleTimeout = time.Hour, 200*time.Millisecond })
	conn, br := rawConn(t, r, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000", `{"model":`)
	time.Sleep(20 * time.Millisecond) // the server reads what came
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	code, cerr, b := readResponse(t, br)
	if code != http.StatusBadRequest || cerr != "body_incomplete" || !strings.Contains(string(b), "after 9 of the 1000 bytes") {
		t.Fatalf("half-closed: %d %q %s", code, cerr, b)
	}

	_, br = rawConn(t, r, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000", `{"model":`)
	code, cerr, b = readResponse(t, br)
	if code != http.StatusRequestTimeout || cerr != "body_read_timeout" || !strings.Contains(string(b), "no more of the request body for 200ms") {
		t.Fatalf("stalled: %d %q %s", code, cerr, b)
	}
	if gjson.GetBytes(b, "error.type").Str != "invalid_request_error" {
		t.Fatalf("an OpenAI client's 408 has type %q", gjson.GetBytes(b, "error.type").Str)
	}
	if n := len(r.up.Requests()); n != 0 {
		t.Fatalf("%d requests reached upstream", n)
	}
}

// encode compresses b with a Content-Encoding coding.
func encode(t *testing.T, coding string, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.WriteCloser
	switch coding {
	case "gzip":
		w = gzip.NewWriter(&buf)
	case "br":
		w = brotli.NewWriter(&buf)
	case "zstd":
		zw, err := zstd.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		w = zw
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// postEncoded posts body to path with Content-Encoding coding and returns the status, the
// X-Condense-Error code and the response body.
func postEncoded(t *testing.T, r *rig, path, coding string, body []byte) (int, string, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, r.http.URL+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", coding)
	req.Header.Set(HeaderSession, "encoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("X-Condense-Error"), b
}

// TestEncodedRequestBodies: gzip, zstd and br request bodies (Codex may send zstd) are decoded,
// pruned like any other and forwarded decoded without the Content-Encoding header; the decoded
// size counts against maxBodyBytes; a body that does not decode is a 400, an unknown coding a
// 415, and neither reaches the provider.
func TestEncodedRequestBodies(t *testing.T) {
	r := newRig(t, nil, nil, func(o *Options) { o.MaxBodyBytes = 8192 })
	plain := []byte(`{"model":"gpt-5","input":[{"role":"user","content":"hi"}],"store":false,"zzz":{"kept":[1, 2]}}`)
	for _, coding := range []string{"gzip", "zstd", "br", "identity"} {
		r.up.Enqueue(upstreamfake.Reply{Text: "decoded " + coding})
		body := plain
		if coding != "identity" {
			body = encode(t, coding, plain)
		}
		code, cerr, b := postEncoded(t, r, "/v1/responses", coding, body)
		if code != http.StatusOK || !strings.Contains(string(b), "decoded "+coding) {
			t.Fatalf("%s: %d %q %s", coding, code, cerr, b)
		}
		rec, req := lastModelRequest(t, r.up, wire.Responses)
		if rec.Header.Get("Content-Encoding") != "" || gjson.GetBytes(rec.Body, "zzz").Raw != `{"kept":[1, 2]}` || len(req.Messages) != 1 {
			t.Fatalf("%s: upstream got Content-Encoding %q and %s", coding, rec.Header.Get("Content-Encoding"), rec.Body)
		}
	}
	sent := len(r.up.Requests())
	bomb := encode(t, "gzip", []byte(`{"model":"m","messages":[{"role":"user","content":"`+strings.Repeat("0", 100_000)+`"}]}`))
	for _, tc := range []struct {
		coding string
		body   []byte
		status int
		code   string
	}{
		{"gzip", bomb, http.StatusRequestEntityTooLarge, "request_too_large"},
		{"gzip", []byte(smallBody), http.StatusBadRequest, "body_decode_failed"},
		{"zstd", []byte(smallBody), http.StatusBadRequest, "body_decode_failed"},
		{"compress", []byte(smallBody), http.StatusUnsupportedMediaType, "unsupported_content_encoding"},
	} {
		if len(tc.body) > 8192 {
			t.Fatalf("the %s body is not small: %d bytes", tc.code, len(tc.body))
		}
		code, cerr, b := postEncoded(t, r, "/v1/messages", tc.coding, tc.body)
		if code != tc.status || cerr != tc.code || gjson.GetBytes(b, "error.message").Str == "" {
			t.Fatalf("%s %s: %d %q %s", tc.coding, tc.code, code, cerr, b)
		}
	}
	if n := len(r.up.Requests()); n != sent {
		t.Fatalf("%d refused requests reached upstream", n-sent)
	}
}

// TestDuplicateTopLevelMembersRefused: a body naming a top-level member twice — the proxy
// would prune one copy while the provider may read the other — is a 400 naming the member,
// in each format, and nothing is forwarded.
func TestDuplicateTopLevelMembersRefused(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	for _, tc := range []struct{ path, body, member string }{
		{"/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"a"}],"messages":[{"role":"user","content":"b"}]}`, "messages"},
		{"/v1/chat/completions", `{"model":"a","messages":[{"role":"user","content":"a"}],"model":"b"}`, "model"},
		{"/v1/responses", `{"model":"m","input":"a","input":[{"role":"user","content":"b"}]}`, "input"},
		{"/v1/messages/count_tokens", `{"model":"m","messages":[{"role":"user","content":"a"}],"m\u0065ssages":[]}`, "messages"},
	} {
		resp, b := post(t, r.http.URL+tc.path, tc.body, map[string]string{HeaderSession: "dups"})
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("X-Condense-Error") != "duplicate_member" ||
			!strings.Contains(gjson.GetBytes(b, "error.message").Str, `"`+tc.member+`"`) {
			t.Fatalf("%s: %d %s", tc.path, resp.StatusCode, b)
		}
	}
	if n := len(r.up.Requests()); n != 0 {
		t.Fatalf("%d requests with duplicate members reached upstream", n)
	}
}
