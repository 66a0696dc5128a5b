package proxy

import (
	"io"
	"net/http"
	"testing"

	"github.com/condense-dev/condense/internal/upstreamfake"
)

// TestProbesAnsweredByTheProxy: GET / and HEAD / — Claude Code's probe carries no provider
// header — are answered 200 by the proxy itself, whatever headers they carry, and reach no
// upstream.
func TestProbesAnsweredByTheProxy(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	for _, tc := range []struct {
		method string
		hdr    map[string]string
	}{
		{http.MethodHead, nil},
		{http.MethodGet, nil},
		{http.MethodHead, map[string]string{"anthropic-version": "2023-06-01", "x-api-key": "k"}},
		{http.MethodGet, map[string]string{"authorization": "Bearer sk"}},
	} {
		req, _ := http.NewRequest(tc.method, r.http.URL+"/", nil)
		for k, v := range tc.hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || tc.method == http.MethodGet && string(b) != "condense proxy\n" {
			t.Fatalf("%s / %v: %d %q", tc.method, tc.hdr, resp.StatusCode, b)
		}
	}
	if n := len(r.up.Requests()); n != 0 {
		t.Fatalf("%d probes reached upstream", n)
	}
}

// TestOtherPathsKeepTheirPath: a path the proxy does not serve goes to the upstream of its
// format with its path and query as sent: Anthropic's base URL followed by the path; for
// OpenAI a path under /v1 maps onto the base URL (which includes /v1, here under a prefix),
// any other path goes to the base URL's origin unchanged — never /v1 prepended.
func TestOtherPathsKeepTheirPath(t *testing.T) {
	oa := upstreamfake.Start()
	t.Cleanup(oa.Close)
	r := newRig(t, nil, nil, func(o *Options) { o.OpenAIBaseURL = oa.URL + "/gateway/v1" })
	for _, tc := range []struct {
		path   string
		hdr    map[string]string
		up     *upstreamfake.Server
		wanted string
	}{
		{"/foo/bar?x=1", nil, oa, "/foo/bar?x=1"},
		{"/v1/models?limit=2", nil, oa, "/gateway/v1/models?limit=2"},
		{"/v1", nil, oa, "/gateway/v1"},
		{"/v1beta/thing", map[string]string{"authorization": "Bearer sk"}, oa, "/v1beta/thing"},
		{"/foo/bar", map[string]string{"anthropic-version": "2023-06-01"}, r.up, "/foo/bar"},
		{"/v1/models", map[string]string{"x-api-key": "k"}, r.up, "/v1/models"},
	} {
		req, _ := http.NewRequest(http.MethodGet, r.http.URL+tc.path, nil)
		for k, v := range tc.hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		rec, ok := tc.up.Last()
		got := rec.Path
		if rec.RawQuery != "" {
			got += "?" + rec.RawQuery
		}
		if !ok || got != tc.wanted {
			t.Fatalf("%s %v reached %q (recorded: %v), want %q", tc.path, tc.hdr, got, ok, tc.wanted)
		}
		oa.Reset()
		r.up.Reset()
	}
}
