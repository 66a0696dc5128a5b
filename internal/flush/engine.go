package flush

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/condense-dev/condense/internal/cachepolicy"
	"github.com/condense-dev/condense/internal/config"
	"github.com/condense-dev/condense/internal/cost"
	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/summarize"
	"github.com/condense-dev/condense/internal/wire"
)

// EnginePlanner plans flushes with the pruning engine (pruner.PlanFlush).
type EnginePlanner struct {
	// Policy is the pruning policy.
	Policy pruner.Policy
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// PolicyFromConfig converts the configuration's engine block to a pruner.Policy.
// (A private adapter: the pruner package does not import config.)
func PolicyFromConfig(e config.Engine) pruner.Policy {
	return pruner.Policy{
		BatchingMode:       pruner.BatchingMode(e.BatchingMode),
		MinBatchChars:      e.MinBatchChars,
		Dedup:              e.Dedup,
		SpillThreshold:     e.Spill.Threshold,
		SpillPreviewChars:  e.Spill.PreviewBytes,
		ProtectedTools:     append([]string(nil), e.ProtectedTools...),
		ProtectedPaths:     append([]string(nil), e.ProtectedPaths...),
		RecoveryGraceTurns: e.RecoveryGraceTurns,
		Chain: pruner.ChainPolicy{
			Enabled:                     e.ChainCompression.Enabled,
			RollingWindow:               e.ChainCompression.RollingWindow,
			StripFinalAssistantThinking: e.ChainCompression.StripFinalAssistantThinking,
			FuseRangeSummary:            e.ChainCompression.FuseRangeSummary,
		},
		PurgeErrors: pruner.PurgePolicy{
			Enabled:       e.PurgeErrors.Enabled,
			CooldownTurns: e.PurgeErrors.CooldownTurns,
			MinArgChars:   e.PurgeErrors.MinArgChars,
		},
		Observations: observationPolicy(e.Observations),
	}
}

// observationPolicy converts the configuration's engine.observations block.
func observationPolicy(o config.Observations) pruner.ObservationPolicy {
	p := pruner.ObservationPolicy{Enabled: o.Enabled, Harness: o.Harness}
	for _, c := range o.Patterns {
		p.Patterns = append(p.Patterns, pruner.ObservationPattern{Match: c.Match, Stub: c.Stub, Action: c.Action, Tool: c.Tool, Failed: c.Failed})
	}
	return p
}

// Plan implements Planner: it parses the job's request, decodes the snapshot's state and
// calls pruner.PlanFlush. A malformed request or state is a *JobError (never retried).
func (e EnginePlanner) Plan(_ context.Context, job *Job, snap *store.Snapshot) (Plan, error) {
	req := job.Request
	if req == nil || req.Format != job.Format {
		var err error
		if req, err = wire.Parse(job.Format, job.Body); err != nil {
			return nil, &JobError{Msg: "unparsable request body", Err: err}
		}
	}
	st := job.State
	if st == nil || job.StateVersion == 0 || job.StateVersion != snap.Version {
		st = pruner.NewState()
		if len(snap.State) > 0 {
			if err := st.UnmarshalBinary(snap.State); err != nil {
				return nil, &JobError{Msg: "undecodable session state", Err: err}
			}
		}
	}
	now := time.Now
	if e.Now != nil {
		now = e.Now
	}
	view := req
	if n := job.PlanMessages; n > 0 && n < len(req.Messages) {
		view = req.WithMessages(req.Messages[:n])
	}
	p, err := pruner.PlanFlush(view, st, e.Policy, now())
	if err != nil {
		return nil, fmt.Errorf("pruner: %w", err)
	}
	return &enginePlan{p: p, req: req, cur: st, pol: e.Policy}, nil
}

// current returns the whole request rendered with the loaded state: the job's Rendered when
// it is that render (the plan is over the state it was rendered with), else a fresh render.
func (e *enginePlan) current(job *Job) *wire.Request {
	if job.Rendered != nil && job.State == e.cur && job.Request == e.req {
		return job.Rendered
	}
	return pruner.RenderRequest(e.req, e.cur, e.pol).Request
}

type enginePlan struct {
	p    *pruner.Plan
	req  *wire.Request // the whole request (Job.Request, or Job.Body parsed)
	cur  *pruner.State // the loaded state
	next *pruner.State // the new state (after Apply)
	pol  pruner.Policy
}

// Requests maps the engine's batches to summarizer requests. The instruction text is
// already embedded at the start of Prompt, so System stays empty.
func (e *enginePlan) Requests() []*summarize.Request {
	out := make([]*summarize.Request, 0, len(e.p.Batches))
	for _, b := range e.p.Batches {
		r := &summarize.Request{ID: b.ID, Prompt: b.Prompt, Parts: b.Parts}
		if b.Kind == pruner.KindRangeFusion {
			r.Kind = summarize.KindRange
		}
		for _, c := range b.Calls {
			r.Calls = append(r.Calls, summarize.Call{Label: c.Label, Tool: c.Tool, Args: c.Args, Result: c.Result, IsError: c.IsError})
		}
		out = append(out, r)
	}
	return out
}

// Apply runs the engine's Plan.Apply (the new state is encoded by Encode, once it is kept).
func (e *enginePlan) Apply(outputs map[string]string) (bool, error) {
	if e.p.Empty() {
		return false, nil
	}
	st, err := e.p.Apply(outputs)
	if err != nil {
		return false, err
	}
	e.next = st
	return true, nil
}

// Encode encodes the new state and lists the plan's blobs.
func (e *enginePlan) Encode() ([]byte, []Blob, error) {
	if e.next == nil {
		return nil, nil, errors.New("flush: Encode before a changing Apply")
	}
	data, err := e.next.MarshalBinary()
	if err != nil {
		return nil, nil, err
	}
	blobs := make([]Blob, len(e.p.Blobs))
	for i, b := range e.p.Blobs {
		blobs[i] = Blob{Key: b.Key, Data: b.Data}
	}
	return data, blobs, nil
}

// Followup reports whether the engine wants another plan on the same transcript after this
// commit (deferred chain compression).
func (e *enginePlan) Followup() bool { return e.p.Followup }

// Weigh implements Weigher: it keeps a flush at once when the prompt cache expired at
// job.Cache.At, else bills the previous and the flushed request against a cache model
// (cost.Cache) and asks cachepolicy.Decide whether the flush pays for its cache rewrite.
func (e *enginePlan) Weigh(job *Job, prices *cost.Prices, summarizerUSD float64) (cachepolicy.Decision, error) {
	chk := job.Cache
	if e.next == nil || chk == nil {
		return cachepolicy.Decision{Keep: true, Reason: "nothing to weigh"}, nil
	}
	if !cachepolicy.Alive(chk.LastRequest, chk.At, cachepolicy.RequestTTL(e.req)) {
		return cachepolicy.Decide(cachepolicy.Input{CacheAlive: false, SummarizerUSD: summarizerUSD}), nil
	}
	// Flatten both renders without serializing them; they share every block the flush does
	// not change, so the memo estimates and hashes those once.
	var memo cost.PromptMemo
	pc := cost.FromRequest(e.current(job), cost.PromptOptions{}, &memo)
	pn := cost.FromRequest(pruner.RenderRequest(e.req, e.next, e.pol).Request, cost.PromptOptions{}, &memo)
	if pc.Model == "" {
		pc.Model, pn.Model = e.req.Model, e.req.Model
	}
	in := cachepolicy.Input{
		CurrentTokens: int64(pc.Tokens()),
		NextTokens:    int64(pn.Tokens()),
		CacheAlive:    true,
		TTL:           cachepolicy.PromptTTL(&pn),
		SummarizerUSD: summarizerUSD,
		Remaining:     cachepolicy.Horizon{Min: chk.Horizon, Max: chk.MaxHorizon}.Remaining(chk.Requests),
	}
	in.Price, _ = prices.Lookup(pc.Model)
	// The previous request wrote the cache with (about) the current render.
	c := cost.NewCache(prices)
	pc.Time = chk.LastRequest
	c.Send(&pc)
	pc.Time, pn.Time = chk.At, chk.At
	in.CurrentCached = c.Peek(&pc)
	in.NextCached = c.Peek(&pn)
	return cachepolicy.Decide(in), nil
}
