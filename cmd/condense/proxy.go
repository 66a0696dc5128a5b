package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/condense-dev/condense/internal/config"
	"github.com/condense-dev/condense/internal/proxy"
)

func init() {
	var cfgFile, listen, anthropicURL, openaiURL, storeURL, pprofAddr string
	cmd := &cobra.Command{
		Use:   "proxy [--config FILE]",
		Short: "Run the pruning proxy (Anthropic Messages and OpenAI Chat Completions compatible)",
		Long: `Proxy serves POST /v1/messages, /v1/messages/count_tokens and /v1/chat/completions: it
loads the session's pruning state, forwards a pruned request to the provider, relays the
response (SSE event by event), answers context_tree_query calls itself and starts flushes.
Any other path passes through untouched. Point an agent's base URL at it.

Without --config every default applies (embedded in-memory store, extractive summarizer,
upstreams api.anthropic.com and api.openai.com). Flags override the file. Metrics are served
at /metrics on listen.metrics, /healthz, /readyz and /storez (the store's
reachability; readiness does not depend on it: the proxy fails open) on listen.health and on
the proxy port.

The admin API (/admin/sessions/{id}, .../records/{ref}, POST .../flush) is served on
listen.health only (default :8081; keep it internal), unless listen.adminOnProxyPort also
serves it on the proxy port. /mcp (context_tree_query over MCP) is on the proxy port; without
sessionAuth any client reaching that port can query any session it can name, and the proxy
logs a warning saying so at startup.

A request body must arrive within limits.bodyReadTimeout (default 5m; 408 otherwise), and the
body buffer grows as bytes arrive (at most 1 MiB ahead of them), whatever Content-Length
says; idle client connections close after limits.idleConnTimeout (default 5m). Upstream, the
provider's response headers must come within limits.upstreamHeaderTimeout (default 15m, else
502), each read of its body within limits.upstreamIdleTimeout (default 10m), and a JSON answer
or one streamed event may not exceed limits.maxResponseBytes (default 64 MiB); a response cut
short by them ends like a broken one (502, or an aborted stream) and is counted in
condense_upstream_limits_total.

In-process flushes run at most GOMAXPROCS/2 at a time, on OS threads at nice +10 (Linux), so
request handling gets the CPU first when it is scarce; the proxy then adds that many slots to
GOMAXPROCS (unless GOMAXPROCS is set or a container CPU limit holds it below the machine's
CPUs), so a running flush never holds a Go scheduler slot the request path needs. Memory: the live heap is mostly the
per-session parse cache (each session's last request with the memory it keeps alive: its
body, the body each session last had parsed whole, copies of the messages parsed since,
decoded strings and parsed values; at most limits.parseCacheBytes, default 512 MiB) and
decoded session states; the Go defaults
(GOGC=100) apply, and in "make loadtest" garbage collection was not a source of added latency
(docs/performance.md, "Proxy load"). In a container with a memory limit, set GOMEMLIMIT to
about 90% of it so the collector works harder before the pod runs out of memory (the operator
does so in the pods it runs).

With --pprof ADDR the Go profiler (net/http/pprof: /debug/pprof/profile, /heap, /trace, ...)
is served on its own listener; it is off by default and must only listen on a trusted address.
See docs/proxy.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := config.Default()
			if cfgFile != "" {
				var err error
				if cfg, err = config.Load(cfgFile); err != nil {
					return err
				}
			}
			if listen != "" {
				cfg.Listen.Proxy = listen
			}
			if anthropicURL != "" {
				cfg.Upstreams.Anthropic = anthropicURL
			}
			if openaiURL != "" {
				cfg.Upstreams.OpenAI = openaiURL
			}
			if storeURL != "" {
				cfg.Store.URL, cfg.Store.URLEnv = storeURL, ""
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("component", "proxy")
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if pprofAddr != "" {
				closePprof, err := servePprof(pprofAddr, log)
				if err != nil {
					return err
				}
				defer closePprof()
			}
			return proxy.Run(ctx, cfg, proxy.RunOptions{Log: log})
		},
	}
	cmd.Flags().StringVar(&cfgFile, "config", "", "condense configuration file (condense.dev/config/v1, YAML or JSON)")
	cmd.Flags().StringVar(&listen, "listen", "", "proxy listen address (overrides listen.proxy)")
	cmd.Flags().StringVar(&anthropicURL, "anthropic-upstream", "", "Anthropic API base URL (overrides upstreams.anthropic)")
	cmd.Flags().StringVar(&openaiURL, "openai-upstream", "", "OpenAI API base URL including /v1 (overrides upstreams.openai)")
	cmd.Flags().StringVar(&storeURL, "store", "", "store URL: memory:, bolt:PATH, redis://... (overrides store.url)")
	cmd.Flags().StringVar(&pprofAddr, "pprof", "", "serve net/http/pprof on this address (off by default; e.g. 127.0.0.1:6060)")
	rootCmd.AddCommand(cmd)
}

// servePprof serves the Go profiler's handlers on their own listener and logs the address
// ("listening", what=pprof); the returned function closes it.
func servePprof(addr string, log *slog.Logger) (func(), error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("proxy: listen %s (pprof): %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	log.Info("listening", "what", "pprof", "addr", l.Addr().String())
	return func() { _ = srv.Close() }, nil
}
