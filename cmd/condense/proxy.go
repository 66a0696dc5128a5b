package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/condense-dev/condense/internal/config"
	"github.com/condense-dev/condense/internal/proxy"
)

func init() {
	var cfgFile, listen, anthropicURL, openaiURL, storeURL string
	cmd := &cobra.Command{
		Use:   "proxy [--config FILE]",
		Short: "Run the pruning proxy (Anthropic Messages and OpenAI Chat Completions compatible)",
		Long: `Proxy serves POST /v1/messages, /v1/messages/count_tokens and /v1/chat/completions: it
loads the session's pruning state, forwards a pruned request to the provider, relays the
response (SSE event by event), answers context_tree_query calls itself and starts flushes.
Any other path passes through untouched. Point an agent's base URL at it.

Without --config every default applies (embedded in-memory store, extractive summarizer,
upstreams api.anthropic.com and api.openai.com). Flags override the file. Metrics are served
at /metrics on listen.metrics, /healthz and /readyz on listen.health and on the proxy port.
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
			return proxy.Run(ctx, cfg, proxy.RunOptions{Log: log})
		},
	}
	cmd.Flags().StringVar(&cfgFile, "config", "", "condense configuration file (condense.dev/config/v1, YAML or JSON)")
	cmd.Flags().StringVar(&listen, "listen", "", "proxy listen address (overrides listen.proxy)")
	cmd.Flags().StringVar(&anthropicURL, "anthropic-upstream", "", "Anthropic API base URL (overrides upstreams.anthropic)")
	cmd.Flags().StringVar(&openaiURL, "openai-upstream", "", "OpenAI API base URL including /v1 (overrides upstreams.openai)")
	cmd.Flags().StringVar(&storeURL, "store", "", "store URL: memory:, bolt:PATH, redis://... (overrides store.url)")
	rootCmd.AddCommand(cmd)
}
