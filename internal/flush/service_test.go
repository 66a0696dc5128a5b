package flush

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/condense-dev/condense/internal/config"
	"github.com/condense-dev/condense/internal/store"
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
	log, buf := captureLog()
	go func() {
		done <- RunService(ctx, cfg, ServiceOptions{Consumer: "svc", MetricsListener: ml, HealthListener: hl, Log: log,
			Worker: func(w *Worker) { w.Block = 50 * time.Millisecond }})
	}()
	base := "http://" + hl.Addr().String()
	waitFor(t, func() bool { c, _ := get(t, base+"/readyz"); return c == 200 })
	// One start line names the store, the stream and both listeners.
	waitFor(t, func() bool { return len(buf.Lines("pruner: consuming flush jobs")) == 1 })
	if l := buf.Lines("pruner: consuming flush jobs")[0]; l.Get("store").Str != r.redis.URL() || l.Get("consumer").Str != "svc" ||
		l.Get("metrics").Str != ml.Addr().String() || l.Get("health").Str != hl.Addr().String() {
		t.Fatalf("start line %s", l.Raw)
	}
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

// badRedis is a TCP server standing in for a Redis in trouble: each connection is read and,
// with drop, closed at its first bytes (the server went away mid-command), else held without
// a reply (a hung server). It counts the connections made to it.
func badRedis(t *testing.T, drop bool) (addr string, conns *atomic.Int32) {
	t.Helper()
	l := listen(t)
	conns = new(atomic.Int32)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			mu.Lock()
			open = append(open, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, 4096)
				for {
					if _, err := c.Read(buf); err != nil || drop {
						c.Close()
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String(), conns
}

// TestQueueFailsFastWhenRedisFails checks that the queue's client has the store's fail-fast
// settings — a command whose connection drops is not retried (a retried MULTI could record a
// dead-letter twice) — and that Submit has a deadline of its own, so a hung Redis cannot stall
// the request that submits a flush.
func TestQueueFailsFastWhenRedisFails(t *testing.T) {
	submit := func(t *testing.T, url string) error {
		t.Helper()
		rdb, prefix, err := RedisFromURL(url)
		if err != nil {
			t.Fatal(err)
		}
		defer rdb.Close()
		done := make(chan error, 1)
		go func() { _, err := NewQueue(rdb, prefix).Submit(context.Background(), job("s1", "f", 1)); done <- err }()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			t.Fatal("Submit stalled")
			return nil
		}
	}
	t.Run("dropped", func(t *testing.T) {
		addr, conns := badRedis(t, true)
		if err := submit(t, "redis://"+addr); !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("err %v", err)
		}
		if n := conns.Load(); n != 1 {
			t.Fatalf("%d connections: the command was retried", n)
		}
	})
	t.Run("hung", func(t *testing.T) {
		addr, _ := badRedis(t, false)
		if err := submit(t, "redis://"+addr+"?read_timeout=1h&write_timeout=1h"); !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("err %v", err)
		}
	})
}
