package proxy

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/config"
)

// TestSessionTokenOnEveryPath: with session auth, paths the proxy does not prune — other
// paths, the Responses API's own paths, and a Responses request on history the provider
// holds — need the token of the session their headers name like model requests do: without
// it they are a 401 and never reach the provider; with it they pass through, the token left
// out. Probes and health endpoints need none.
func TestSessionTokenOnEveryPath(t *testing.T) {
	secret := []byte("policy-secret")
	r := newRig(t, nil, nil, func(o *Options) { o.SessionSecret = secret })
	held := `{"model":"gpt-5","previous_response_id":"resp_1","input":[{"role":"user","content":"more"}]}`
	for _, tc := range []struct{ method, path, body string }{
		{http.MethodGet, "/v1/models", ""},
		{http.MethodPost, "/v1/files", `{"purpose":"x"}`},
		{http.MethodGet, "/v1/responses/resp_1", ""},
		{http.MethodPost, "/v1/responses/compact", `{"model":"gpt-5","input":[]}`},
		{http.MethodPost, "/v1/responses", held},
	} {
		do := func(hdr map[string]string) (int, string) {
			t.Helper()
			req, _ := http.NewRequest(tc.method, r.http.URL+tc.path, strings.NewReader(tc.body))
			for k, v := range hdr {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			_, _ = io.ReadAll(resp.Body)
			return resp.StatusCode, resp.Header.Get("X-Condense-Error")
		}
		for _, hdr := range []map[string]string{
			nil, // names no session
			{HeaderSession: "alice"},
			{HeaderSession: "alice", HeaderToken: config.SessionToken(secret, "bob")},
			{HeaderToken: config.SessionToken(secret, "alice")},
		} {
			if code, cerr := do(hdr); code != http.StatusUnauthorized || cerr != "invalid_session_token" {
				t.Fatalf("%s %s with %v: %d %q, want 401", tc.method, tc.path, hdr, code, cerr)
			}
		}
		if n := len(r.up.Requests()); n != 0 {
			t.Fatalf("%s %s: %d refused requests reached upstream", tc.method, tc.path, n)
		}
		// The fake provider answers other paths with its own 404.
		if code, cerr := do(map[string]string{HeaderSession: "alice", HeaderToken: config.SessionToken(secret, "alice")}); cerr != "" {
			t.Fatalf("%s %s with alice's token: %d %q", tc.method, tc.path, code, cerr)
		}
		rec, ok := r.up.Last()
		if !ok || rec.Path != tc.path || rec.Header.Get(HeaderToken) != "" || rec.Header.Get(HeaderSession) != "" {
			t.Fatalf("%s %s: upstream got %s with token %q", tc.method, tc.path, rec.Path, rec.Header.Get(HeaderToken))
		}
		r.up.Reset()
	}
	for _, p := range []string{"/", "/healthz"} {
		resp, err := http.Get(r.http.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", p, resp.StatusCode)
		}
	}
}
