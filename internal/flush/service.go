package flush

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/condense-dev/condense/internal/config"
	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/summarize"
)

// RedisFromURL opens a go-redis client for a Redis store URL (any form store.Open accepts),
// tuned as the store's own (store.RedisClient), and returns the store's key prefix.
func RedisFromURL(rawURL string) (redis.UniversalClient, string, error) {
	rdb, prefix, _, err := store.RedisClient(rawURL)
	if err != nil {
		return nil, "", fmt.Errorf("flush: queued flushes need a Redis store: %w", err)
	}
	return rdb, prefix, nil
}

// ServiceOptions tunes RunService.
type ServiceOptions struct {
	// Consumer names this worker in the consumer group (default host:pid).
	Consumer string
	// Concurrency is how many flushes run at once (default 2).
	Concurrency int
	// MetricsListener and HealthListener, when set, replace listening on the configured
	// addresses (tests pass 127.0.0.1:0 listeners).
	MetricsListener, HealthListener net.Listener
	// Log is the logger (nil: slog.Default()).
	Log *slog.Logger
	// HTTPClient is used for summarizer calls (nil: a plain client).
	HTTPClient *http.Client
	// Worker, when set, adjusts the worker before it starts (timeouts, backoff).
	Worker func(*Worker)
}

// RunService runs `condense pruner`: queued-flush workers on the configured Redis store, /metrics
// and /healthz, /readyz, and one log line once it consumes. It returns when ctx ends, after
// running flushes finished (or were requeued) and the servers shut down.
func RunService(ctx context.Context, cfg *config.Config, opt ServiceOptions) error {
	log := opt.Log
	if log == nil {
		log = slog.Default()
	}
	if cfg.Summarizer.Mode != config.SummarizerJobs {
		log.Warn("pruner: summarizer.mode is not \"jobs\": proxies with this configuration flush in-process and enqueue nothing", "mode", cfg.Summarizer.Mode)
	}
	storeURL, err := cfg.Store.ResolvedURL()
	if err != nil {
		return err
	}
	rdb, prefix, err := RedisFromURL(storeURL)
	if err != nil {
		return err
	}
	defer rdb.Close()
	st, err := store.Open(ctx, storeURL)
	if err != nil {
		return fmt.Errorf("pruner: open store: %w", err)
	}
	defer st.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := NewMetrics(reg)
	q := NewQueue(rdb, prefix)
	q.Metrics = m
	gauge := func(name, help string, f func(context.Context) (float64, error)) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			c, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			v, err := f(c)
			if err != nil {
				return -1
			}
			return v
		}))
	}
	gauge("condense_flush_queue_stream_length", "Jobs in the flush stream (undelivered and in progress; -1: Redis unreachable).",
		func(c context.Context) (float64, error) { s, _, err := q.Depth(c); return float64(s), err })
	gauge("condense_flush_queue_retry_length", "Jobs waiting for their retry backoff (-1: Redis unreachable).",
		func(c context.Context) (float64, error) { _, r, err := q.Depth(c); return float64(r), err })
	gauge("condense_flush_dead_letter_count", "Jobs ever dead-lettered (all workers; -1: Redis unreachable).",
		func(c context.Context) (float64, error) { n, err := q.DeadCount(c); return float64(n), err })

	sum, err := summarize.FromConfig(cfg, summarize.Options{Client: opt.HTTPClient, OnEvent: m.FallbackEvent})
	if err != nil {
		return fmt.Errorf("pruner: summarizer: %w", err)
	}
	orch := &Orchestrator{Store: st, Planner: EnginePlanner{Policy: PolicyFromConfig(cfg.Engine)}, Summarizer: sum,
		Owner: opt.Consumer, Metrics: m, Log: log}
	w := &Worker{Queue: q, Orch: orch, Consumer: opt.Consumer, Concurrency: opt.Concurrency, Log: log}
	if opt.Worker != nil {
		opt.Worker(w)
	}

	var ready atomic.Bool
	health := http.NewServeMux()
	health.HandleFunc("/healthz", func(rw http.ResponseWriter, _ *http.Request) { _, _ = rw.Write([]byte("ok\n")) })
	health.HandleFunc("/readyz", func(rw http.ResponseWriter, r *http.Request) {
		c, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		if !ready.Load() {
			http.Error(rw, "not ready: consumer group not joined", http.StatusServiceUnavailable)
			return
		}
		if err := rdb.Ping(c).Err(); err != nil {
			http.Error(rw, "not ready: redis: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = rw.Write([]byte("ok\n"))
	})
	metrics := http.NewServeMux()
	metrics.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))

	var servers []*http.Server
	var addrs []any // what, address: the start line's listeners
	serve := func(l net.Listener, addr, what string, h http.Handler) error {
		if l == nil {
			if addr == "" {
				return nil
			}
			var err error
			if l, err = net.Listen("tcp", addr); err != nil {
				return fmt.Errorf("pruner: listen %s: %w", addr, err)
			}
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		servers = append(servers, srv)
		go func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("pruner: http server", "addr", l.Addr().String(), "err", err)
			}
		}()
		addrs = append(addrs, what, l.Addr().String())
		return nil
	}
	defer func() {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, s := range servers {
			_ = s.Shutdown(c)
		}
	}()
	if err := serve(opt.MetricsListener, cfg.Listen.Metrics, "metrics", metrics); err != nil {
		return err
	}
	if err := serve(opt.HealthListener, cfg.Listen.Health, "health", health); err != nil {
		return err
	}
	go func() {
		select {
		case <-w.Ready():
			ready.Store(true)
			log.Info("pruner: consuming flush jobs", append([]any{"store", store.Describe(storeURL), "stream", q.StreamKey(),
				"group", q.Group, "consumer", w.Consumer, "concurrency", w.Concurrency}, addrs...)...)
		case <-ctx.Done():
		}
	}()
	err = w.Run(ctx)
	ready.Store(false)
	return err
}
