package proxy

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/testutil/logbuf"
	"github.com/condense-dev/condense/internal/upstreamfake"
)

// TestOneLogLinePerRequest: every request the proxy answers — relayed, refused by the proxy,
// failed at the provider, passed through, a probe — is logged in exactly one "request" line
// at a level by outcome, with its durations in milliseconds under *Ms keys.
func TestOneLogLinePerRequest(t *testing.T) {
	log, buf := logbuf.JSON(slog.LevelInfo)
	r := newRig(t, nil, nil, func(o *Options) { o.Logger = log })
	const turn = `{"model":"claude-sonnet-4-5","max_tokens":64,"tools":[{"name":"bash","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"hi"}]}`
	r.up.Enqueue(upstreamfake.Reply{Text: "hello"}, upstreamfake.Reply{Status: 529, ErrorType: "overloaded_error", ErrorMessage: "busy"})
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		level                    string
		check                    func(l gjson.Result) bool
	}{
		{"relayed", "POST", "/v1/messages", turn, 200, "INFO", func(l gjson.Result) bool { return l.Get("bytesBefore").Int() > 0 }},
		{"provider error", "POST", "/v1/messages", turn, 529, "ERROR", nil},
		{"malformed", "POST", "/v1/messages", `{"messages":[`, 400, "WARN", func(l gjson.Result) bool { return l.Get("proxyError").Str == "malformed_request" }},
		{"duplicate member", "POST", "/v1/messages", `{"model":"m","max_tokens":1,"messages":[],"messages":[]}`, 400, "WARN",
			func(l gjson.Result) bool { return l.Get("proxyError").Str == "duplicate_member" }},
		{"pass-through", "GET", "/v1/files?limit=1", "", 404, "WARN", func(l gjson.Result) bool { return l.Get("path").Str == "/v1/files" }},
		{"probe", "HEAD", "/", "", 200, "INFO", func(l gjson.Result) bool { return l.Get("endpoint").Str == "probe" }},
	} {
		before := len(buf.Lines("request"))
		var body io.Reader
		if tc.body != "" {
			body = strings.NewReader(tc.body)
		}
		req, _ := http.NewRequest(tc.method, r.http.URL+tc.path, body)
		req.Header.Set("anthropic-version", "2023-06-01")
		req.Header.Set("X-Condense-Session", "sess-log")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Fatalf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.status)
		}
		r.settle()
		lines := buf.Lines("request")[before:]
		if len(lines) != 1 {
			t.Fatalf("%s: %d request lines, want 1:\n%s", tc.name, len(lines), buf.String())
		}
		l := lines[0]
		if l.Get("level").Str != tc.level || l.Get("status").Int() != int64(tc.status) || l.Get("ms").Type != gjson.Number {
			t.Fatalf("%s: line %s, want level %s status %d and ms", tc.name, l.Raw, tc.level, tc.status)
		}
		if tc.check != nil && !tc.check(l) {
			t.Fatalf("%s: line %s", tc.name, l.Raw)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		gjson.Parse(line).ForEach(func(k, v gjson.Result) bool {
			if strings.HasSuffix(k.Str, "_ms") || k.Str == "duration" || strings.HasSuffix(k.Str, "Ms") && v.Type != gjson.Number {
				t.Errorf("a duration must be a number under a *Ms key: %s in %s", k.Str, line)
			}
			return true
		})
	}
}
