package main

import (
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/condense-dev/condense/internal/config"
	"github.com/condense-dev/condense/internal/flush"
	"github.com/condense-dev/condense/internal/store"
)

func init() {
	var cfgFile, consumer string
	var concurrency int
	cmd := &cobra.Command{
		Use:   "pruner --config FILE",
		Short: "Run flush workers consuming queued flush jobs from Redis",
		Long: `Pruner runs the summarizer workers of the "jobs" summarizer mode: it consumes the flush jobs
proxies enqueue on a Redis stream (consumer group condense-pruner), plans and summarizes each
flush and commits the new session state under the store's lease and compare-and-set.

Delivery is at-least-once: a dead worker's job is reclaimed by another; failed jobs are
retried with exponential backoff and dead-lettered after 5 attempts. SIGINT/SIGTERM stop
fetching jobs and let running flushes finish (up to 30s) before exiting.

Docs: ` + docsURL + `summarizer.md`,
		Args: positional(),
	}
	ov := overrides{fl: cmd.Flags()}
	cmd.Flags().StringVar(&cfgFile, "config", "", "condense configuration file (condense.dev/config/v1, YAML or JSON)")
	ov.addListenFlags("/healthz and /readyz")
	cmd.Flags().StringVar(&consumer, "consumer", "", "consumer name in the Redis consumer group (default host:pid)")
	cmd.Flags().IntVar(&concurrency, "concurrency", 2, "flushes run at once")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if cfgFile == "" {
			return &usageError{cmd: cmd, err: fmt.Errorf("--config is required")}
		}
		cfg, err := config.Load(cfgFile)
		if err != nil {
			return err
		}
		if err := ov.apply(cfg); err != nil {
			return err
		}
		log := slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), nil)).With("component", "pruner")
		store.LogRedisTo(log)
		log.Info("starting", "config", cfgFile, "store", describeStore(cfg.Store), "health", cfg.Listen.Health,
			"metrics", cfg.Listen.Metrics, "concurrency", concurrency)
		sd := onSignals(log)
		defer sd.Close()
		err = flush.RunService(sd.Context(), cfg, flush.ServiceOptions{Consumer: consumer, Concurrency: concurrency, Log: log})
		sd.Stopped(err)
		return err
	}
	rootCmd.AddCommand(cmd)
}
