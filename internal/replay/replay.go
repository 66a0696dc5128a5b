// Package replay replays recorded agent sessions through context-management strategies
// (internal/strategies) and bills every rewritten request with internal/cost, so cost, cache
// behaviour and validity compare on the same sessions. See docs/replay.md.
package replay

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/condense-dev/condense/internal/cost"
	"github.com/condense-dev/condense/internal/fidelity"
	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/wire"
)

// Meta is the recorded metadata of one request of a transcript.
type Meta struct {
	// Time is when the request was sent (zero when unknown).
	Time time.Time
	// Model is the model the agent asked for.
	Model string
	// OutputTokens is the recorded output of the response (0 when unknown).
	OutputTokens int64
}

// Transcript is a sequence of requests to replay: an imported session or a request log.
type Transcript interface {
	// Name names the transcript (its file name).
	Name() string
	// Kind names the source format ("claude-code", "requests", ...).
	Kind() string
	// WireFormat is the format of the request bodies.
	WireFormat() wire.Format
	// Len is the number of requests.
	Len() int
	// Meta returns request k's metadata.
	Meta(k int) Meta
	// AppendRequest appends request k's body to dst.
	AppendRequest(dst []byte, k int) ([]byte, error)
}

// TextObservations is implemented by transcripts of text-protocol agents, whose
// observations are user messages: ObservationHarness names the harness ("mini-swe-agent",
// "swe-agent"; "" for an agent with tool calls).
type TextObservations interface {
	ObservationHarness() string
}

// ObservationHarness returns the text-protocol harness of t ("" when t is not one).
func ObservationHarness(t Transcript) string {
	if o, ok := t.(TextObservations); ok {
		return o.ObservationHarness()
	}
	return ""
}

// ObservationPolicy returns the engine's observation policy for t: the built-in patterns of
// its text-protocol harness, off when t is not one.
func ObservationPolicy(t Transcript) pruner.ObservationPolicy {
	h := ObservationHarness(t)
	return pruner.ObservationPolicy{Enabled: h != "", Harness: h}
}

// Request is one request of a session as the agent sent it, handed to a strategy.
type Request struct {
	// Index is the 0-based request number within the session.
	Index int
	// Total is the number of requests in the session.
	Total int
	// Body is the request body the agent sent. Strategies must not modify it.
	Body []byte
	// Format is the body's wire format.
	Format wire.Format
	// Time is when the agent sent it (zero when the transcript has no times).
	Time time.Time
	// Model is the model the agent asked for.
	Model string
	// Cache is the strategy's own simulated provider cache, for cache-aware decisions
	// (Peek and Alive only: the replay calls Send after the strategy returns).
	Cache *cost.Cache
	// Estimator is the replay's token estimator.
	Estimator cost.Estimator
	// Prompt builds the cost-model prompt of a body in this request's format (with the
	// replay's estimator and breakpoint mode), for strategies that weigh token counts.
	Prompt func(body []byte) (cost.Prompt, error)
	// PromptOf is Prompt for a parsed or rendered request (cost.FromRequest: the same
	// prompt, without serializing or re-reading JSON); memo may be shared between renders
	// of this request.
	PromptOf func(r *wire.Request, memo *cost.PromptMemo) cost.Prompt
}

// Call is one extra model call a strategy made for a request (a summarizer call).
type Call struct {
	// Model is the model the call was billed at.
	Model string `json:"model"`
	// Input and Output are its tokens (Input billed at the base price, uncached).
	Input  int64 `json:"input_tokens"`
	Output int64 `json:"output_tokens"`
}

// Diagnostic is one notable event of a strategy on a request.
type Diagnostic struct {
	// Request is the 0-based request index (-1 for session-level events).
	Request int `json:"request"`
	// Kind is a short machine-readable category.
	Kind string `json:"kind"`
	// Detail is a human-readable explanation.
	Detail string `json:"detail,omitempty"`
}

// Result is what a strategy sends to the provider for one request.
type Result struct {
	// Body is the rewritten request body (the input body when unchanged).
	Body []byte
	// Calls are summarizer calls made while handling this request.
	Calls []Call
	// Diagnostics are notable events.
	Diagnostics []Diagnostic
	// Recoverable reports whether the original result of a tool call id can be brought back
	// with context_tree_query (nil: nothing the strategy removed can be).
	Recoverable func(id string) bool
}

// Runner handles the requests of one session for one strategy, in order. It may keep state
// between requests.
type Runner interface {
	// Rewrite returns what the provider receives for request r.
	Rewrite(ctx context.Context, r *Request) (Result, error)
	// Close releases the runner's resources.
	Close() error
}

// Strategy is a named context-management strategy; New makes a fresh Runner per session.
type Strategy interface {
	// Name is the strategy's name in reports ("none", "condense", ...).
	Name() string
	// New returns a runner for one session.
	New(ctx context.Context, t Transcript) (Runner, error)
}

// Validator checks that a body is a valid provider request; nil means valid.
type Validator func(format wire.Format, body []byte) error

// Options configures a replay.
type Options struct {
	// Strategies are replayed side by side; the first is the baseline savings are
	// measured against (normally "none").
	Strategies []Strategy
	// Prices is the price table (cost.DefaultPrices when nil).
	Prices *cost.Prices
	// Estimator estimates tokens (cost.DefaultEstimator when nil).
	Estimator cost.Estimator
	// Breakpoints selects where Anthropic cache breakpoints come from.
	Breakpoints cost.BreakpointMode
	// Validate checks every rewritten request (Validate in this package when nil).
	Validate Validator
	// Progress, when set, is called after each request of each strategy. Strategies run
	// concurrently, so it must be safe to call from several goroutines at once.
	Progress func()
	// Parallel bounds how many strategies run at once (GOMAXPROCS when <= 0).
	Parallel int
	// MaxDiagnostics caps the diagnostics kept per strategy and session (default 50); counts
	// are kept for all.
	MaxDiagnostics int
}

// Point is one request in a strategy's series.
type Point struct {
	// Context is the prompt size in tokens the provider saw.
	Context int64 `json:"context_tokens"`
	// Cost is the cumulative cost in USD through this request.
	Cost float64 `json:"cumulative_cost"`
	// Busted is true when this request broke a live cache prefix.
	Busted bool `json:"busted,omitempty"`
}

// StrategyReport is one strategy's totals over a session or a whole run.
type StrategyReport struct {
	// Name is the strategy name.
	Name string `json:"name"`
	// Requests counts requests billed.
	Requests int `json:"requests"`
	// Usage is the agent requests' input usage (output tokens excluded: they are the same for
	// every strategy and reported once per session).
	Usage cost.Usage `json:"usage"`
	// InputCost is the USD cost of Usage.
	InputCost float64 `json:"input_cost"`
	// Summarizer is the summarizer calls' usage.
	Summarizer cost.Usage `json:"summarizer_usage"`
	// SummarizerCalls counts summarizer calls.
	SummarizerCalls int `json:"summarizer_calls"`
	// SummarizerCost is the USD cost of the summarizer calls.
	SummarizerCost float64 `json:"summarizer_cost"`
	// Cost is InputCost + SummarizerCost + RecoveryCost: the charged cost.
	Cost float64 `json:"cost"`
	// Savings is the fraction of the baseline's (charged) cost saved (0.4 = 40% cheaper).
	Savings float64 `json:"savings"`
	// PeakContext is the largest prompt in tokens.
	PeakContext int64 `json:"peak_context_tokens"`
	// CacheBusts counts requests that broke a live cached prefix.
	CacheBusts int `json:"cache_busting_requests"`
	// LookbackMisses counts requests whose live prefix was too far before every breakpoint.
	LookbackMisses int `json:"lookback_misses"`
	// Expired counts requests that found the previous request's cache expired.
	Expired int `json:"cache_expired_requests"`
	// Invalid counts rewritten requests the provider would reject. A rewrite that cannot be
	// read at all is billed as the original request (what the proxy forwards when a render
	// fails), so a broken strategy never looks cheaper.
	Invalid int `json:"invalid_requests"`
	// Errors counts requests the strategy failed on (the original body was billed instead).
	Errors int `json:"errors"`
	// Fidelity counts the agent's uses of earlier tool output by what the strategy's requests
	// did with them: kept visible, recoverable, lost (docs/fidelity.md).
	Fidelity fidelity.Tally `json:"fidelity"`
	// RecoveryRounds counts requests whose uses were not all kept: each costs one extra
	// request (RecoveryQueries originals recovered, Reruns lost tool calls re-run).
	RecoveryRounds  int `json:"recovery_rounds"`
	RecoveryQueries int `json:"recovery_queries"`
	Reruns          int `json:"reruns"`
	// Recovery is the extra requests' usage (Output: the calls the agent writes); RecoveryCost
	// its USD cost.
	Recovery     cost.Usage `json:"recovery_usage"`
	RecoveryCost float64    `json:"recovery_cost"`
	// CostUncharged is InputCost + SummarizerCost: the cost without the recovery charges, and
	// SavingsUncharged the baseline's cost saved on that basis.
	CostUncharged    float64 `json:"cost_uncharged"`
	SavingsUncharged float64 `json:"savings_uncharged"`
	// DiagnosticCounts counts diagnostics by kind.
	DiagnosticCounts map[string]int `json:"diagnostic_counts,omitempty"`
	// Diagnostics are the first MaxDiagnostics diagnostics.
	Diagnostics []Diagnostic `json:"diagnostics,omitempty"`
	// Series has one point per request (session reports only).
	Series []Point `json:"series,omitempty"`
}

// SessionReport is the replay of one session file.
type SessionReport struct {
	// File is the session file name.
	File string `json:"file"`
	// Format is the source format.
	Format string `json:"format"`
	// Provider is the request wire format replayed.
	Provider wire.Format `json:"provider"`
	// Requests is the number of requests.
	Requests int `json:"requests"`
	// Models lists the models requested, in first-use order.
	Models []string `json:"models"`
	// UnknownModels lists models the price table has no entry for, billed as PricedAs says.
	UnknownModels []string `json:"unknown_models,omitempty"`
	// PricedAs maps each unknown model to the entry it was billed at (its family's, or the
	// fallback's).
	PricedAs map[string]string `json:"priced_as,omitempty"`
	// OutputTokens and OutputCost are the agent's recorded (else 0) output, identical for
	// every strategy.
	OutputTokens int64   `json:"output_tokens"`
	OutputCost   float64 `json:"output_cost"`
	// Strategies holds one report per strategy, in Options order.
	Strategies []StrategyReport `json:"strategies"`
	// Error is set when the file could not be imported.
	Error string `json:"error,omitempty"`
}

// Report is a whole replay run.
type Report struct {
	// Sessions are the per-file reports.
	Sessions []SessionReport `json:"sessions"`
	// Totals sums every session per strategy (no series).
	Totals []StrategyReport `json:"totals"`
	// PerSession is the distribution of the per-session savings, per strategy (Totals order).
	PerSession []Distribution `json:"per_session_savings"`
	// Baseline names the strategy savings are measured against.
	Baseline string `json:"baseline"`
	// Warnings are notes the reader must see with the figures (models priced by family).
	Warnings []string `json:"warnings,omitempty"`
}

// ErrNoStrategies is returned when Options has no strategies.
var ErrNoStrategies = errors.New("replay: no strategies")

// Run replays one transcript with every strategy.
func Run(ctx context.Context, t Transcript, o Options) (SessionReport, error) {
	if len(o.Strategies) == 0 {
		return SessionReport{}, ErrNoStrategies
	}
	rep := SessionReport{File: t.Name(), Format: t.Kind(), Provider: t.WireFormat(), Requests: t.Len()}
	prices := o.Prices
	if prices == nil {
		prices = cost.DefaultPrices()
	}
	seen := map[string]bool{}
	for k := 0; k < t.Len(); k++ {
		m := t.Meta(k)
		pr, how := prices.Resolve(m.Model)
		if !seen[m.Model] {
			seen[m.Model] = true
			rep.Models = append(rep.Models, m.Model)
			if how != cost.PricedExactly {
				rep.UnknownModels = append(rep.UnknownModels, m.Model)
				if rep.PricedAs == nil {
					rep.PricedAs = map[string]string{}
				}
				rep.PricedAs[m.Model] = pr.Match
			}
		}
		if m.OutputTokens > 0 {
			rep.OutputTokens += m.OutputTokens
			rep.OutputCost += float64(m.OutputTokens) * pr.Output / 1e6
		}
	}
	est := o.Estimator
	if est == nil {
		est = cost.DefaultEstimator
	}
	su, err := measureUses(ctx, t, est)
	if err != nil {
		return rep, fmt.Errorf("replay %s: %w", t.Name(), err)
	}
	rep.Strategies = make([]StrategyReport, len(o.Strategies))
	par := o.Parallel
	if par <= 0 {
		par = runtime.GOMAXPROCS(0)
	}
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	errs := make([]error, len(o.Strategies))
	for i, st := range o.Strategies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			rep.Strategies[i], errs[i] = runStrategy(ctx, t, st, prices, su, o)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return rep, err
	}
	setSavings(rep.Strategies)
	return rep, nil
}

// setSavings sets every report's savings against the first's cost, charged and not.
func setSavings(rs []StrategyReport) {
	for i := range rs {
		rs[i].Savings = savings(rs[0].Cost, rs[i].Cost)
		rs[i].SavingsUncharged = savings(rs[0].CostUncharged, rs[i].CostUncharged)
	}
}

func savings(base, c float64) float64 {
	if base <= 0 {
		return 0
	}
	return (base - c) / base
}

func runStrategy(ctx context.Context, t Transcript, st Strategy, prices *cost.Prices, su *sessionUses, o Options) (StrategyReport, error) {
	rep := StrategyReport{Name: st.Name(), DiagnosticCounts: map[string]int{}}
	maxDiag := o.MaxDiagnostics
	if maxDiag <= 0 {
		maxDiag = 50
	}
	diag := func(d Diagnostic) {
		rep.DiagnosticCounts[d.Kind]++
		if len(rep.Diagnostics) < maxDiag {
			rep.Diagnostics = append(rep.Diagnostics, d)
		}
	}
	validate := o.Validate
	if validate == nil {
		validate = Validate
	}
	format := t.WireFormat()
	est := o.Estimator
	if est == nil {
		est = cost.DefaultEstimator
	}
	popts := cost.PromptOptions{Format: format, Estimator: o.Estimator, Breakpoints: o.Breakpoints}
	cache := cost.NewCache(prices)
	seen := fidelity.NewIndex(su.memo.Overlay())
	seen.Observe(su.obs)
	runner, err := st.New(ctx, t)
	if err != nil {
		return rep, fmt.Errorf("replay %s: strategy %s: %w", t.Name(), st.Name(), err)
	}
	defer runner.Close()
	var cum float64
	for k := 0; k < t.Len(); k++ {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		pt := t.Meta(k)
		// A fresh buffer per request: runners may keep the bodies they were given.
		body, err := t.AppendRequest(nil, k)
		if err != nil {
			return rep, fmt.Errorf("replay %s: request %d: %w", t.Name(), k, err)
		}
		req := &Request{
			Index: k, Total: t.Len(), Body: body, Format: format, Time: pt.Time, Model: pt.Model, Cache: cache,
			Estimator: est,
			Prompt:    func(b []byte) (cost.Prompt, error) { return cost.FromBody(b, popts) },
			PromptOf:  func(r *wire.Request, m *cost.PromptMemo) cost.Prompt { return cost.FromRequest(r, popts, m) },
		}
		res, rerr := runner.Rewrite(ctx, req)
		if rerr != nil {
			if ctx.Err() != nil {
				return rep, ctx.Err()
			}
			rep.Errors++
			diag(Diagnostic{Request: k, Kind: "strategy-error", Detail: rerr.Error()})
			res = Result{Body: body}
		}
		if res.Body == nil {
			res.Body = body
		}
		for _, d := range res.Diagnostics {
			diag(d)
		}
		// The default validation parses the body; its parse is flattened for billing too.
		var parsed *wire.Request
		var verr error
		if o.Validate == nil {
			parsed, verr = parseValid(format, res.Body)
		} else {
			verr = validate(format, res.Body)
		}
		if verr != nil {
			rep.Invalid++
			diag(Diagnostic{Request: k, Kind: "invalid-request", Detail: verr.Error()})
		}
		var p cost.Prompt
		var perr error
		billed := res.Body
		if parsed != nil {
			p = cost.FromRequest(parsed, popts, nil)
		} else {
			p, perr = cost.FromBody(res.Body, popts)
		}
		if perr != nil {
			// The rewrite cannot even be read (it was counted invalid above unless a custom
			// validator let it through). Bill what the proxy forwards when its render fails:
			// the original request, so a broken strategy never looks cheaper.
			if verr == nil {
				rep.Invalid++
			}
			diag(Diagnostic{Request: k, Kind: "unbillable-request", Detail: perr.Error()})
			billed, parsed = body, nil
			if p, perr = cost.FromBody(body, popts); perr != nil {
				// The recorded request itself cannot be read: no strategy bills it.
				if o.Progress != nil {
					o.Progress()
				}
				continue
			}
		}
		if p.Model == "" {
			p.Model = pt.Model
		}
		p.Time = pt.Time
		bill := cache.Send(&p)
		rep.Requests++
		rep.Usage = rep.Usage.Add(bill.Usage)
		in := bill.Usage.InputCost(bill.Price)
		rep.InputCost += in
		step := in
		for _, c := range res.Calls {
			pr, _ := prices.Lookup(c.Model)
			u := cost.Usage{Input: c.Input, Output: c.Output}
			rep.Summarizer = rep.Summarizer.Add(u)
			rep.SummarizerCalls++
			sc := u.Cost(pr)
			rep.SummarizerCost += sc
			step += sc
		}
		step += rep.measure(k, billed, parsed, &p, res.Recoverable, seen, su, cache, format, est)
		cum += step
		ctxTokens := bill.Usage.Prompt()
		if ctxTokens > rep.PeakContext {
			rep.PeakContext = ctxTokens
		}
		if bill.Busted {
			rep.CacheBusts++
		}
		if bill.LookbackMiss {
			rep.LookbackMisses++
		}
		if bill.Expired {
			rep.Expired++
		}
		rep.Series = append(rep.Series, Point{Context: ctxTokens, Cost: cum, Busted: bill.Busted})
		if o.Progress != nil {
			o.Progress()
		}
	}
	rep.CostUncharged = rep.InputCost + rep.SummarizerCost
	rep.Cost = rep.CostUncharged + rep.RecoveryCost
	if len(rep.DiagnosticCounts) == 0 {
		rep.DiagnosticCounts = nil
	}
	return rep, nil
}

// Total sums session reports per strategy (by position) and recomputes savings against the
// first strategy.
func Total(reps []SessionReport) []StrategyReport {
	var tot []StrategyReport
	for _, r := range reps {
		if r.Error != "" {
			continue
		}
		for i, s := range r.Strategies {
			for len(tot) <= i {
				tot = append(tot, StrategyReport{Name: s.Name})
			}
			t := &tot[i]
			t.Requests += s.Requests
			t.Usage = t.Usage.Add(s.Usage)
			t.InputCost += s.InputCost
			t.Summarizer = t.Summarizer.Add(s.Summarizer)
			t.SummarizerCalls += s.SummarizerCalls
			t.SummarizerCost += s.SummarizerCost
			t.Cost += s.Cost
			if s.PeakContext > t.PeakContext {
				t.PeakContext = s.PeakContext
			}
			t.CacheBusts += s.CacheBusts
			t.LookbackMisses += s.LookbackMisses
			t.Expired += s.Expired
			t.Invalid += s.Invalid
			t.Errors += s.Errors
			t.Fidelity = t.Fidelity.Plus(s.Fidelity)
			t.RecoveryRounds += s.RecoveryRounds
			t.RecoveryQueries += s.RecoveryQueries
			t.Reruns += s.Reruns
			t.Recovery = t.Recovery.Add(s.Recovery)
			t.RecoveryCost += s.RecoveryCost
			t.CostUncharged += s.CostUncharged
			for k, v := range s.DiagnosticCounts {
				if t.DiagnosticCounts == nil {
					t.DiagnosticCounts = map[string]int{}
				}
				t.DiagnosticCounts[k] += v
			}
		}
	}
	if len(tot) > 0 {
		setSavings(tot)
	}
	return tot
}

// NewReport assembles a run's report from its session reports: totals per strategy, savings
// against the first strategy, which is the baseline.
func NewReport(sessions []SessionReport) *Report {
	r := &Report{Sessions: sessions, Totals: Total(sessions), PerSession: Distributions(sessions)}
	if len(r.Totals) > 0 {
		r.Baseline = r.Totals[0].Name
	}
	priced := map[string]string{}
	for _, s := range sessions {
		for m, as := range s.PricedAs {
			priced[m] = as
		}
	}
	models := make([]string, 0, len(priced))
	for m := range priced {
		models = append(models, m)
	}
	sort.Strings(models)
	for _, m := range models {
		label := m
		if label == "" {
			label = "(none recorded)"
		}
		r.Warnings = append(r.Warnings, fmt.Sprintf("model %s is not in the price table: billed at %s's prices", label, priced[m]))
	}
	return r
}
