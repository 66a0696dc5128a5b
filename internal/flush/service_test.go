package flush

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/condense-dev/condense/internal/config"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestRunService(t *testing.T) {
	r := newRig(t, "redis")
	t.Setenv("CONDENSE_TEST_SUMMARIZER_KEY", "sk-svc")
	cfg := config.Default()
	cfg.Store.URL = r.redis.URL()
	cfg.Summarizer.Model = "claude-haiku-4-5"
	cfg.Summarizer.BaseURL = r.up.URL
	cfg.Summarizer.APIKeyEnv = "CONDENSE_TEST_SUMMARIZER_KEY"
	cfg.Summarizer.Mode = config.SummarizerJobs
	cfg.Engine.ChainCompression.Enabled = false
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ml, hl := listen(t), listen(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- RunService(ctx, cfg, ServiceOptions{Consumer: "svc", MetricsListener: ml, HealthListener: hl, Log: quiet,
			Worker: func(w *Worker) { w.Block = 50 * time.Millisecond }})
	}()
	base := "http://" + hl.Addr().String()
	waitFor(t, func() bool { c, _ := get(t, base+"/readyz"); return c == 200 })
	if c, body := get(t, base+"/healthz"); c != 200 || body != "ok\n" {
		t.Fatalf("healthz %d %q", c, body)
	}

	q := NewQueue(r.rdb, "")
	j := job("svc-session", "svc", 2)
	if _, err := q.Enqueue(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	if st := waitState(t, q, j, 10*time.Second); st.State != StateDone || st.Result.Outcome != OutcomeFlushed {
		t.Fatalf("status %+v", st)
	}
	last, _ := r.up.Last()
	if last.Header.Get("x-api-key") != "sk-svc" {
		t.Fatalf("summarizer key %q", last.Header.Get("x-api-key"))
	}
	_, metrics := get(t, "http://"+ml.Addr().String()+"/metrics")
	for _, want := range []string{
		`condense_flushes_total{outcome="flushed"} 1`,
		`condense_flush_jobs_total{event="done"} 1`,
		`condense_summarizer_calls_total{fallback="false",model="anthropic/claude-haiku-4-5"} 2`,
		`condense_flush_queue_stream_length 0`,
		`condense_flush_dead_letter_count 0`,
		`condense_summarizer_cost_usd_total{model="anthropic/claude-haiku-4-5"}`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RunService did not stop")
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Fatal("health server still up after shutdown")
	}
}

func TestRunServiceRefusesNonRedisStore(t *testing.T) {
	cfg := config.Default()
	cfg.Store.URL = "memory:"
	err := RunService(context.Background(), cfg, ServiceOptions{Log: quiet})
	if err == nil || !strings.Contains(err.Error(), "need a Redis store") {
		t.Fatalf("err %v", err)
	}
}
