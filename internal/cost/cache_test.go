package cost

import (
	"errors"
	"math"
	"testing"
	"time"
)

var t0 = time.Date(2026, 5, 11, 10, 0, 0, 0, time.UTC)

func seg(key uint64, tokens int, bp bool) Segment {
	return Segment{Key: key, Tokens: tokens, Breakpoint: bp}
}

func approx(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-12 {
		t.Fatalf("%s = %.12f, want %.12f", what, got, want)
	}
}

func wantUsage(t *testing.T, name string, b Bill, input, read, w5, w1 int64) {
	t.Helper()
	if b.Input != input || b.CacheRead != read || b.CacheWrite5m != w5 || b.CacheWrite1h != w1 {
		t.Fatalf("%s: usage = input %d read %d write5m %d write1h %d, want %d %d %d %d",
			name, b.Input, b.CacheRead, b.CacheWrite5m, b.CacheWrite1h, input, read, w5, w1)
	}
}

// TestAnthropicCacheRules walks one session through a write, a read with a moved breakpoint,
// TTL expiry and a prefix-changing rewrite, at claude-sonnet-4-5 prices ($3/MTok input,
// write 1.25× = $3.75, read 0.1× = $0.30, minimum cacheable prefix 1024 tokens).
func TestAnthropicCacheRules(t *testing.T) {
	c := NewCache(nil)
	const model = "claude-sonnet-4-5-20250929"

	// A: tools 1000 (bp, but 1000 < 1024: not cacheable), system 500 (bp, prefix 1500),
	// user 2000 (bp, prefix 3500). Nothing cached: write 1500 + 2000 = 3500.
	// cost = 3500 × 3.75 / 1e6 = 0.013125
	a := Prompt{Model: model, Time: t0, Segments: []Segment{seg(1, 1000, true), seg(2, 500, true), seg(3, 2000, true)}}
	b := c.Send(&a)
	wantUsage(t, "A", b, 0, 0, 3500, 0)
	approx(t, "A cost", b.Cost(), 0.013125)
	if b.Busted || b.Expired || !b.KnownModel {
		t.Fatalf("A flags: %+v", b)
	}

	// B, one minute later: the client moved its message breakpoint to the new last block.
	// The lookback from the breakpoint at index 4 finds A's entry at index 2 (3500 tokens).
	// read 3500, write 4500-3500 = 1000. cost = 3500×0.30/1e6 + 1000×3.75/1e6 = 0.0048
	bp := Prompt{Model: model, Time: t0.Add(time.Minute), Segments: []Segment{
		seg(1, 1000, true), seg(2, 500, true), seg(3, 2000, false), seg(4, 300, false), seg(5, 700, true)}}
	b = c.Send(&bp)
	wantUsage(t, "B", b, 0, 3500, 1000, 0)
	approx(t, "B cost", b.Cost(), 0.0048)
	if b.Busted || b.Expired {
		t.Fatalf("B flags: %+v", b)
	}

	// C, six minutes after B: every entry (last written or refreshed at t0+1m) expired at
	// t0+6m. C = B + 200 + 300 (bp) = 5000 tokens: write 1500 (system bp) + 3500 = 5000.
	cp := Prompt{Model: model, Time: t0.Add(7 * time.Minute), Segments: append(append([]Segment{}, bp.Segments[:4]...),
		seg(5, 700, false), seg(6, 200, false), seg(7, 300, true))}
	cp.Segments[2].Breakpoint = false
	b = c.Send(&cp)
	wantUsage(t, "C", b, 0, 0, 5000, 0)
	if !b.Expired || b.Busted {
		t.Fatalf("C flags: %+v", b)
	}

	// D, one minute after C, rewrites the first user block (key 3 → 33): only the
	// system-breakpoint entry (1500) still matches; C's 5000-token entry is lost (bust).
	// read 1500, write 3500; cost = 1500×0.30/1e6 + 3500×3.75/1e6 = 0.0135750
	dp := Prompt{Model: model, Time: t0.Add(8 * time.Minute), Segments: append([]Segment{}, cp.Segments...)}
	dp.Segments[2] = seg(33, 2000, false)
	b = c.Send(&dp)
	wantUsage(t, "D", b, 0, 1500, 3500, 0)
	approx(t, "D cost", b.Cost(), 0.013575)
	if !b.Busted || b.LostTokens != 3500 || b.LookbackMiss {
		t.Fatalf("D flags: %+v", b)
	}

	// E = D exactly, with no timestamp: treated as immediately after D, full read of 5000.
	ep := dp
	ep.Time = time.Time{}
	b = c.Send(&ep)
	wantUsage(t, "E", b, 0, 5000, 0, 0)
}

// TestAnthropicInputAfterLastBreakpoint: tokens after the last breakpoint are plain input.
func TestAnthropicInputAfterLastBreakpoint(t *testing.T) {
	c := NewCache(nil)
	// system 2000 (bp) + user 300 (no bp): write 2000, input 300.
	// cost = 2000×3.75/1e6 + 300×3/1e6 = 0.0075 + 0.0009 = 0.0084
	b := c.Send(&Prompt{Model: "claude-sonnet-4-5", Segments: []Segment{seg(1, 2000, true), seg(2, 300, false)}, Output: 100})
	wantUsage(t, "first", b, 300, 0, 2000, 0)
	approx(t, "input cost", b.Usage.InputCost(b.Price), 0.0084)
	// output 100 × $15/MTok = 0.0015
	approx(t, "cost", b.Cost(), 0.0099)
}

// TestAnthropicNoBreakpointsNoCache: without cache_control nothing is cached or read.
func TestAnthropicNoBreakpointsNoCache(t *testing.T) {
	c := NewCache(nil)
	p := Prompt{Model: "claude-opus-4-5", Segments: []Segment{seg(1, 5000, false), seg(2, 5000, false)}}
	for i := 0; i < 2; i++ {
		b := c.Send(&p)
		wantUsage(t, "no bp", b, 10000, 0, 0, 0)
		// opus 4.5: $5/MTok → 10000 × 5 / 1e6 = 0.05
		approx(t, "cost", b.Cost(), 0.05)
	}
}

// TestAnthropicMinCacheable: opus-4-5 caches only prefixes of 4096 tokens or more.
func TestAnthropicMinCacheable(t *testing.T) {
	c := NewCache(nil)
	p := Prompt{Model: "claude-opus-4-5", Segments: []Segment{seg(1, 3000, true), seg(2, 1000, true)}}
	b := c.Send(&p)
	wantUsage(t, "below", b, 4000, 0, 0, 0)
	p.Segments = append(p.Segments, seg(3, 96, true)) // prefix 4096 now cacheable
	b = c.Send(&p)
	wantUsage(t, "at", b, 0, 0, 4096, 0)
}

// TestAnthropicLookback: an entry more than 20 blocks before every breakpoint is not found.
func TestAnthropicLookback(t *testing.T) {
	for _, tc := range []struct {
		lookback    int
		read, write int64
		miss        bool
	}{
		// 22 new blocks of 10 tokens; the only breakpoint is 22 blocks after the entry.
		{DefaultLookback, 0, 2520, true},
		// unlimited lookback: read the 2300-token entry, write the 220 new tokens.
		{-1, 2300, 220, false},
	} {
		c := NewCache(nil)
		c.lookback = tc.lookback
		first := []Segment{seg(1, 2000, false), seg(2, 100, false), seg(3, 100, false), seg(4, 100, true)}
		c.Send(&Prompt{Model: "claude-sonnet-4-5", Time: t0, Segments: first})
		next := append([]Segment{}, first...)
		next[3].Breakpoint = false
		for i := 0; i < 22; i++ {
			next = append(next, seg(uint64(100+i), 10, i == 21))
		}
		b := c.Send(&Prompt{Model: "claude-sonnet-4-5", Time: t0.Add(time.Second), Segments: next})
		wantUsage(t, "lookback", b, 0, tc.read, tc.write, 0)
		if b.LookbackMiss != tc.miss || b.Busted {
			t.Fatalf("lookback %d flags: %+v", tc.lookback, b)
		}
	}
}

// TestAnthropicOneHourTTL: a ttl "1h" breakpoint is billed at 2× and survives 30 minutes.
func TestAnthropicOneHourTTL(t *testing.T) {
	c := NewCache(nil)
	p := Prompt{Model: "claude-sonnet-4-5", Time: t0, Segments: []Segment{{Key: 1, Tokens: 10000, Breakpoint: true, TTL: TTL1h}, seg(2, 50, false)}}
	b := c.Send(&p)
	wantUsage(t, "write", b, 50, 0, 0, 10000)
	// 10000 × 3 × 2 / 1e6 + 50 × 3 / 1e6 = 0.06 + 0.00015
	approx(t, "1h write cost", b.Cost(), 0.06015)
	p.Time = t0.Add(30 * time.Minute)
	b = c.Send(&p)
	wantUsage(t, "read", b, 50, 10000, 0, 0)
	p.Time = t0.Add(30*time.Minute + 61*time.Minute) // 61 min after the refresh
	b = c.Send(&p)
	wantUsage(t, "expired", b, 50, 0, 0, 10000)
	if !b.Expired {
		t.Fatal("want expired")
	}
}

// TestAutomaticCache: OpenAI-style caching reads the longest cached prefix, no write fee.
func TestAutomaticCache(t *testing.T) {
	c := NewCache(nil)
	p := Prompt{Model: "gpt-5", Time: t0, Segments: []Segment{seg(1, 1500, false), seg(2, 500, false)}}
	b := c.Send(&p)
	wantUsage(t, "first", b, 2000, 0, 0, 0)
	p.Segments = append(p.Segments, seg(3, 1000, false))
	p.Time = t0.Add(time.Minute)
	b = c.Send(&p)
	wantUsage(t, "second", b, 1000, 2000, 0, 0)
	// gpt-5: $1.25/MTok, read 0.1× → 2000×0.125/1e6 + 1000×1.25/1e6 = 0.00025 + 0.00125
	approx(t, "cost", b.Cost(), 0.0015)
	// Change the second block: only the first 1500 tokens match → bust.
	p.Segments[1] = seg(22, 500, false)
	b = c.Send(&p)
	wantUsage(t, "bust", b, 1500, 1500, 0, 0)
	if !b.Busted || b.LostTokens != 1500 {
		t.Fatalf("flags %+v", b)
	}
}

// TestNoCacheModel: gpt-4 has no prompt caching.
func TestNoCacheModel(t *testing.T) {
	c := NewCache(nil)
	p := Prompt{Model: "gpt-4-0613", Segments: []Segment{seg(1, 1500, true)}}
	c.Send(&p)
	b := c.Send(&p)
	wantUsage(t, "gpt-4", b, 1500, 0, 0, 0)
	approx(t, "cost", b.Cost(), 1500*30/1e6)
}

// TestPeekDoesNotChangeCache: Peek reports the readable prefix without refreshing or writing.
func TestPeekDoesNotChangeCache(t *testing.T) {
	c := NewCache(nil)
	p := Prompt{Model: "claude-sonnet-4-5", Time: t0, Segments: []Segment{seg(1, 2000, true), seg(2, 10, false)}}
	if got := c.Peek(&p); got != 0 {
		t.Fatalf("peek empty = %d", got)
	}
	c.Send(&p)
	q := p
	q.Time = t0.Add(4 * time.Minute)
	if got := c.Peek(&q); got != 2000 {
		t.Fatalf("peek = %d", got)
	}
	if !c.Alive(t0.Add(4*time.Minute)) || c.Alive(t0.Add(5*time.Minute)) {
		t.Fatal("Alive wrong")
	}
	q.Time = t0.Add(6 * time.Minute) // Peek at 4m did not refresh: expired
	if got := c.Peek(&q); got != 0 {
		t.Fatalf("peek after expiry = %d", got)
	}
}

func TestPriceLookup(t *testing.T) {
	p := DefaultPrices()
	for _, tc := range []struct {
		model string
		input float64
		known bool
		mode  CacheMode
	}{
		{"claude-sonnet-4-5-20250929", 3, true, CacheAnthropic},
		{"anthropic/claude-opus-4-5", 5, true, CacheAnthropic},
		{"claude-opus-4-1-20250805", 15, true, CacheAnthropic},
		{"gpt-5-mini-2025-08-07", 0.25, true, CacheAutomatic},
		{"gpt-5.1-codex", 1.25, true, CacheAutomatic},
		{"gemini-3-pro-preview", 2, true, CacheAutomatic},
		{"some-unknown-model", 3, false, CacheAnthropic},
		{"", 3, false, CacheAnthropic},
	} {
		pr, known := p.Lookup(tc.model)
		if pr.Input != tc.input || known != tc.known || pr.Cache != tc.mode {
			t.Errorf("Lookup(%q) = %+v known=%v", tc.model, pr, known)
		}
	}
	if pr, _ := p.Lookup("claude-sonnet-4-5"); pr.CacheRead != 0.1 || pr.CacheWrite5m != 1.25 || pr.CacheWrite1h != 2 || pr.MinCacheable != 1024 {
		t.Fatalf("defaults not applied: %+v", pr)
	}
}

func TestParsePricesErrors(t *testing.T) {
	for name, doc := range map[string]string{
		"unknown key": "models:\n  - {match: a, input: 1, output: 2, bogus: 3}\n",
		"duplicate":   "models:\n  - {match: a, input: 1, output: 2}\n  - {match: a, input: 1, output: 2}\n",
		"no models":   "fallback: a\n",
		"bad mode":    "models:\n  - {match: a, input: 1, output: 2, cache: sometimes}\n",
		"negative":    "models:\n  - {match: a, input: -1, output: 2}\n",
		"fallback":    "fallback: zzz\nmodels:\n  - {match: a, input: 1, output: 2}\n",
		"syntax":      "models: [\n",
	} {
		_, err := ParsePrices(name, []byte(doc))
		var pe *PriceError
		if !errors.As(err, &pe) {
			t.Errorf("%s: err = %v, want *PriceError", name, err)
		}
	}
}

// TestQuoteLeavesCacheAlone: Quote bills a side request exactly as Send would, and the cache
// afterwards behaves as if it had never been made (no write it did, no refresh of what it read).
func TestQuoteLeavesCacheAlone(t *testing.T) {
	const model = "claude-sonnet-4-5"
	a := Prompt{Model: model, Time: t0, Segments: []Segment{seg(1, 2000, true)}}
	// The side request extends a by 500 tokens with a breakpoint at its end.
	side := Prompt{Model: model, Time: t0.Add(time.Minute), Segments: []Segment{seg(1, 2000, true), seg(2, 500, true)}}

	withQuote, plain := NewCache(nil), NewCache(nil)
	withQuote.Send(&a)
	plain.Send(&a)
	q := withQuote.Quote(&side)
	// read 2000 (a's entry), write 500.
	wantUsage(t, "quote", q, 0, 2000, 500, 0)
	if s := NewCache(nil); true {
		s.Send(&a)
		approx(t, "quote = send", q.Cost(), s.Send(&side).Cost())
	}
	// Four minutes after the quote (five after a): a's entry expired in both caches, since
	// the quote's read did not refresh it, and the quote's write at 2500 does not exist.
	later := Prompt{Model: model, Time: t0.Add(5*time.Minute + time.Second), Segments: side.Segments}
	got, want := withQuote.Send(&later), plain.Send(&later)
	if got.Usage != want.Usage || !got.Expired {
		t.Fatalf("after a quote: %+v, without: %+v", got.Usage, want.Usage)
	}
}

// TestPriceFamilies: a model the table does not list is priced as the newest entry of its
// family, else its vendor's fallback, and Resolve says so.
func TestPriceFamilies(t *testing.T) {
	p := DefaultPrices()
	for _, tc := range []struct {
		model, match string
		how          Pricing
	}{
		{"claude-haiku-4-5-20251001", "claude-haiku-4-5", PricedExactly},
		{"claude-opus-4-7", "claude-opus-4-6", PricedByFamily},
		{"claude-haiku-5", "claude-haiku-4-5", PricedByFamily},
		{"claude-3-9-haiku-2027", "claude-haiku-4-5", PricedByFamily},
		{"anthropic/claude-sonnet-5", "claude-sonnet-4-6", PricedByFamily},
		{"claude-next", "claude-sonnet-4-5", PricedByFamily},
		{"claude-opus-4-20250514", "claude-opus-4", PricedExactly},
		{"gpt-5.3-codex", "gpt-5.2", PricedByFamily},
		{"gpt-5-mini-2025-08-07", "gpt-5-mini", PricedExactly},
		{"claude-sonnet-4-5[1m]", "claude-sonnet-4-5", PricedExactly},
		{"gpt-6-mini", "gpt-5-mini", PricedByFamily},
		{"gpt-7", "gpt-5.2", PricedByFamily},
		{"gemini-4-flash-preview", "gemini-2.5-flash", PricedByFamily},
		{"llama-3-70b", "claude-sonnet-4-5", PricedAsFallback},
		{"", "claude-sonnet-4-5", PricedAsFallback},
	} {
		pr, how := p.Resolve(tc.model)
		if pr.Match != tc.match || how != tc.how {
			t.Errorf("Resolve(%q) = %s, %d; want %s, %d", tc.model, pr.Match, how, tc.match, tc.how)
		}
		if _, known := p.Lookup(tc.model); known != (tc.how == PricedExactly) {
			t.Errorf("Lookup(%q) known = %v", tc.model, known)
		}
	}
}
