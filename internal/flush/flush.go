// Package flush runs flushes under the session's flush lease: plan with the pruning engine,
// summarize, weigh against the prompt cache when asked, commit with compare-and-set; in-process
// (InProcess) or as Redis jobs (Queue, Worker). See docs/summarizer.md.
package flush

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/condense-dev/condense/internal/cachepolicy"
	"github.com/condense-dev/condense/internal/cost"
	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/summarize"
)

// Blob is content to store before the state that references it is committed.
type Blob struct {
	Key  string // blob key within the session
	Data []byte // content
}

// Planner is the pruning engine as the orchestrator sees it.
type Planner interface {
	// Plan plans a flush of job.Session over snap (the loaded snapshot) and job.Body.
	Plan(ctx context.Context, job *Job, snap *store.Snapshot) (Plan, error)
}

// Plan is one planned flush.
type Plan interface {
	// Requests are the summarizer calls the plan needs (may be empty).
	Requests() []*summarize.Request
	// Apply computes the new state given the successful outputs keyed by request ID
	// (failed requests are absent) and reports whether the state changed.
	Apply(outputs map[string]string) (changed bool, err error)
	// Encode returns the stored form of the state a changing Apply computed and the blobs
	// to store first. It is called only for a flush that is kept (not for a deferred one).
	Encode() (state []byte, blobs []Blob, err error)
}

// Weigher is implemented by plans that can price their new state against the provider's prompt
// cache (EnginePlanner's plans do). Weigh is called after Apply.
type Weigher interface {
	// Weigh decides whether the new state is worth its cache rewrite for job (whose
	// Cache is set), given what this flush's summarizer calls cost.
	Weigh(job *Job, prices *cost.Prices, summarizerUSD float64) (cachepolicy.Decision, error)
}

// Orchestrator runs flushes against a store. Safe for concurrent use.
type Orchestrator struct {
	// Store holds the sessions (state, lease, blobs, stats).
	Store store.Store
	// Planner is the pruning engine (EnginePlanner in production).
	Planner Planner
	// Summarizer writes the summaries.
	Summarizer summarize.Summarizer
	// Owner names this flusher's process in leases (default host:pid). Each flush holds the
	// lease as Holder() plus a suffix of its own; see Holder.
	Owner string
	// LeaseTTL is the flush lease duration, renewed every third of it (default 60s).
	LeaseTTL time.Duration
	// Parallelism bounds concurrent summarizer calls per flush (default 4).
	Parallelism int
	// MaxPlans bounds planning rounds when commits conflict (default 4).
	MaxPlans int
	// Metrics, when set, records flush metrics.
	Metrics *Metrics
	// Log receives one line per flush, at debug level for a flush with nothing to do (nil:
	// slog.Default()).
	Log *slog.Logger
	// Prices prices the cache-aware decision (nil: cost.DefaultPrices()).
	Prices *cost.Prices

	memoMu sync.Mutex
	memo   map[string]string // session + request key → summary, for re-weighed (deferred) flushes

	holderOnce sync.Once
	holder     string        // Holder()
	flushSeq   atomic.Uint64 // numbers this orchestrator's flushes in their lease owners
	leases     leaseBook
}

// defaultPrices is the embedded price table, parsed once.
var defaultPrices = sync.OnceValue(cost.DefaultPrices)

func (o *Orchestrator) prices() *cost.Prices {
	if o.Prices != nil {
		return o.Prices
	}
	return defaultPrices()
}

func (o *Orchestrator) log() *slog.Logger {
	if o.Log != nil {
		return o.Log
	}
	return slog.Default()
}

// Flush runs one flush to completion. The returned Result is never nil; err is non-nil for
// every outcome except flushed, partial, empty and deferred, and wraps ErrBusy, ErrSummarizerFailed,
// ErrConflict, ErrFenced, a *JobError, a *PanicError or the store's error.
func (o *Orchestrator) Flush(ctx context.Context, job *Job) (*Result, error) {
	return o.flushVia(ctx, job, o.Store)
}

// flushVia is Flush making its store calls (but the lease renewals, which run on their own
// goroutine) through st.
func (o *Orchestrator) flushVia(ctx context.Context, job *Job, st store.Store) (*Result, error) {
	start := time.Now()
	res := &Result{Session: job.Session, Hash: job.Hash}
	err := catch(func() error { return o.flush(ctx, st, job, res) })
	if pe := (*PanicError)(nil); errors.As(err, &pe) {
		res.Outcome = OutcomePanic
		o.log().Error("flush: panic", "session", job.Session, "panic", fmt.Sprint(pe.Value), "stack", string(pe.Stack))
	}
	if err != nil && res.Outcome == "" {
		res.Outcome = OutcomeError
		if errors.Is(err, ErrFenced) { // the lease was lost mid-flush
			res.Outcome = OutcomeFenced
		}
	}
	if err != nil {
		res.Error = err.Error()
	}
	o.record(st, job, res, time.Since(start))
	return res, err
}

func (o *Orchestrator) flush(ctx context.Context, st store.Store, job *Job, res *Result) error {
	if err := job.Normalize(); err != nil {
		return err
	}
	res.Hash = job.Hash
	owner := o.startFlush()
	defer o.endFlush(owner)
	lease, err := o.acquire(ctx, st, job.Session, owner)
	if err != nil {
		if errors.Is(err, store.ErrLeaseHeld) {
			res.Outcome = OutcomeBusy
			return fmt.Errorf("%w: %w", ErrBusy, err)
		}
		return fmt.Errorf("flush: acquire lease: %w", err)
	}
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var renewWG sync.WaitGroup
	renewWG.Add(1)
	go func() { defer renewWG.Done(); o.renew(fctx, cancel, lease) }()
	defer func() {
		cancel(nil)
		renewWG.Wait()
		o.release(ctx, st, lease)
	}()

	cache := map[string]string{} // request cache key → summary text, reused across re-plans
	maxPlans := o.MaxPlans
	if maxPlans <= 0 {
		maxPlans = 4
	}
	partial, followups := false, 0
	for res.Plans < maxPlans {
		res.Plans++
		snap, err := loadFor(fctx, st, job)
		if err != nil {
			return o.ctxErr(fctx, fmt.Errorf("flush: load: %w", err))
		}
		res.Version = snap.Version
		res.pending = snap.Stats[StatFlushPending]
		plan, err := o.Planner.Plan(fctx, job, snap)
		if err != nil {
			return o.ctxErr(fctx, fmt.Errorf("flush: plan: %w", err))
		}
		reqs := plan.Requests()
		res.Batches = len(reqs)
		outputs := map[string]string{}
		var toRun []*summarize.Request
		for _, r := range reqs {
			if r.Session == nil && job.SessionModel != nil {
				r.Session = job.SessionModel
			}
			if t, ok := cache[cacheKey(r)]; ok {
				outputs[r.ID] = t
			} else if t, ok := o.memoGet(job.Session, cacheKey(r)); ok && job.Cache != nil {
				outputs[r.ID] = t
			} else {
				toRun = append(toRun, r)
			}
		}
		roundUSD := 0.0
		var firstErr error
		res.Failed = 0
		for _, oc := range summarize.Run(fctx, safeSummarizer{o.Summarizer}, toRun, o.Parallelism) {
			if pe := (*PanicError)(nil); errors.As(oc.Err, &pe) {
				return pe
			}
			if oc.Err != nil {
				res.Failed++
				// The reported cause is a rejected request only when every failure was one
				// (a queued job is then not retried).
				if firstErr == nil || rejected(firstErr) && !rejected(oc.Err) {
					firstErr = oc.Err
				}
				o.Metrics.summarizerError(oc.Err)
				continue
			}
			res.Usage.Add(oc.Result.Usage)
			roundUSD += oc.Result.Usage.CostUSD
			o.Metrics.summarizerUsage(oc.Result)
			outputs[oc.ID] = oc.Result.Text
		}
		for _, r := range toRun {
			if t, ok := outputs[r.ID]; ok {
				cache[cacheKey(r)] = t
				if job.Cache != nil {
					o.memoPut(job.Session, cacheKey(r), t)
				}
			}
		}
		if err := context.Cause(fctx); err != nil {
			return o.ctxErr(fctx, err)
		}
		if len(reqs) > 0 && len(outputs) == 0 && followups == 0 {
			res.Outcome = OutcomeSummarizerFailed
			return fmt.Errorf("%w: %d batch(es): %w", ErrSummarizerFailed, len(reqs), firstErr)
		}
		changed, err := plan.Apply(outputs)
		if err != nil {
			return fmt.Errorf("flush: plan commit: %w", err)
		}
		if !changed {
			if followups == 0 {
				res.Outcome = OutcomeEmpty
			}
			return nil
		}
		if w, ok := plan.(Weigher); ok && job.Cache != nil && followups == 0 {
			d, err := w.Weigh(job, o.prices(), roundUSD)
			if err != nil {
				return fmt.Errorf("flush: weigh: %w", err)
			}
			res.Reason = d.Reason
			if !d.Keep {
				res.Outcome = OutcomeDeferred
				return nil
			}
		}
		state, blobs, err := plan.Encode()
		if err != nil {
			return fmt.Errorf("flush: encode state: %w", err)
		}
		for _, b := range blobs {
			if err := st.PutBlob(fctx, job.Session, b.Key, b.Data); err != nil {
				return o.ctxErr(fctx, fmt.Errorf("flush: put blob %q: %w", b.Key, err))
			}
		}
		v, err := st.Commit(fctx, job.Session, snap.Version, state, lease.Token)
		switch {
		case err == nil:
			res.Version = v
			if res.Failed > 0 {
				partial = true
			}
			res.Outcome = OutcomeFlushed
			if partial {
				res.Outcome = OutcomePartial
			}
			if fu, ok := plan.(interface{ Followup() bool }); ok && fu.Followup() && !partial && followups < 2 {
				followups++
				maxPlans++ // a follow-up round is not a conflict retry
				continue
			}
			return nil
		case errors.Is(err, store.ErrConflict):
			o.Metrics.conflict()
			continue // someone committed in between (e.g. the proxy recording a hidden exchange): re-plan
		case errors.Is(err, store.ErrFenced):
			res.Outcome = OutcomeFenced
			return fmt.Errorf("%w: %w", ErrFenced, err)
		default:
			return o.ctxErr(fctx, fmt.Errorf("flush: commit: %w", err))
		}
	}
	res.Outcome = OutcomeConflict
	return fmt.Errorf("%w after %d plans", ErrConflict, res.Plans)
}

// rejected reports whether err is a summarizer call the provider refused as invalid.
func rejected(err error) bool { return errors.Is(err, summarize.ErrRejected) }

// loadFor loads job's session. A job carrying its decoded state loads without the state's bytes
// when the store can and the stored version is still the decoded one; the planner then uses
// job.State (docs/design/engine.md).
func loadFor(ctx context.Context, st store.Store, job *Job) (*store.Snapshot, error) {
	if kl, ok := st.(store.KnownStateLoader); ok && job.State != nil && job.StateVersion > 0 {
		return kl.LoadKnown(ctx, job.Session, job.StateVersion)
	}
	return st.Load(ctx, job.Session)
}
