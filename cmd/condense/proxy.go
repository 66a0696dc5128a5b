package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/spf13/cobra"

	"github.com/condense-dev/condense/internal/config"
	"github.com/condense-dev/condense/internal/proxy"
	"github.com/condense-dev/condense/internal/store"
)

func init() {
	var cfgFile, pprofAddr string
	cmd := &cobra.Command{
		Use:   "proxy [--config FILE]",
		Short: "Run the pruning proxy (Anthropic Messages, OpenAI Chat Completions and Responses)",
		Long: `Proxy serves the Anthropic Messages API (/v1/messages, count_tokens), OpenAI Chat
Completions (/v1/chat/completions) and the OpenAI Responses API (/v1/responses): it prunes
each request with its session's state, forwards it, relays the response and starts flushes.
Other paths pass through with their path unchanged; GET / and HEAD / are answered.
Point an agent's base URL at it.

Without --config every default applies (in-memory store, extractive summarizer, the public
provider APIs); flags override the file. The health port also serves the admin API, which
reads any session: outside a cluster keep it on loopback (--health-listen 127.0.0.1:8081).
Limits, flush scheduling, memory and logs: docs/proxy.md and docs/operations.md.

Docs: ` + docsURL + `proxy.md`,
		Args: positional(),
	}
	ov := overrides{fl: cmd.Flags()}
	cmd.Flags().StringVar(&cfgFile, "config", "", "condense configuration file (condense.dev/config/v1, YAML or JSON)")
	ov.add("listen", "listen.proxy", "proxy listen address (overrides listen.proxy)",
		func(c *config.Config, v string) { c.Listen.Proxy = v })
	ov.addListenFlags("/healthz, /readyz, /storez and the admin API")
	ov.add("anthropic-upstream", "upstreams.anthropic", "Anthropic API base URL (overrides upstreams.anthropic)",
		func(c *config.Config, v string) { c.Upstreams.Anthropic = v })
	ov.add("openai-upstream", "upstreams.openai", "OpenAI API base URL including /v1 (overrides upstreams.openai)",
		func(c *config.Config, v string) { c.Upstreams.OpenAI = v })
	ov.add("store", "store.url", "store URL: memory:, bolt:PATH, redis://... (overrides store.url)",
		func(c *config.Config, v string) { c.Store.URL, c.Store.URLEnv = v, "" })
	cmd.Flags().StringVar(&pprofAddr, "pprof", "", "serve net/http/pprof on this address (off by default; e.g. 127.0.0.1:6060)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg := config.Default()
		if cfgFile != "" {
			var err error
			if cfg, err = config.Load(cfgFile); err != nil {
				return err
			}
		}
		if err := ov.apply(cfg); err != nil {
			return err
		}
		log := slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), nil)).With("component", "proxy")
		store.LogRedisTo(log)
		log.Info("starting", "config", cfgFile, "proxy", cfg.Listen.Proxy, "health", cfg.Listen.Health,
			"metrics", cfg.Listen.Metrics, "pprof", pprofAddr, "store", describeStore(cfg.Store), "summarizer", cfg.Summarizer.Mode)
		sd := onSignals(log)
		defer sd.Close()
		if pprofAddr != "" {
			closePprof, err := servePprof(pprofAddr, log)
			if err != nil {
				return err
			}
			defer closePprof()
		}
		var drained []any
		err := proxy.Run(sd.Context(), cfg, proxy.RunOptions{Log: log, Drained: func(d proxy.Drain, err error) {
			drained = []any{"requests", d.Requests, "background", d.Background, "flushes", d.Flushes, "complete", err == nil}
		}})
		sd.Stopped(err, drained...)
		return err
	}
	rootCmd.AddCommand(cmd)
}

// describeStore names the configured store for logs, its password masked.
func describeStore(s config.Store) string {
	u, err := s.ResolvedURL()
	if err != nil {
		return "$" + s.URLEnv + " (unset)"
	}
	return store.Describe(u)
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
