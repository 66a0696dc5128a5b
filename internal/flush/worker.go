package flush

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/condense-dev/condense/internal/logs"
)

// Worker consumes queued flush jobs (the `condense pruner` process) at least once: acknowledged
// after their outcome is recorded, reclaimed from dead workers, retried with backoff up to
// MaxAttempts, then dead-lettered (docs/summarizer.md).
type Worker struct {
	// Queue is the Redis queue consumed.
	Queue *Queue
	// Orch runs each job's flush.
	Orch *Orchestrator
	// Consumer is this worker's consumer name (default host:pid).
	Consumer string
	// Concurrency is how many jobs run at once (default 2).
	Concurrency int
	// Block is the XREADGROUP block time (default 2s).
	Block time.Duration
	// ClaimIdle is how long a pending job must be idle before another worker reclaims it
	// (default 60s). Heartbeats run every third of it.
	ClaimIdle time.Duration
	// MaxAttempts is how many failed attempts dead-letter a job (default 5).
	MaxAttempts int
	// BackoffBase and BackoffMax bound the retry delay base×2^(attempt-1) (default 1s, 5m).
	BackoffBase, BackoffMax time.Duration
	// BusyDelay is the retry delay when the session's lease is held elsewhere (default 5s);
	// busy retries do not count as attempts.
	BusyDelay time.Duration
	// MaxAge dead-letters a job still not done this long after it was enqueued (default 1h).
	MaxAge time.Duration
	// ShutdownGrace is how long running jobs may finish after Run's context ends before they
	// are aborted and requeued (default 30s).
	ShutdownGrace time.Duration
	// Log receives job events (nil: slog.Default()).
	Log *slog.Logger

	ready    chan struct{}
	once     sync.Once
	running  atomic.Int64 // jobs being processed
	requeued atomic.Int64 // jobs aborted by the end of ShutdownGrace and handed back
}

func (w *Worker) defaults() {
	if w.Consumer == "" {
		h, _ := os.Hostname()
		w.Consumer = fmt.Sprintf("%s:%d", h, os.Getpid())
	}
	if w.Concurrency <= 0 {
		w.Concurrency = 2
	}
	if w.Block <= 0 {
		w.Block = 2 * time.Second
	}
	if w.ClaimIdle <= 0 {
		w.ClaimIdle = 60 * time.Second
	}
	if w.MaxAttempts <= 0 {
		w.MaxAttempts = 5
	}
	if w.BackoffBase <= 0 {
		w.BackoffBase = time.Second
	}
	if w.BackoffMax <= 0 {
		w.BackoffMax = 5 * time.Minute
	}
	if w.BusyDelay <= 0 {
		w.BusyDelay = 5 * time.Second
	}
	if w.MaxAge <= 0 {
		w.MaxAge = time.Hour
	}
	if w.ShutdownGrace <= 0 {
		w.ShutdownGrace = 30 * time.Second
	}
	if w.Log == nil {
		w.Log = slog.Default()
	}
}

func (w *Worker) readyCh() chan struct{} {
	w.once.Do(func() { w.ready = make(chan struct{}) })
	return w.ready
}

// Ready is closed once the worker has joined the consumer group (used by health checks).
func (w *Worker) Ready() <-chan struct{} { return w.readyCh() }

// Backoff returns the retry delay after attempt failed attempts.
func (w *Worker) Backoff(attempt int) time.Duration {
	d := w.BackoffBase
	for i := 1; i < attempt && d < w.BackoffMax; i++ {
		d *= 2
	}
	if d > w.BackoffMax {
		d = w.BackoffMax
	}
	return d
}

// Run consumes jobs until ctx ends, then lets running jobs finish for ShutdownGrace, aborts
// and requeues the rest, logs what it drained ("flush worker: stopped") and returns nil. It
// returns an error only when the consumer group cannot be created.
func (w *Worker) Run(ctx context.Context) error {
	w.defaults()
	if err := w.Queue.ensureGroup(ctx); err != nil {
		return fmt.Errorf("flush worker: create consumer group: %w", err)
	}
	close(w.readyCh())
	jobCtx, cancelJobs := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelJobs()
	slots := make(chan struct{}, w.Concurrency)
	var wg sync.WaitGroup
	dispatch := func(msg redis.XMessage, reclaimed bool) {
		slots <- struct{}{}
		wg.Add(1)
		w.running.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			defer w.running.Add(-1)
			// A flush's own panics are failed attempts (Orchestrator.Flush); one in the
			// bookkeeping leaves the entry pending, to be reclaimed and counted as a delivery.
			err := catch(func() error { w.process(jobCtx, msg, reclaimed); return nil })
			if pe := (*PanicError)(nil); errors.As(err, &pe) {
				w.Log.Error("flush worker: job processing panicked", "id", msg.ID, "panic", fmt.Sprint(pe.Value), "stack", string(pe.Stack))
				w.Queue.Metrics.job("panicked")
			}
		}()
	}
	claimStart := "0-0"
	for ctx.Err() == nil {
		free := w.Concurrency - len(slots)
		if free == 0 {
			select {
			case slots <- struct{}{}: // wait for a free slot
				<-slots
			case <-ctx.Done():
			}
			continue
		}
		if _, err := w.Queue.moveDue(ctx, time.Now()); err != nil && ctx.Err() == nil {
			w.Log.Warn("flush worker: move due retries", "err", err)
		}
		msgs, next, err := w.Queue.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: w.Queue.StreamKey(), Group: w.Queue.Group,
			Consumer: w.Consumer, MinIdle: w.ClaimIdle, Start: claimStart, Count: int64(free)}).Result()
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			if isNoGroup(err) {
				_ = w.Queue.ensureGroup(ctx)
			}
			w.Log.Warn("flush worker: reclaim", "err", err)
			w.pause(ctx)
			continue
		}
		claimStart = next
		for _, m := range msgs {
			w.Queue.Metrics.job("reclaimed")
			w.Log.Info("flush worker: reclaimed a stale job", "id", m.ID)
			dispatch(m, true)
		}
		free -= len(msgs)
		if free <= 0 {
			continue
		}
		streams, err := w.Queue.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: w.Queue.Group, Consumer: w.Consumer,
			Streams: []string{w.Queue.StreamKey(), ">"}, Count: int64(free), Block: w.Block}).Result()
		if err != nil {
			if errors.Is(err, redis.Nil) || ctx.Err() != nil {
				continue
			}
			if isNoGroup(err) {
				_ = w.Queue.ensureGroup(ctx)
			}
			w.Log.Warn("flush worker: read", "err", err)
			w.pause(ctx)
			continue
		}
		for _, s := range streams {
			for _, m := range s.Messages {
				dispatch(m, false)
			}
		}
	}
	stopping, running := time.Now(), w.running.Load()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(w.ShutdownGrace):
		cancelJobs()
		<-done
	}
	requeued := w.requeued.Load()
	w.Log.Info("flush worker: stopped", "consumer", w.Consumer, "running", running, "finished", running-requeued,
		"requeued", requeued, "ms", logs.Ms(time.Since(stopping)))
	return nil
}

func isNoGroup(err error) bool {
	return err != nil && len(err.Error()) >= 7 && err.Error()[:7] == "NOGROUP"
}

func (w *Worker) pause(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(500 * time.Millisecond):
	}
}

// process runs one delivered job and records its outcome. A reclaimed job first counts the
// deliveries that died with their worker as failed attempts.
func (w *Worker) process(ctx context.Context, msg redis.XMessage, reclaimed bool) {
	q := w.Queue
	// Bookkeeping must survive a shutdown cancel.
	bctx, bcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer bcancel()
	payload, _ := msg.Values["job"].(string)
	job, err := decodeJob(payload)
	if err == nil {
		err = job.Normalize()
	}
	if err != nil {
		if job == nil {
			job = &Job{}
		}
		w.Log.Error("flush worker: invalid job, dead-lettered", "id", msg.ID, "err", err)
		if derr := q.deadLetter(bctx, msg.ID, job, payload, err.Error()); derr != nil {
			w.Log.Warn("flush worker: dead-letter", "err", derr)
		}
		return
	}
	if st, err := q.Status(bctx, job.Session, job.Hash); err == nil && st != nil && st.State == StateDone {
		q.Metrics.job("duplicate")
		if _, err := q.rdb.TxPipelined(bctx, func(p redis.Pipeliner) error {
			p.XAck(bctx, q.StreamKey(), q.Group, msg.ID)
			p.XDel(bctx, q.StreamKey(), msg.ID)
			return nil
		}); err != nil {
			w.Log.Warn("flush worker: ack duplicate", "err", err)
		}
		return
	}
	if reclaimed && w.deadDeliveries(bctx, msg.ID, job) {
		w.Log.Error("flush worker: reclaimed job dead-lettered", "session", job.Session, "attempts", job.Attempt, "err", job.LastError)
		if err := q.deadLetter(bctx, msg.ID, job, payload, job.LastError); err != nil {
			w.Log.Warn("flush worker: dead-letter", "err", err)
		}
		return
	}
	q.rdb.Set(bctx, q.StatusKey(job.Session, job.Hash), mustJSON(Status{State: StateRunning, Attempt: job.Attempt}), q.StatusTTL)

	hbCtx, hbStop := context.WithCancel(ctx)
	var hb sync.WaitGroup
	hb.Add(1)
	go func() {
		defer hb.Done()
		t := time.NewTicker(w.ClaimIdle / 3)
		defer t.Stop()
		for {
			select {
			case <-hbCtx.Done():
				return
			case <-t.C:
				// Resets the entry's idle time so no other worker reclaims a live job.
				if owned, err := q.heartbeat(hbCtx, msg.ID, w.Consumer); err == nil && !owned {
					w.Log.Warn("flush worker: job reclaimed by another worker, heartbeat stopped", "id", msg.ID, "session", job.Session)
					return
				}
			}
		}
	}()
	res, ferr := w.Orch.Flush(ctx, job)
	hbStop()
	hb.Wait()

	var jerr *JobError
	switch {
	case ferr == nil:
		if err := q.finish(bctx, msg.ID, job, Status{State: StateDone, Attempt: job.Attempt, Result: res}); err != nil {
			w.Log.Warn("flush worker: record done", "session", job.Session, "err", err)
			return // stays pending: redelivered, then acknowledged as a duplicate
		}
		q.Metrics.job("done")
	case ctx.Err() != nil:
		// Shutting down: hand the job back at once, attempt not counted.
		w.requeued.Add(1)
		if err := q.retry(bctx, msg.ID, job, time.Now()); err != nil {
			w.Log.Warn("flush worker: requeue on shutdown", "err", err)
		}
		q.Metrics.job("requeued")
	case errors.As(ferr, &jerr):
		_ = q.deadLetter(bctx, msg.ID, job, payload, ferr.Error())
	case errors.Is(ferr, ErrBusy) && time.Since(job.Enqueued) < w.MaxAge:
		q.Metrics.job("busy")
		if err := q.retry(bctx, msg.ID, job, time.Now().Add(w.BusyDelay)); err != nil {
			w.Log.Warn("flush worker: reschedule busy job", "err", err)
		}
	default:
		job.Attempt++
		job.LastError = ferr.Error()
		// The provider refused every summarizer call as invalid: a retry would fail the same way.
		rej := errors.Is(ferr, ErrSummarizerFailed) && rejected(ferr)
		if rej || job.Attempt >= w.MaxAttempts || time.Since(job.Enqueued) >= w.MaxAge {
			w.Log.Error("flush worker: job dead-lettered", "session", job.Session, "attempts", job.Attempt, "rejected", rej, "err", ferr)
			if err := q.deadLetter(bctx, msg.ID, job, payload, ferr.Error()); err != nil {
				w.Log.Warn("flush worker: dead-letter", "err", err)
			}
			return
		}
		d := w.Backoff(job.Attempt)
		w.Log.Warn("flush worker: job failed, retrying", "session", job.Session, "attempt", job.Attempt, "retryInMs", logs.Ms(d), "err", ferr)
		if err := q.retry(bctx, msg.ID, job, time.Now().Add(d)); err != nil {
			w.Log.Warn("flush worker: schedule retry", "err", err)
		}
		q.Metrics.job("retried")
	}
}

// deadDeliveries adds to job.Attempt the earlier deliveries of reclaimed entry id that ended
// without an outcome (XPENDING's count) and reports whether that reaches MaxAttempts; when the
// count cannot be read the job just runs.
func (w *Worker) deadDeliveries(ctx context.Context, id string, job *Job) bool {
	p, err := w.Queue.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: w.Queue.StreamKey(), Group: w.Queue.Group,
		Start: id, End: id, Count: 1}).Result()
	if err != nil || len(p) == 0 {
		w.Log.Warn("flush worker: delivery count of a reclaimed job", "id", id, "err", err)
		return false
	}
	died := int(p[0].RetryCount) - 1 // this delivery is the last one
	if died <= 0 {
		return false
	}
	job.Attempt += died
	job.LastError = fmt.Sprintf("delivered %d times without an outcome (worker died or hung)", p[0].RetryCount)
	return job.Attempt >= w.MaxAttempts
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
