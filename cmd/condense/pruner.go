package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/condense-dev/condense/internal/config"
	"github.com/condense-dev/condense/internal/flush"
)

func init() {
	var cfgFile, consumer string
	var concurrency int
	cmd := &cobra.Command{
		Use:   "pruner --config FILE",
		Short: "Run flush workers consuming queued flush jobs from Redis",
		Long: `Pruner runs the summarizer workers of the "jobs" summarizer mode: it consumes flush jobs
that proxies enqueue on a Redis stream (consumer group condense-pruner), plans each flush with
the pruning engine, summarizes the batches with the configured summarizer, and commits the
new session state with the store's lease and compare-and-set.

Delivery is at-least-once: a worker that dies mid-job has its job reclaimed by another
worker; failed jobs are retried with exponential backoff and dead-lettered after 5 attempts.

Metrics (condense_ prefix) are served at /metrics on listen.metrics, /healthz and /readyz on
listen.health. SIGINT/SIGTERM stop fetching jobs and let running flushes finish (up to 30s)
before exiting. See docs/summarizer.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfgFile == "" {
				return fmt.Errorf("--config is required")
			}
			cfg, err := config.Load(cfgFile)
			if err != nil {
				return err
			}
			log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("component", "pruner")
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return flush.RunService(ctx, cfg, flush.ServiceOptions{Consumer: consumer, Concurrency: concurrency, Log: log})
		},
	}
	cmd.Flags().StringVar(&cfgFile, "config", "", "condense configuration file (condense.dev/config/v1, YAML or JSON)")
	cmd.Flags().StringVar(&consumer, "consumer", "", "consumer name in the Redis consumer group (default host:pid)")
	cmd.Flags().IntVar(&concurrency, "concurrency", 2, "flushes run at once")
	rootCmd.AddCommand(cmd)
}
