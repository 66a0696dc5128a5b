// Package cachepolicy is the cache-aware flush decision shared by the proxy and condense replay:
// Decide keeps a flush when the cache expired or it saves more than its rewrite costs; MidRunCut
// and MidRunDue are the mid-run trigger. No I/O, no clock. See docs/cost-model.md §8.
package cachepolicy

import (
	"fmt"
	"math"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/cost"
	"github.com/condense-dev/condense/internal/wire"
)

// Defaults of the decision's knobs (the CRD and config defaults are the same numbers).
const (
	// DefaultHorizon is the fewest further requests a context is expected to still have.
	DefaultHorizon = 8
	// DefaultMaxHorizon is the most further requests a flush may take to pay for its rewrite.
	DefaultMaxHorizon = 32
	// DefaultGraceTurns is how many of the latest tool-using turns a mid-run flush never touches.
	DefaultGraceTurns = 3
)

// Horizon bounds the expected further requests of a context: as many more as it has already
// seen (since the session start or its last compaction), but at least Min and at most Max.
type Horizon struct {
	// Min is the fewest expected further requests (DefaultHorizon when <= 0).
	Min int
	// Max caps the expected further requests (DefaultMaxHorizon when <= 0; raised to Min
	// when smaller).
	Max int
}

// Remaining returns the expected further requests of a context that has seen soFar requests.
func (h Horizon) Remaining(soFar int) float64 {
	lo, hi := h.Min, h.Max
	if lo <= 0 {
		lo = DefaultHorizon
	}
	if hi <= 0 {
		hi = DefaultMaxHorizon
	}
	if hi < lo {
		hi = lo
	}
	return math.Min(math.Max(float64(lo), float64(soFar)), float64(hi))
}

// Input is everything the decision weighs. Token counts are prompt (input) tokens.
type Input struct {
	// CurrentTokens is the size of the request rendered with the current (committed) state.
	CurrentTokens int64
	// NextTokens is the size of the same request rendered with the flushed state.
	NextTokens int64
	// CurrentCached is how many leading tokens of the current render the live cache would serve.
	CurrentCached int64
	// NextCached is how many leading tokens of the flushed render the live cache would serve.
	NextCached int64
	// CacheAlive is false when the provider's prompt cache has expired (see Alive).
	CacheAlive bool
	// TTL is the lifetime of the cache entries a rewrite writes (cost.TTL1h selects the
	// 1-hour write price; anything else the 5-minute one).
	TTL time.Duration
	// Price is the session model's price (per million tokens, with cache multipliers).
	Price cost.Price
	// SummarizerUSD is what the flush's summarizer calls cost.
	SummarizerUSD float64
	// Remaining is the expected further requests (see Horizon.Remaining).
	Remaining float64
}

// Decision is the verdict on one flush.
type Decision struct {
	// Keep is true when the flush should be committed; false defers it.
	Keep bool
	// Reason says why, for logs and diagnostics.
	Reason string
	// GainUSD is the expected saving over the remaining requests (0 when the cache expired).
	GainUSD float64
	// LossUSD is the cost of re-writing the invalidated cached prefix plus the summarizer calls.
	LossUSD float64
}

// Decide weighs one flush (see the package comment).
func Decide(in Input) Decision {
	if !in.CacheAlive {
		return Decision{Keep: true, Reason: "prefix cache expired: the rewrite is free", LossUSD: in.SummarizerUSD}
	}
	read, write := multipliers(in.Price, in.TTL)
	saved := float64(in.CurrentTokens - in.NextTokens)
	lost := math.Max(float64(in.CurrentCached-in.NextCached), 0)
	perTok := in.Price.Input / 1e6
	gain := saved * read * in.Remaining * perTok
	loss := lost*math.Max(write-read, 0)*perTok + in.SummarizerUSD
	return Decision{
		Keep:    gain > loss,
		Reason:  fmt.Sprintf("saves %.0f tokens × %.0f requests ≈ $%.5f vs re-writing %.0f cached tokens ≈ $%.5f", saved, in.Remaining, gain, lost, loss),
		GainUSD: gain,
		LossUSD: loss,
	}
}

// multipliers returns the cache-read and cache-write price multipliers of p: a model without
// caching bills every token at the base price (1, 1); automatic caching writes at the base
// price.
func multipliers(p cost.Price, ttl time.Duration) (read, write float64) {
	read = p.CacheRead
	if p.Cache == cost.CacheNone {
		read = 1
	}
	write = p.CacheWrite5m
	if ttl >= cost.TTL1h && p.CacheWrite1h > 0 {
		write = p.CacheWrite1h
	}
	if p.Cache != cost.CacheAnthropic {
		write = 1
	}
	return read, write
}

// Alive reports whether a cache entry written by a request at last with lifetime ttl is still
// alive at now. A zero last (no earlier request known) is never alive; ttl <= 0 means
// cost.TTL5m.
func Alive(last, now time.Time, ttl time.Duration) bool {
	if last.IsZero() {
		return false
	}
	if ttl <= 0 {
		ttl = cost.TTL5m
	}
	return now.Before(last.Add(ttl))
}

// PromptTTL returns the cache lifetime a prompt's breakpoints ask for: cost.TTL1h when any
// breakpoint carries the 1-hour ttl, else cost.TTL5m.
func PromptTTL(p *cost.Prompt) time.Duration {
	for _, s := range p.Segments {
		if s.Breakpoint && s.TTL >= cost.TTL1h {
			return cost.TTL1h
		}
	}
	return cost.TTL5m
}

// RequestTTL returns the cache lifetime a parsed request's cache_control markers ask for:
// cost.TTL1h when any marker (tools, system or message blocks) has ttl "1h", else cost.TTL5m.
func RequestTTL(r *wire.Request) time.Duration {
	for _, t := range r.Tools {
		if gjson.GetBytes(t.Raw(), "cache_control.ttl").Str == "1h" {
			return cost.TTL1h
		}
	}
	if blocksTTL1h(r.System) {
		return cost.TTL1h
	}
	for _, m := range r.Messages {
		if blocksTTL1h(m.Blocks) {
			return cost.TTL1h
		}
	}
	return cost.TTL5m
}

func blocksTTL1h(bs []*wire.Block) bool {
	for _, b := range bs {
		if len(b.CacheControl) > 0 && gjson.GetBytes(b.CacheControl, "ttl").Str == "1h" {
			return true
		}
	}
	return false
}

// MidRunCut returns where a mid-run flush cuts msgs — after the grace+1-th latest tool-using
// assistant turn and its results, so the latest grace turns stay verbatim (0: not enough
// turns; grace <= 0: DefaultGraceTurns) — and a key identifying that cut.
func MidRunCut(msgs []*wire.Message, grace int) (cut int, key uint64) {
	return MidRunCutFunc(msgs, grace, func(i int) bool { return hasToolUse(msgs[i]) })
}

// MidRunCutFunc is MidRunCut with toolUsing telling which assistant messages are tool-using
// turns (pruner.ToolTurns: text observations answer a turn without tool calls).
func MidRunCutFunc(msgs []*wire.Message, grace int, toolUsing func(i int) bool) (cut int, key uint64) {
	if grace <= 0 {
		grace = DefaultGraceTurns
	}
	seen := 0
	for i := len(msgs) - 1; i > 0; i-- {
		if msgs[i].Role != "assistant" || !toolUsing(i) {
			continue
		}
		seen++
		if seen < grace+1 {
			continue
		}
		for j := i + 1; j < len(msgs); j++ {
			if msgs[j].Role == "assistant" {
				return j, xxhash.Sum64(msgs[j-1].Raw()) ^ uint64(j)
			}
		}
		return 0, 0
	}
	return 0, 0
}

// MidRunDue reports whether a mid-run flush at the cut identified by key is due, given the
// key of the cut weighed last: when the cut moved (new results became old enough) or the
// prompt cache expired (the rewrite is free now).
func MidRunDue(key, lastKey uint64, cacheAlive bool) bool {
	return key != lastKey || !cacheAlive
}

func hasToolUse(m *wire.Message) bool {
	for _, b := range m.Blocks {
		if b.Kind == wire.KindToolUse {
			return true
		}
	}
	return false
}
