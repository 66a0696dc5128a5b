package flush

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/condense-dev/condense/internal/logs"
	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/summarize"
)

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
