package strategies

import (
	"context"
	"fmt"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/condense-dev/condense/internal/cachepolicy"
	"github.com/condense-dev/condense/internal/cost"
	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/replay"
	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/summarize"
	"github.com/condense-dev/condense/internal/wire"
)

// DefaultHorizon is the least number of further requests the cache-aware policy assumes a
// context has: as many as it has seen since its start or last compaction, clamped to
// [DefaultHorizon, DefaultMaxHorizon].
const DefaultHorizon = cachepolicy.DefaultHorizon

// DefaultMaxHorizon caps the expected further requests of the cache-aware policy: a flush must
// pay for its cache rewrite within this many requests.
const DefaultMaxHorizon = cachepolicy.DefaultMaxHorizon

// maxFollowups bounds the re-plans of one flush (Plan.Followup).
const maxFollowups = 4

// CondenseOptions configures the condense engine strategy.
type CondenseOptions struct {
	// Name is the strategy's report name ("condense" when empty).
	Name string
	// Policy is the engine policy (pruner.DefaultPolicy when nil).
	Policy *pruner.Policy
	// CacheAware wraps the flush trigger in the cache-aware decision (see Engine).
	CacheAware bool
	// Horizon is the minimum expected further requests of the cache-aware decision
	// (DefaultHorizon when <= 0).
	Horizon int
	// MaxHorizon caps the expected further requests (DefaultMaxHorizon when <= 0).
	MaxHorizon int
	// Summarizer summarizes flush batches (summarize.Extractive when nil).
	Summarizer summarize.Summarizer
	// Parallel bounds concurrent summarizer calls (4 when <= 0).
	Parallel int
	// MidRun (cache-aware only) also weighs a flush at every request inside a long agent
	// run, over the results older than the last GraceTurns tool-using turns.
	MidRun bool
	// GraceTurns is how many of the latest tool-using assistant turns a mid-run flush leaves
	// untouched (DefaultGraceTurns when <= 0).
	GraceTurns int
}

// DefaultGraceTurns is how many of the latest tool-using turns a mid-run flush never touches.
const DefaultGraceTurns = cachepolicy.DefaultGraceTurns

// Engine replays requests through the condense engine in-process (state in a per-session memory
// store, every request rendered by pruner.Render), flushing at each new final reply; CacheAware
// and MidRun add the proxy's cache-aware and mid-run flushes (docs/replay.md).
type Engine struct {
	opts CondenseOptions
	pol  pruner.Policy
}

// NewCondense returns the condense strategy (cache-aware by default when built from flags;
// the zero CondenseOptions is the plain engine with the default policy).
func NewCondense(o CondenseOptions) (*Engine, error) {
	pol := pruner.DefaultPolicy()
	if o.Policy != nil {
		pol = *o.Policy
	}
	if o.Horizon < 0 || o.MaxHorizon < 0 {
		return nil, fmt.Errorf("condense: negative horizon")
	}
	if o.Name == "" {
		o.Name = "condense"
	}
	return &Engine{opts: o, pol: pol}, nil
}

// Reference returns the engine with the reference extension's defaults (pruner.DefaultPolicy,
// extractive summaries, flush at every final reply, no cache awareness).
func Reference() *Engine {
	e, _ := NewCondense(CondenseOptions{Name: "reference"})
	return e
}

// Name implements replay.Strategy.
func (e *Engine) Name() string { return e.opts.Name }

// New implements replay.Strategy.
func (e *Engine) New(ctx context.Context, t replay.Transcript) (replay.Runner, error) {
	st, err := store.Open(ctx, "memory:")
	if err != nil {
		return nil, err
	}
	sum := e.opts.Summarizer
	if sum == nil {
		sum = summarize.Extractive{}
	}
	h := e.opts.Horizon
	if h <= 0 {
		h = DefaultHorizon
	}
	mh := e.opts.MaxHorizon
	if mh <= 0 {
		mh = DefaultMaxHorizon
	}
	if mh < h {
		mh = h
	}
	g := e.opts.GraceTurns
	if g <= 0 {
		g = DefaultGraceTurns
	}
	pol := e.pol
	if o := replay.ObservationPolicy(t); o.Enabled && !pol.Observations.Enabled {
		// A text-protocol agent's observations are its tool results.
		pol.Observations = o
	}
	return &engineRunner{e: e, pol: pol, st: pruner.NewState(), sum: sum, horizon: h, maxHorizon: mh, grace: g, memo: map[uint64]memoOut{},
		store: st, session: fmt.Sprintf("replay-%016x", xxhash.Sum64String(t.Name()))}, nil
}

type memoOut struct {
	text string
	ok   bool
}

type engineRunner struct {
	e          *Engine
	pol        pruner.Policy // the engine's, with the session's text observations on
	st         *pruner.State
	sum        summarize.Summarizer
	horizon    int
	maxHorizon int
	grace      int
	// prevLen and ctxStart detect context restarts (compaction): the message count drops.
	prevLen, ctxStart int
	// lastCut is the hash of the mid-run view last weighed.
	lastCut uint64
	// lastFinal is the hash of the last final assistant reply that triggered.
	lastFinal uint64
	due       bool
	memo      map[uint64]memoOut
	base      time.Time
	store     store.Store
	session   string
	version   uint64
}

// Close implements replay.Runner.
func (r *engineRunner) Close() error { return r.store.Close() }

// commit persists st and its blobs to the embedded store and makes the state loaded back from
// it current.
func (r *engineRunner) commit(ctx context.Context, st *pruner.State, blobs []pruner.Blob) error {
	for _, b := range blobs {
		if err := r.store.PutBlob(ctx, r.session, b.Key, b.Data); err != nil {
			return err
		}
	}
	data, err := st.MarshalBinary()
	if err != nil {
		return err
	}
	v, err := r.store.Commit(ctx, r.session, r.version, data, 0)
	if err != nil {
		return err
	}
	r.version = v
	snap, err := r.store.Load(ctx, r.session)
	if err != nil {
		return err
	}
	loaded := pruner.NewState()
	if err := loaded.UnmarshalBinary(snap.State); err != nil {
		return err
	}
	r.st = loaded
	return nil
}

// finalReply returns the hash of the request's last assistant message when it is not a
// tool-using turn (turns: pruner.ToolTurns) — a final reply —, else 0.
func finalReply(req *wire.Request, turns []bool) uint64 {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role != "assistant" {
			continue
		}
		if turns[i] {
			return 0
		}
		h := xxhash.Sum64(m.Raw())
		if h == 0 {
			h = 1
		}
		return h
	}
	return 0
}

// Rewrite implements replay.Runner: flush when due (and worth it), then render.
func (r *engineRunner) Rewrite(ctx context.Context, req *replay.Request) (replay.Result, error) {
	wr, err := wire.Parse(req.Format, req.Body)
	if err != nil {
		return replay.Result{}, err
	}
	now := req.Time
	if now.IsZero() {
		if r.base.IsZero() {
			r.base = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
		}
		now = r.base.Add(time.Duration(req.Index) * time.Second)
	}
	var res replay.Result
	if len(wr.Messages) < r.prevLen {
		r.ctxStart = req.Index
	}
	r.prevLen = len(wr.Messages)
	turns := pruner.ToolTurns(wr, r.pol)
	if h := finalReply(wr, turns); h != 0 && h != r.lastFinal {
		r.lastFinal = h
		r.due = true
	}
	if r.due {
		if err := r.flush(ctx, req, wr, wr, now, &res, ""); err != nil {
			return replay.Result{}, err
		}
	}
	if !r.due && r.e.opts.CacheAware && r.e.opts.MidRun {
		if cut, key := cachepolicy.MidRunCutFunc(wr.Messages, r.grace, func(i int) bool { return turns[i] }); cut > 0 {
			if cachepolicy.MidRunDue(key, r.lastCut, req.Cache.Alive(req.Time)) {
				r.lastCut = key
				view := wr.WithMessages(wr.Messages[:cut])
				if err := r.flush(ctx, req, view, wr, now, &res, "mid-run"); err != nil {
					return replay.Result{}, err
				}
				r.due = false
			}
		}
	}
	out := pruner.Render(wr, r.st, r.pol)
	for _, d := range out.Diagnostics {
		res.Diagnostics = append(res.Diagnostics, replay.Diagnostic{Request: req.Index, Kind: string(d.Kind), Detail: d.Detail})
	}
	if out.Fallback != "" {
		res.Diagnostics = append(res.Diagnostics, replay.Diagnostic{Request: req.Index, Kind: "render-fallback", Detail: out.Fallback})
	}
	if len(out.Diagnostics) > 0 {
		r.st, _ = r.st.WithDiagnostics(out.Diagnostics)
	}
	res.Body = out.Body
	st := r.st
	res.Recoverable = func(id string) bool { return len(st.KeysForID(id)) > 0 }
	return res, nil
}

// flush plans (over view) and summarizes a flush, then commits it (reference) or weighs it
// against the cache first (cache-aware) by rendering wr with and without it. tag labels
// mid-run flushes in diagnostics.
func (r *engineRunner) flush(ctx context.Context, req *replay.Request, view, wr *wire.Request, now time.Time, res *replay.Result, tag string) error {
	kind := "flush"
	if tag != "" {
		kind += "-" + tag
	}
	st := r.st
	var blobs []pruner.Blob
	var calls []replay.Call
	var sumUSD float64
	prices := req.Cache.Prices()
	for round := 0; round <= maxFollowups; round++ {
		plan, err := pruner.PlanFlush(view, st, r.pol, now)
		if err != nil {
			return err
		}
		if plan.Empty() {
			break
		}
		outputs := map[string]string{}
		var todo []*summarize.Request
		var keys []uint64
		for _, b := range plan.Batches {
			k := xxhash.Sum64String(string(b.Kind) + "\x00" + b.Prompt)
			if m, ok := r.memo[k]; ok {
				if m.ok {
					outputs[b.ID] = m.text
				}
				continue
			}
			sr := &summarize.Request{ID: b.ID, System: b.System, Prompt: b.Prompt, Parts: b.Parts}
			if b.Kind == pruner.KindRangeFusion {
				sr.Kind = summarize.KindRange
			}
			for _, c := range b.Calls {
				sr.Calls = append(sr.Calls, summarize.Call{Label: c.Label, Tool: c.Tool, Args: c.Args, Result: c.Result, IsError: c.IsError})
			}
			todo = append(todo, sr)
			keys = append(keys, k)
		}
		for i, o := range summarize.Run(ctx, r.sum, todo, r.e.opts.Parallel) {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if o.Err != nil {
				r.memo[keys[i]] = memoOut{}
				res.Diagnostics = append(res.Diagnostics, replay.Diagnostic{Request: req.Index, Kind: "summarizer-error", Detail: o.Err.Error()})
				continue
			}
			r.memo[keys[i]] = memoOut{text: o.Result.Text, ok: true}
			outputs[o.ID] = o.Result.Text
			u := o.Result.Usage
			if u.InputTokens > 0 || u.OutputTokens > 0 || o.Result.Model != summarize.ExtractiveModel {
				c := replay.Call{Model: o.Result.Model, Input: u.InputTokens + u.CacheReadTokens + u.CacheCreationTokens, Output: u.OutputTokens}
				calls = append(calls, c)
				pr, _ := prices.Lookup(c.Model)
				sumUSD += cost.Usage{Input: c.Input, Output: c.Output}.Cost(pr)
			}
		}
		next, err := plan.Apply(outputs)
		if err != nil {
			return err
		}
		blobs = append(blobs, plan.Blobs...)
		st = next
		if !plan.Followup {
			break
		}
	}
	// Summarizer calls are paid whether or not the flush is kept.
	res.Calls = append(res.Calls, calls...)
	if st == r.st {
		r.due = false
		return nil
	}
	if !r.e.opts.CacheAware {
		r.due = false
		if err := r.commit(ctx, st, blobs); err != nil {
			return err
		}
		res.Diagnostics = append(res.Diagnostics, replay.Diagnostic{Request: req.Index, Kind: kind})
		return nil
	}
	keep, why, err := r.worthIt(req, wr, st, sumUSD)
	if err != nil {
		return err
	}
	if keep {
		r.due = false
		if err := r.commit(ctx, st, blobs); err != nil {
			return err
		}
		res.Diagnostics = append(res.Diagnostics, replay.Diagnostic{Request: req.Index, Kind: kind, Detail: why})
	} else {
		res.Diagnostics = append(res.Diagnostics, replay.Diagnostic{Request: req.Index, Kind: kind + "-deferred", Detail: why})
	}
	return nil
}

// worthIt is the cache-aware decision (cachepolicy.Decide): keep the flushed state st when the
// cache has expired anyway, or when the expected savings over the remaining requests exceed
// the cost of re-writing the invalidated cached prefix plus the summarizer calls.
func (r *engineRunner) worthIt(req *replay.Request, wr *wire.Request, st *pruner.State, sumUSD float64) (bool, string, error) {
	if !req.Cache.Alive(req.Time) {
		d := cachepolicy.Decide(cachepolicy.Input{CacheAlive: false, SummarizerUSD: sumUSD})
		return d.Keep, d.Reason, nil
	}
	// As the proxy weighs (internal/flush): both renders flattened unserialized, sharing a memo.
	var memo cost.PromptMemo
	pc := req.PromptOf(pruner.RenderRequest(wr, r.st, r.pol).Request, &memo)
	pn := req.PromptOf(pruner.RenderRequest(wr, st, r.pol).Request, &memo)
	if pc.Model == "" {
		pc.Model, pn.Model = req.Model, req.Model
	}
	pc.Time, pn.Time = req.Time, req.Time
	price, _ := req.Cache.Prices().Lookup(pc.Model)
	d := cachepolicy.Decide(cachepolicy.Input{
		CurrentTokens: int64(pc.Tokens()),
		NextTokens:    int64(pn.Tokens()),
		CurrentCached: req.Cache.Peek(&pc),
		NextCached:    req.Cache.Peek(&pn),
		CacheAlive:    true,
		TTL:           cachepolicy.PromptTTL(&pn),
		Price:         price,
		SummarizerUSD: sumUSD,
		Remaining:     cachepolicy.Horizon{Min: r.horizon, Max: r.maxHorizon}.Remaining(req.Index - r.ctxStart),
	})
	return d.Keep, d.Reason, nil
}
