// Package flush runs flushes under the session's flush lease: plan with the pruning engine,
// summarize, weigh against the prompt cache when asked, commit with compare-and-set; in-process
// (InProcess) or as Redis jobs (Queue, Worker). See docs/summarizer.md.
package flush

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/condense-dev/condense/internal/cachepolicy"
	"github.com/condense-dev/condense/internal/cost"
	"github.com/condense-dev/condense/internal/logs"
	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/summarize"
	"github.com/condense-dev/condense/internal/wire"
)

// Job is one flush request: the Queued message and, for an in-process flush, what the proxy
// already holds in memory (never queued; none of it may be modified once submitted).
type Job struct {
	Queued
	// Request, when set, is Body already parsed (the proxy hands in-process flushes the
	// request it parsed, so the planner does not parse it again).
	Request *wire.Request `json:"-"`
	// State, when set, is the decoded engine state of session version StateVersion (the
	// proxy hands in-process flushes the state it rendered the request with); the planner
	// uses it instead of decoding the snapshot it loads when that snapshot is this version.
	State *pruner.State `json:"-"`
	// StateVersion is the session version State was decoded from (0: State is unused).
	StateVersion uint64 `json:"-"`
	// Rendered, when set, is Request rendered with State (what the proxy forwarded); the
	// cache-aware weighing uses it as the current render when the plan is over State, instead
	// of rendering again.
	Rendered *wire.Request `json:"-"`
}

// Queued is a flush job as it crosses the Redis queue (JSON; Queue drops the session model's
// credentials): a session and the request that triggered it.
type Queued struct {
	// Session is the session id.
	Session string `json:"session"`
	// Format is the wire format of Body.
	Format wire.Format `json:"format"`
	// Body is the latest request body, exactly as the client sent it. An in-process job that
	// carries Request may leave it empty (Queue.Enqueue serializes Request into it): nothing
	// then serializes the request on the proxy's request path.
	Body []byte `json:"body"`
	// Hash is the hex SHA-256 of Body — or, when Body is empty (an in-process job), "xxh64:"
	// and the hex xxhash64 of Request's content (requestKey) — computed by Normalize when
	// empty; with Session it is the job's idempotency key.
	Hash string `json:"hash"`
	// Trigger says why the flush runs (agent-message, budget, delta, manual...).
	Trigger string `json:"trigger,omitempty"`
	// SessionModel is the session's own model (summarizer fallback target). Credentials are
	// never serialized into queued jobs.
	SessionModel *summarize.Endpoint `json:"sessionModel,omitempty"`
	// Enqueued is when the job was first submitted.
	Enqueued time.Time `json:"enqueued"`
	// Attempt counts failed attempts so far (queued jobs).
	Attempt int `json:"attempt,omitempty"`
	// LastError is the error of the previous attempt (queued jobs).
	LastError string `json:"lastError,omitempty"`
	// PlanMessages, when > 0, limits what the flush may touch to the first PlanMessages
	// messages of Body (a mid-run flush leaves the latest tool-using turns alone); the cache
	// check still weighs the whole request.
	PlanMessages int `json:"planMessages,omitempty"`
	// Cache, when set, weighs the flush against the prompt cache before commit (cachepolicy.Decide):
	// a rewrite that costs more than it saves ends OutcomeDeferred with nothing committed. Nil
	// commits unconditionally (manual and budget flushes).
	Cache *CacheCheck `json:"cache,omitempty"`
}

// CacheCheck is what the cache-aware decision needs to know about the session's prompt cache
// and how long its context will live.
type CacheCheck struct {
	// At is when the triggering request arrived (the decision's "now").
	At time.Time `json:"at"`
	// LastRequest is when the session's previous request went to the provider, writing the
	// cache; zero when unknown (the cache then counts as expired).
	LastRequest time.Time `json:"lastRequest,omitempty"`
	// Requests is how many requests the session's context has seen so far (horizon rule).
	Requests int `json:"requests,omitempty"`
	// Horizon is the fewest expected further requests (cachepolicy.DefaultHorizon when 0).
	Horizon int `json:"horizon,omitempty"`
	// MaxHorizon caps the expected further requests (cachepolicy.DefaultMaxHorizon when 0).
	MaxHorizon int `json:"maxHorizon,omitempty"`
}

// StatFlushPending is the session counter that is 1 while the session's latest weighed flush
// of the whole transcript was deferred (a flush is still due and should be retried) and 0
// once one was committed or found nothing to do. Mid-run flushes (PlanMessages > 0) leave it.
const StatFlushPending = "flushPending"

// Normalize validates the job and fills Hash and Enqueued.
func (j *Job) Normalize() error {
	if err := store.ValidateSessionID(j.Session); err != nil {
		return &JobError{Msg: "bad session id", Err: err}
	}
	if len(j.Body) == 0 && (j.Request == nil || len(j.Request.Raw()) == 0) {
		return &JobError{Msg: "empty request body"}
	}
	switch j.Format {
	case wire.Anthropic, wire.OpenAI, wire.Responses:
	default:
		return &JobError{Msg: fmt.Sprintf("unknown format %v", j.Format)}
	}
	var h string
	if len(j.Body) > 0 {
		sum := sha256.Sum256(j.Body)
		h = hex.EncodeToString(sum[:])
	} else {
		// An in-process job: its key never leaves the process, so a fast 64-bit hash is
		// enough to recognize a resubmitted request.
		h = "xxh64:" + strconv.FormatUint(requestKey(j.Request), 16)
	}
	if j.Hash != "" && j.Hash != h {
		return &JobError{Msg: "hash does not match body"}
	}
	j.Hash = h
	if j.Enqueued.IsZero() {
		j.Enqueued = time.Now()
	}
	return nil
}

// requestKey hashes a parsed request's content without serializing it: the client's bytes
// and every tool, system block and message as the request now holds them (the proxy's view
// adds messages and tools to what the client sent, so the bytes alone do not identify it).
func requestKey(r *wire.Request) uint64 {
	d := xxhash.New()
	var n [8]byte
	part := func(b []byte) {
		binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
		_, _ = d.Write(n[:])
		_, _ = d.Write(b)
	}
	part(r.Raw())
	for _, t := range r.Tools {
		part(t.Raw())
	}
	for _, b := range r.System {
		part(b.Raw())
	}
	for _, m := range r.Messages {
		part(m.Bytes())
	}
	return d.Sum64()
}

// PanicError is a flush, or one of its summarizer calls, that panicked: a bug, recovered so
// that it fails the flush (OutcomePanic; a queued job counts it as a failed attempt) instead
// of the process.
type PanicError struct {
	Value any    // what was passed to panic
	Stack []byte // the panicking goroutine's stack
}

// Error implements error.
func (e *PanicError) Error() string { return fmt.Sprintf("flush: panic: %v", e.Value) }

// catch runs f and returns its error, or a *PanicError when f panics.
func catch(f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return f()
}

// safeSummarizer recovers a panic of a summarizer call (made on a goroutine of
// summarize.Run's, where it would end the process) as a *PanicError.
type safeSummarizer struct{ summarize.Summarizer }

// Summarize implements summarize.Summarizer.
func (s safeSummarizer) Summarize(ctx context.Context, req *summarize.Request) (res *summarize.Result, err error) {
	err = catch(func() (err error) {
		res, err = s.Summarizer.Summarize(ctx, req)
		return err
	})
	return res, err
}

// JobError reports a job that can never run (bad input); it is not retried.
type JobError struct {
	Msg string // what is wrong
	Err error  // the cause, may be nil
}

// Error implements error.
func (e *JobError) Error() string {
	if e.Err != nil {
		return "flush: invalid job: " + e.Msg + ": " + e.Err.Error()
	}
	return "flush: invalid job: " + e.Msg
}

// Unwrap returns the cause.
func (e *JobError) Unwrap() error { return e.Err }

// Outcome is how a flush ended (a metric label and a stats counter suffix).
type Outcome string

// Flush outcomes.
const (
	// OutcomeFlushed: every planned batch was summarized and the new state committed.
	OutcomeFlushed Outcome = "flushed"
	// OutcomePartial: some batches failed; the state with the others was committed.
	OutcomePartial Outcome = "partial"
	// OutcomeEmpty: nothing to flush (no batches and no state change).
	OutcomeEmpty Outcome = "empty"
	// OutcomeDeferred: the cache-aware decision found the flush not worth its cache rewrite
	// yet; nothing was committed and the session's StatFlushPending is set.
	OutcomeDeferred Outcome = "deferred"
	// OutcomeBusy: another owner holds the session's flush lease.
	OutcomeBusy Outcome = "busy"
	// OutcomeSummarizerFailed: every batch failed; nothing was committed. The error wraps
	// summarize.ErrRejected only when every batch was rejected by the provider as invalid.
	OutcomeSummarizerFailed Outcome = "summarizer-failed"
	// OutcomeConflict: the compare-and-set kept losing after MaxAttempts re-plans.
	OutcomeConflict Outcome = "conflict"
	// OutcomeFenced: a newer lease fenced this flush off; nothing was committed.
	OutcomeFenced Outcome = "fenced"
	// OutcomeError: the store, the planner or the job failed.
	OutcomeError Outcome = "error"
	// OutcomePanic: the flush or one of its summarizer calls panicked (a bug); the panic was
	// recovered and logged with its stack, and the flush abandoned where it was.
	OutcomePanic Outcome = "panic"
)

// Sentinel errors returned (wrapped) with the matching outcomes.
var (
	ErrBusy             = errors.New("flush: session lease held by another flusher")
	ErrSummarizerFailed = errors.New("flush: every summarizer call failed")
	ErrConflict         = errors.New("flush: compare-and-set kept conflicting")
	ErrFenced           = errors.New("flush: fenced by a newer lease")
)

// Result describes one flush.
type Result struct {
	Session string          `json:"session"` // the session id
	Hash    string          `json:"hash"`    // the job's request hash
	Outcome Outcome         `json:"outcome"` // how it ended
	Version uint64          `json:"version"` // the committed version (or the loaded one when nothing was committed)
	Batches int             `json:"batches"` // batches planned in the committed attempt
	Failed  int             `json:"failed"`  // batches whose summarizer call failed
	Plans   int             `json:"plans"`   // planning rounds (1 + CAS re-plans)
	Usage   summarize.Usage `json:"usage"`   // summarizer usage, every attempt included
	Error   string          `json:"error,omitempty"`
	Reason  string          `json:"reason,omitempty"` // the cache-aware decision's reason (weighed flushes)

	pending int64 // StatFlushPending of the last loaded snapshot
}

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

// leaseBook keeps an orchestrator's flush leases: those its running flushes hold, and those
// whose release failed (the store was unreachable), released again once the store answers.
type leaseBook struct {
	mu         sync.Mutex
	running    map[string]bool // lease owners of running flushes
	unreleased map[string]unreleased
	retrying   bool // a releaseAgain goroutine runs
}

// unreleased is a lease whose release failed, and when it lapses anyway.
type unreleased struct {
	lease store.Lease
	lapse time.Time
}

// maxMemo bounds the orchestrator's summary memo; past it the memo starts over.
const maxMemo = 4096

func (o *Orchestrator) memoGet(session, key string) (string, bool) {
	o.memoMu.Lock()
	defer o.memoMu.Unlock()
	t, ok := o.memo[session+"\x00"+key]
	return t, ok
}

func (o *Orchestrator) memoPut(session, key, text string) {
	o.memoMu.Lock()
	defer o.memoMu.Unlock()
	if o.memo == nil || len(o.memo) >= maxMemo {
		o.memo = map[string]string{}
	}
	o.memo[session+"\x00"+key] = text
}

// defaultPrices is the embedded price table, parsed once.
var defaultPrices = sync.OnceValue(cost.DefaultPrices)

func (o *Orchestrator) prices() *cost.Prices {
	if o.Prices != nil {
		return o.Prices
	}
	return defaultPrices()
}

// Holder names this orchestrator in the leases of its flushes: Owner (default host:pid), "#"
// and a random id of this Orchestrator value. Each flush's lease owner is Holder, "/" and the
// flush's number, so a lease tells which process, and which of its flushes, holds it.
func (o *Orchestrator) Holder() string {
	o.holderOnce.Do(func() {
		owner := o.Owner
		if owner == "" {
			h, _ := os.Hostname()
			owner = fmt.Sprintf("%s:%d", h, os.Getpid())
		}
		o.holder = owner + "#" + strconv.FormatUint(rand.Uint64()>>32, 36)
	})
	return o.holder
}

// startFlush returns the lease owner of a new flush and records it as running until
// endFlush.
func (o *Orchestrator) startFlush() string {
	owner := o.Holder() + "/" + strconv.FormatUint(o.flushSeq.Add(1), 10)
	o.leases.mu.Lock()
	defer o.leases.mu.Unlock()
	if o.leases.running == nil {
		o.leases.running = map[string]bool{}
	}
	o.leases.running[owner] = true
	return owner
}

func (o *Orchestrator) endFlush(owner string) {
	o.leases.mu.Lock()
	defer o.leases.mu.Unlock()
	delete(o.leases.running, owner)
}

// leftBehind reports whether l was issued to a flush of this orchestrator that no longer runs
// (its release failed, or the store restarted from a file that still had it).
func (o *Orchestrator) leftBehind(l store.Lease) bool {
	if !strings.HasPrefix(l.Owner, o.Holder()+"/") {
		return false
	}
	o.leases.mu.Lock()
	defer o.leases.mu.Unlock()
	return !o.leases.running[l.Owner]
}

// acquire takes the session's lease for owner. A lease this orchestrator left behind is
// released at once, not waited out.
func (o *Orchestrator) acquire(ctx context.Context, st store.Store, session, owner string) (store.Lease, error) {
	lease, err := st.AcquireLease(ctx, session, owner, o.leaseTTL())
	var held *store.LeaseHeldError
	if !errors.As(err, &held) || !o.leftBehind(held.Lease) {
		return lease, err
	}
	if rerr := st.ReleaseLease(ctx, held.Lease); rerr != nil && !errors.Is(rerr, store.ErrLeaseLost) {
		return lease, err
	}
	o.released(held.Lease)
	o.log().Info("flush: released a lease of this process's that outlived its flush", "session", session,
		"owner", held.Lease.Owner, "token", held.Lease.Token)
	return st.AcquireLease(ctx, session, owner, o.leaseTTL())
}

// release gives up lease at the end of a flush; when the store cannot be reached it is
// released again in the background until the store answers or the lease lapses.
func (o *Orchestrator) release(ctx context.Context, st store.Store, lease store.Lease) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := st.ReleaseLease(rctx, lease)
	if err == nil || errors.Is(err, store.ErrLeaseLost) {
		return
	}
	o.log().Warn("flush: release lease failed; retrying until the store answers", "session", lease.Session, "err", err)
	o.leases.mu.Lock()
	defer o.leases.mu.Unlock()
	if o.leases.unreleased == nil {
		o.leases.unreleased = map[string]unreleased{}
	}
	o.leases.unreleased[lease.Owner] = unreleased{lease: lease, lapse: time.Now().Add(o.leaseTTL())}
	if !o.leases.retrying {
		o.leases.retrying = true
		go o.releaseAgain()
	}
}

// released forgets a lease that is no longer held.
func (o *Orchestrator) released(l store.Lease) {
	o.leases.mu.Lock()
	defer o.leases.mu.Unlock()
	delete(o.leases.unreleased, l.Owner)
}

// releaseRetryMax bounds the wait between two attempts to release the leases whose release
// failed (the first waits 100ms, each next one twice as long).
const releaseRetryMax = time.Second

// releaseAgain retries the release of the unreleased leases until none is left: each is
// released, found lost, or lapses by itself.
func (o *Orchestrator) releaseAgain() {
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, releaseRetryMax) {
		time.Sleep(wait)
		o.leases.mu.Lock()
		if len(o.leases.unreleased) == 0 {
			o.leases.retrying = false
			o.leases.mu.Unlock()
			return
		}
		pending := make([]unreleased, 0, len(o.leases.unreleased))
		for _, u := range o.leases.unreleased {
			pending = append(pending, u)
		}
		o.leases.mu.Unlock()
		for _, u := range pending {
			if time.Now().After(u.lapse) {
				o.released(u.lease)
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			err := o.Store.ReleaseLease(ctx, u.lease)
			cancel()
			switch {
			case err == nil:
				o.released(u.lease)
				o.log().Info("flush: released a lease once the store answered again", "session", u.lease.Session, "token", u.lease.Token)
			case errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrClosed):
				o.released(u.lease)
			}
		}
	}
}

func (o *Orchestrator) leaseTTL() time.Duration {
	if o.LeaseTTL > 0 {
		return o.LeaseTTL
	}
	return 60 * time.Second
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

// ctxErr reports a lost lease as fencing; other errors pass through.
func (o *Orchestrator) ctxErr(fctx context.Context, err error) error {
	if c := context.Cause(fctx); c != nil && errors.Is(c, store.ErrLeaseLost) {
		return fmt.Errorf("%w: %w", ErrFenced, c)
	}
	return err
}

// renew extends the lease every third of its TTL; losing it cancels the flush.
func (o *Orchestrator) renew(ctx context.Context, cancel context.CancelCauseFunc, lease store.Lease) {
	ttl := o.leaseTTL()
	t := time.NewTicker(ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			l, err := o.Store.RenewLease(ctx, lease, ttl)
			if err != nil {
				if errors.Is(err, store.ErrLeaseLost) {
					cancel(err)
					return
				}
				continue // transient: try again next tick; the commit's fence is the real guard
			}
			lease = l
		}
	}
}

func cacheKey(r *summarize.Request) string {
	h := sha256.New()
	fmt.Fprintf(h, "%d\x00%s\x00%s\x00%d", r.Kind, r.System, r.Prompt, len(r.Parts))
	for _, p := range r.Parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// record writes the flush's stats to the store and metrics, and logs it.
func (o *Orchestrator) record(st store.Store, job *Job, res *Result, d time.Duration) {
	o.Metrics.flush(res, d)
	if res.Outcome == OutcomeBusy || store.ValidateSessionID(job.Session) != nil {
		o.log().Debug("flush", "session", job.Session, "outcome", res.Outcome)
		return
	}
	delta := map[string]int64{"flush." + string(res.Outcome): 1}
	if res.Outcome == OutcomeFlushed || res.Outcome == OutcomePartial {
		delta[store.StatFlushes] = 1
	}
	// Only a flush of the whole transcript settles whether one is still due: a mid-run flush
	// (PlanMessages > 0) is re-weighed by its own trigger.
	switch outcome := res.Outcome; {
	case job.PlanMessages > 0:
	case outcome == OutcomeDeferred:
		if res.pending != 1 {
			delta[StatFlushPending] = 1 - res.pending
		}
	case outcome == OutcomeFlushed || outcome == OutcomePartial || outcome == OutcomeEmpty:
		if res.pending != 0 {
			delta[StatFlushPending] = -res.pending
		}
	}
	if res.Usage.Calls > 0 {
		delta["summarizerCalls"] = res.Usage.Calls
		delta["summarizerInputTokens"] = res.Usage.InputTokens
		delta["summarizerOutputTokens"] = res.Usage.OutputTokens
		delta["summarizerCacheReadTokens"] = res.Usage.CacheReadTokens
		delta["summarizerCacheWriteTokens"] = res.Usage.CacheCreationTokens
		delta[store.StatSummarizerCostMicros] = int64(res.Usage.CostUSD*1e6 + 0.5)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := st.IncrStats(ctx, job.Session, delta); err != nil {
		o.log().Warn("flush: record stats", "session", job.Session, "err", err)
	}
	lvl := slog.LevelInfo
	switch {
	case res.Error != "":
		lvl = slog.LevelWarn
	case res.Outcome == OutcomeEmpty: // no work: not worth a line in normal operation
		lvl = slog.LevelDebug
	}
	o.log().Log(ctx, lvl, "flush", "session", job.Session, "trigger", job.Trigger, "outcome", res.Outcome, "version", res.Version,
		"batches", res.Batches, "failed", res.Failed, "plans", res.Plans, "costUSD", res.Usage.CostUSD,
		"ms", logs.Ms(d), "reason", res.Reason, "err", res.Error)
}
