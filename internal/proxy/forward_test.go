package proxy

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/condense-dev/condense/internal/upstreamfake"
	"github.com/condense-dev/condense/internal/wire"
)

// TestForwardSendsSegmentsAsOneBody checks the upstream request built from a body in
// segments: its length, a body that reads as their concatenation, a GetBody that starts over
// (for the transport's resend), and that the upstream receives exactly those bytes.
func TestForwardSendsSegmentsAsOneBody(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	segs := wire.Segments{
		[]byte(`{"model":"claude-test","max_tokens":16,`),
		[]byte(`"messages":[{"role":"user","content":"`), bytes.Repeat([]byte("a"), 3000), []byte(`"}]`),
		[]byte(`}`),
	}
	want := segs.Bytes()
	tn := &turn{f: wire.Anthropic, path: "/v1/messages", hdr: http.Header{"X-Api-Key": {"k"}, "Anthropic-Version": {"2023-06-01"}}}
	up, err := r.px.upstreamRequest(context.Background(), tn, segs)
	if err != nil {
		t.Fatal(err)
	}
	if up.ContentLength != int64(len(want)) {
		t.Fatalf("ContentLength %d, want %d", up.ContentLength, len(want))
	}
	for i := 0; i < 2; i++ {
		rc, err := up.GetBody()
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := io.ReadAll(rc); !bytes.Equal(b, want) {
			t.Fatalf("GetBody #%d read %d bytes, want the %d of the segments", i, len(b), len(want))
		}
	}
	if b, _ := io.ReadAll(up.Body); !bytes.Equal(b, want) {
		t.Fatal("Body does not read as the segments' concatenation")
	}

	resp, err := r.px.send(context.Background(), tn, segs)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	got, ok := r.up.Last()
	if !ok || !bytes.Equal(got.Body, want) || got.Header.Get("X-Api-Key") != "k" {
		t.Fatalf("upstream received %d bytes (want %d), headers %v", len(got.Body), len(want), got.Header)
	}

	empty, err := r.px.upstreamRequest(context.Background(), tn, nil)
	if err != nil || empty.Body != http.NoBody || empty.ContentLength != 0 {
		t.Fatalf("an empty body must be sent as http.NoBody: %v %v %d", err, empty.Body, empty.ContentLength)
	}
}

// TestConnectionNamedHeadersNotForwarded: headers a Connection header names are hop-by-hop
// (RFC 9110 §7.6.1) and are dropped in both directions, like the fixed hop-by-hop list;
// everything else still passes.
func TestConnectionNamedHeadersNotForwarded(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	r.up.Enqueue(upstreamfake.Reply{Text: "ok", Header: http.Header{"Connection": {"X-Up-Hop"}, "X-Up-Hop": {"secret"}, "X-Up-Kept": {"yes"}}})
	resp, _ := post(t, r.http.URL+"/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
		map[string]string{"Connection": "X-Client-Hop, keep-alive", "X-Client-Hop": "secret", "X-Client-Kept": "yes"})
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	rec, _ := r.up.Last()
	if rec.Header.Get("X-Client-Hop") != "" || rec.Header.Get("X-Client-Kept") != "yes" {
		t.Fatalf("upstream got headers %v", rec.Header)
	}
	if resp.Header.Get("X-Up-Hop") != "" || resp.Header.Get("X-Up-Kept") != "yes" {
		t.Fatalf("client got headers %v", resp.Header)
	}
}
