package proxy

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"

	"github.com/condense-dev/condense/internal/config"
	"github.com/condense-dev/condense/internal/upstreamfake"
)

// adminURL serves the rig's admin API on a listener of its own, as Run does on the health
// port, and returns its base URL.
func adminURL(t *testing.T, r *rig) string {
	t.Helper()
	srv := httptest.NewServer(r.px.AdminHandler())
	t.Cleanup(srv.Close)
	return srv.URL
}

func httpDo(t *testing.T, method, url string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestAdminNotOnProxyPort: by default the proxy port does not serve the admin API (nor
// forwards it upstream); the admin handler, mounted on the health port, does.
func TestAdminNotOnProxyPort(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	conversation(t, r, "admin-sess", false)
	for _, p := range []struct{ method, path string }{
		{http.MethodGet, "/admin/sessions/admin-sess"},
		{http.MethodGet, "/admin/sessions/admin-sess/records/t1"},
		{http.MethodPost, "/admin/sessions/admin-sess/flush"},
	} {
		if code, b := httpDo(t, p.method, r.http.URL+p.path); code != http.StatusNotFound || !strings.Contains(string(b), "health listener") {
			t.Fatalf("%s %s on the proxy port: %d %s", p.method, p.path, code, b)
		}
	}
	for _, rec := range r.up.Requests() {
		if strings.HasPrefix(rec.Path, "/admin") {
			t.Fatalf("admin request forwarded upstream: %s", rec.Path)
		}
	}
	snap, err := r.st.Load(context.Background(), "admin-sess")
	if err != nil || snap.Stats[statFlushRequested] != 0 {
		t.Fatalf("a flush was requested through the proxy port: %v %v", snap.Stats, err)
	}
	admin := adminURL(t, r)
	if code, b := getUntil(t, admin+"/admin/sessions/admin-sess", 200); code != 200 {
		t.Fatalf("admin handler: %d %s", code, b)
	}
	if code, _ := httpDo(t, http.MethodPost, admin+"/admin/sessions/admin-sess/flush"); code != http.StatusAccepted {
		t.Fatalf("admin flush: %d", code)
	}

	opted := newRig(t, nil, nil, func(o *Options) { o.AdminOnProxyPort = true })
	conversation(t, opted, "admin-sess", false)
	if code, b := getUntil(t, opted.http.URL+"/admin/sessions/admin-sess", 200); code != 200 {
		t.Fatalf("AdminOnProxyPort: %d %s", code, b)
	}
}

// getUntil repeats a GET until it answers want (the session's stats are written in the
// background after its response) or 10 s passed, and returns the last answer.
func getUntil(t *testing.T, url string, want int) (int, []byte) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, b := httpDo(t, http.MethodGet, url)
		if code == want || time.Now().After(deadline) {
			return code, b
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRunServesAdminOnHealthPort runs the whole service: the admin API answers on the health
// listener and not on the proxy listener, and the startup log warns that /mcp answers for any
// session while sessionAuth is off.
func TestRunServesAdminOnHealthPort(t *testing.T) {
	up := upstreamfake.Start()
	defer up.Close()
	cfg := config.Default()
	cfg.Upstreams.Anthropic, cfg.Upstreams.OpenAI = up.URL, up.URL+"/v1"
	logs := &lockedBuffer{}
	pl, _, hl := startRun(t, cfg, slog.New(slog.NewJSONHandler(logs, nil)))
	c := anthropic.NewClient(aoption.WithBaseURL("http://"+pl.Addr().String()), aoption.WithAPIKey("k"), aoption.WithMaxRetries(2),
		aoption.WithHeader(HeaderSession, "run-admin"))
	if _, err := c.Messages.New(context.Background(), aParams([]anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))})); err != nil {
		t.Fatal(err)
	}
	if code, b := httpDo(t, http.MethodGet, "http://"+pl.Addr().String()+"/admin/sessions/run-admin"); code != http.StatusNotFound {
		t.Fatalf("admin on the proxy port: %d %s", code, b)
	}
	code, b := getUntil(t, "http://"+hl.Addr().String()+"/admin/sessions/run-admin", 200)
	var v SessionView
	if code != 200 || json.Unmarshal(b, &v) != nil || v.Session != "run-admin" {
		t.Fatalf("admin on the health port: %d %s", code, b)
	}
	if !strings.Contains(logs.String(), "sessionAuth is off") {
		t.Fatalf("no startup warning about /mcp without sessionAuth:\n%s", logs.String())
	}
}
