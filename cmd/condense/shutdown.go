package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/condense-dev/condense/internal/logs"
)

// shutdown follows SIGINT and SIGTERM for a long-running command: its context ends at the
// first signal, logged as "stopping"; a second signal exits at once with status 1.
type shutdown struct {
	ctx    context.Context
	cancel context.CancelFunc
	log    *slog.Logger
	sigs   chan os.Signal
	exit   func(int) // os.Exit

	mu sync.Mutex
	at time.Time // when the first signal came (zero: none yet)
}

// onSignals starts following the signals; Close stops.
func onSignals(log *slog.Logger) *shutdown {
	s := &shutdown{log: log, sigs: make(chan os.Signal, 2), exit: os.Exit}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	signal.Notify(s.sigs, os.Interrupt, syscall.SIGTERM)
	go s.follow()
	return s
}

func (s *shutdown) follow() {
	sig, ok := <-s.sigs
	if !ok {
		return
	}
	s.mu.Lock()
	s.at = time.Now()
	s.mu.Unlock()
	s.log.Info("stopping: draining", "signal", sig.String())
	s.cancel()
	if sig, ok := <-s.sigs; ok {
		s.log.Warn("second signal: exiting without draining", "signal", sig.String())
		s.exit(1)
	}
}

// Context ends at the first signal.
func (s *shutdown) Context() context.Context { return s.ctx }

// Stopped logs, after a signal, that the command stopped, how long it drained and attrs (what
// it drained); err is what the command ended with.
func (s *shutdown) Stopped(err error, attrs ...any) {
	s.mu.Lock()
	at := s.at
	s.mu.Unlock()
	if at.IsZero() {
		return // it ended by itself, with err; main reports it
	}
	attrs = append([]any{"drainMs", logs.Ms(time.Since(at))}, attrs...)
	if err != nil {
		s.log.Error("stopped", append(attrs, "err", err)...)
		return
	}
	s.log.Info("stopped", attrs...)
}

// Close stops following the signals.
func (s *shutdown) Close() {
	signal.Stop(s.sigs)
	close(s.sigs)
	s.cancel()
}
