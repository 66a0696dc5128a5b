package proxy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/condense-dev/condense/internal/config"
	"github.com/condense-dev/condense/internal/flush"
	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/summarize"
)

// FlushNice is how much lower than the request path's the OS scheduling priority of in-process
// flushes is (Linux nice increment of their threads; see flush.InProcess.Nice).
const FlushNice = 10

// RunOptions tunes Run.
type RunOptions struct {
	// ProxyListener, MetricsListener and HealthListener replace listening on the configured
	// addresses when set (tests pass 127.0.0.1:0 listeners).
	ProxyListener, MetricsListener, HealthListener net.Listener
	// Log is the logger (nil: slog.Default()).
	Log *slog.Logger
	// Ready, when set, is called with the proxy's address once it serves.
	Ready func(addr string)
	// Drained, when set, is called when Run has stopped: with what was under way when it
	// began to drain, and the error that cut the drain short (nil: everything ended).
	Drained func(underway Drain, err error)
}

// OptionsFromConfig maps a configuration document to Options (without Store, Flusher and
// Logger, which Run builds).
func OptionsFromConfig(cfg *config.Config) (Options, error) {
	o := Options{
		AnthropicBaseURL:      cfg.Upstreams.Anthropic,
		OpenAIBaseURL:         cfg.Upstreams.OpenAI,
		Policy:                flush.PolicyFromConfig(cfg.Engine),
		MaxBodyBytes:          cfg.Limits.MaxBodyBytes,
		FlushWaitTimeout:      cfg.Limits.FlushWaitTimeout.D(),
		IdleFlushWait:         idleFlushWait(cfg),
		MaxRecoveryRounds:     cfg.Limits.MaxRecoveryRounds,
		SlowRequestLog:        cfg.Limits.SlowRequestLog.D(),
		AdminOnProxyPort:      cfg.Listen.AdminOnProxyPort,
		BodyReadTimeout:       orNone(cfg.Limits.BodyReadTimeout.D()),
		MaxResponseBytes:      cfg.Limits.MaxResponseBytes,
		ParseCacheBytes:       parseCacheBytes(cfg.Limits.ParseCacheBytes),
		UpstreamHeaderTimeout: orNone(cfg.Limits.UpstreamHeaderTimeout.D()),
		UpstreamIdleTimeout:   orNone(cfg.Limits.UpstreamIdleTimeout.D()),
		Trigger: Trigger{
			OnDemand:   cfg.Engine.Trigger.Mode == config.TriggerOnDemand,
			CacheAware: cfg.Engine.Trigger.CacheAware,
			MidRun:     cfg.Engine.Trigger.MidRun,
			GraceTurns: cfg.Engine.Trigger.MidRunGraceTurns,
			Horizon:    cfg.Engine.Trigger.Horizon,
			MaxHorizon: cfg.Engine.Trigger.MaxHorizon,
		},
	}
	if v := cfg.Engine.Trigger.AutoBudgetThreshold; v != nil {
		o.Trigger.BudgetThreshold = *v
	}
	if v := cfg.Engine.Trigger.BudgetTurnDelta; v != nil {
		o.Trigger.TurnDelta = *v
	}
	if cfg.SessionAuth.Enabled {
		secret, err := cfg.SessionAuth.Secret()
		if err != nil {
			return o, err
		}
		if len(secret) == 0 {
			return o, errors.New("proxy: sessionAuth.enabled but the secret file is empty")
		}
		o.SessionSecret = secret
	}
	return o, nil
}

// drainGrace bounds how long Run waits, once its context ended, for in-flight requests and
// in-process flushes.
const drainGrace = 30 * time.Second

// Run runs `condense proxy` (store, flusher, proxy, metrics and health listeners) until ctx
// ends, then lets in-flight requests finish (up to drainGrace) and in-process flushes end.
func Run(ctx context.Context, cfg *config.Config, ro RunOptions) error {
	log := ro.Log
	if log == nil {
		log = slog.Default()
	}
	opt, err := OptionsFromConfig(cfg)
	if err != nil {
		return err
	}
	opt.Logger = log
	storeURL, err := cfg.Store.ResolvedURL()
	if err != nil {
		return err
	}
	st, err := store.Open(ctx, storeURL)
	if err != nil {
		return fmt.Errorf("proxy: open store %s: %w", store.Describe(storeURL), err)
	}
	defer st.Close()
	opt.Store = st

	px, err := New(opt)
	if err != nil {
		return err
	}
	defer px.Close()
	fm := flush.NewMetrics(px.Registry())
	var inproc *flush.InProcess
	if cfg.Summarizer.Mode == config.SummarizerJobs {
		if !strings.HasPrefix(storeURL, "redis") {
			return errors.New("proxy: summarizer.mode jobs needs a Redis store")
		}
		rdb, prefix, err := flush.RedisFromURL(storeURL)
		if err != nil {
			return err
		}
		defer rdb.Close()
		q := flush.NewQueue(rdb, prefix)
		q.Metrics = fm
		px.opt.Flusher = q
	} else {
		sum, err := summarize.FromConfig(cfg, summarize.Options{OnEvent: fm.FallbackEvent})
		if err != nil {
			return fmt.Errorf("proxy: summarizer: %w", err)
		}
		// At most half the CPUs flush at once, on threads of lower priority, so the
		// latency-critical request path keeps the rest and wins when the CPUs are busy.
		slots := max(1, runtime.GOMAXPROCS(0)/2)
		if procs, ok := flushProcs(slots); ok {
			runtime.GOMAXPROCS(procs)
			log.Info("scheduler slots for the request path and flushes", "gomaxprocs", procs, "flushSlots", slots)
		}
		inproc = &flush.InProcess{MaxConcurrent: slots, Nice: FlushNice, Orch: &flush.Orchestrator{Store: st, Planner: flush.EnginePlanner{Policy: opt.Policy},
			Summarizer: sum, Metrics: fm, Log: log}}
		px.opt.Flusher = inproc
	}

	var servers []*http.Server
	errc := make(chan error, 3)
	serve := func(l net.Listener, addr string, h http.Handler, name string) error {
		if l == nil {
			if addr == "" {
				return nil
			}
			if l, err = net.Listen("tcp", addr); err != nil {
				return fmt.Errorf("proxy: listen %s (%s): %w", addr, name, err)
			}
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: cfg.Limits.IdleConnTimeout.D()}
		servers = append(servers, srv)
		go func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("proxy: %s server: %w", name, err)
			}
		}()
		log.Info("listening", "what", name, "addr", l.Addr().String())
		if name == "proxy" && ro.Ready != nil {
			ro.Ready(l.Addr().String())
		}
		return nil
	}
	health := http.NewServeMux()
	health.HandleFunc("/healthz", px.ServeHTTP)
	health.HandleFunc("/readyz", px.ServeHTTP)
	health.HandleFunc("/storez", px.ServeHTTP)
	health.Handle("/admin/", px.AdminHandler())
	warnUnauthenticated(log, cfg)
	metrics := http.NewServeMux()
	metrics.Handle("/metrics", px.MetricsHandler())
	defer func() {
		underway := px.Underway()
		c, cancel := context.WithTimeout(context.Background(), drainGrace)
		defer cancel()
		var err error
		for _, s := range servers {
			err = cmp.Or(err, s.Shutdown(c))
		}
		if inproc != nil {
			err = cmp.Or(err, inproc.Close(c))
		}
		_ = px.Close() // the requests' background tasks
		if ro.Drained != nil {
			ro.Drained(underway, err)
		}
	}()
	if err := serve(ro.ProxyListener, cfg.Listen.Proxy, px, "proxy"); err != nil {
		return err
	}
	if err := serve(ro.MetricsListener, cfg.Listen.Metrics, metrics, "metrics"); err != nil {
		return err
	}
	if err := serve(ro.HealthListener, cfg.Listen.Health, health, "health"); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-errc:
		return err
	}
}

// idleFlushWait is how long a request of a session whose prompt cache expired waits for its
// due flush: limits.flushWaitTimeout, else DefaultIdleFlushWait, for an LLM summarizer; at
// least ExtractiveIdleFlushWait for the extractive one.
func idleFlushWait(cfg *config.Config) time.Duration {
	wait := cfg.Limits.FlushWaitTimeout.D()
	if m := strings.TrimSpace(cfg.Summarizer.Model); m == "" || m == summarize.ExtractiveModel {
		return max(wait, ExtractiveIdleFlushWait)
	}
	if wait > 0 {
		return wait
	}
	return DefaultIdleFlushWait
}

// orNone maps a configured timeout to an Options one: 0 (disabled) becomes -1 (no bound),
// since 0 in Options means the default.
func orNone(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// parseCacheBytes maps limits.parseCacheBytes (0 remembers none) to Options.ParseCacheBytes
// (negative remembers none).
func parseCacheBytes(n int64) int {
	if n == 0 {
		return -1
	}
	return int(min(n, math.MaxInt))
}

// warnUnauthenticated logs, at startup, what any client reaching the proxy port can read
// while session auth is off: every session's records through /mcp (it names the session
// itself), and with listen.adminOnProxyPort the whole admin API.
func warnUnauthenticated(log *slog.Logger, cfg *config.Config) {
	if cfg.SessionAuth.Enabled {
		return
	}
	log.Warn("sessionAuth is off: any client that reaches the proxy port can query the records of any session it can name through /mcp; enable sessionAuth to require each session's token")
	if cfg.Listen.AdminOnProxyPort {
		log.Warn("listen.adminOnProxyPort without sessionAuth: any client that reaches the proxy port can read every session and start flushes through /admin")
	}
}

// flushProcs returns the GOMAXPROCS for a proxy running up to slots in-process flushes on
// lowered-priority threads: the default plus slots; ok is false (leave it alone) when the user
// set GOMAXPROCS, a CPU limit lowers the default, or thread priorities cannot be lowered.
func flushProcs(slots int) (procs int, ok bool) {
	return flushProcsFor(slots, os.Getenv("GOMAXPROCS"), runtime.GOMAXPROCS(0), runtime.NumCPU())
}

func flushProcsFor(slots int, env string, procs, cpus int) (int, bool) {
	if env != "" || procs < cpus || !flush.LowersThreadPriority || FlushNice <= 0 {
		return 0, false
	}
	return procs + slots, true
}
