package proxy

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"

	"github.com/condense-dev/condense/internal/config"
	"github.com/condense-dev/condense/internal/upstreamfake"
)

// TestRunWithBoltStore runs the whole `condense proxy` service with the embedded bbolt store.
func TestRunWithBoltStore(t *testing.T) {
	up := upstreamfake.Start()
	defer up.Close()
	cfg := config.Default()
	cfg.Upstreams.Anthropic, cfg.Upstreams.OpenAI = up.URL, up.URL+"/v1"
	cfg.Store.URL = "bolt:" + filepath.Join(t.TempDir(), "state.db")
	pl, ml, hl := startRun(t, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	up.Enqueue(upstreamfake.Reply{Text: "served"})
	c := anthropic.NewClient(aoption.WithBaseURL("http://"+pl.Addr().String()), aoption.WithAPIKey("k"), aoption.WithMaxRetries(2))
	m, err := c.Messages.New(context.Background(), aParams([]anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}))
	if err != nil || m.Content[0].Text != "served" {
		t.Fatalf("%v %+v", err, m)
	}
	for _, ep := range []struct{ addr, path string }{{ml.Addr().String(), "/metrics"}, {hl.Addr().String(), "/readyz"}, {hl.Addr().String(), "/storez"}} {
		path := ep.path
		resp, err := http.Get("http://" + ep.addr + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || (path == "/metrics" && !strings.Contains(string(b), `condense_requests_total{code="200",endpoint="messages",format="anthropic"} 1`)) {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
		}
	}
}

// startRun runs Run with cfg on three loopback listeners until the test ends, and returns
// the proxy, metrics and health listeners.
func startRun(t *testing.T, cfg *config.Config, log *slog.Logger) (pl, ml, hl net.Listener) {
	t.Helper()
	listen := func() net.Listener {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	pl, ml, hl = listen(), listen(), listen()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, cfg, RunOptions{ProxyListener: pl, MetricsListener: ml, HealthListener: hl, Log: log})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(30 * time.Second):
			t.Error("Run did not return")
		}
	})
	return pl, ml, hl
}

// TestOptionsParseCacheBytes: limits.parseCacheBytes reaches the server, and 0 turns the
// parse cache off (for Options, 0 means the default).
func TestOptionsParseCacheBytes(t *testing.T) {
	for _, tc := range []struct {
		limit int64
		want  int
	}{{config.DefaultParseCacheBytes, DefaultParseCacheBytes}, {1 << 20, 1 << 20}, {0, -1}} {
		cfg := config.Default()
		cfg.Limits.ParseCacheBytes = tc.limit
		o, err := OptionsFromConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if o.ParseCacheBytes != tc.want {
			t.Errorf("limits.parseCacheBytes %d: Options.ParseCacheBytes %d, want %d", tc.limit, o.ParseCacheBytes, tc.want)
		}
	}
}
