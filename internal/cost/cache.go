// Package cost is the replay cost model: token estimation (Estimator), a prompt-cache simulator
// over a request flattened into Segments (Anthropic breakpoints or automatic prefix caching)
// and per-model prices (prices.yaml). See docs/cost-model.md.
package cost

import (
	"encoding/binary"
	"hash/fnv"
	"time"
)

// TTL5m is Anthropic's default cache lifetime; TTL1h is the extended one (cache_control ttl "1h").
const (
	TTL5m = 5 * time.Minute
	TTL1h = time.Hour
)

// DefaultLookback is how many block boundaries before a breakpoint Anthropic checks for an
// earlier cache entry ("approximately 20 blocks" in the prompt-caching documentation).
const DefaultLookback = 20

// Segment is one cacheable unit of a prompt: a tool definition, a system block or one content
// block of a message.
type Segment struct {
	// Key identifies the content (and its position-relevant context such as the role); equal
	// keys mean byte-identical content for the purpose of prefix matching.
	Key uint64
	// Tokens is the estimated token count of the segment.
	Tokens int
	// Breakpoint is true when the client put cache_control on this block.
	Breakpoint bool
	// TTL is the breakpoint's cache lifetime (TTL5m when zero).
	TTL time.Duration
}

// Prompt is one request as the cache model sees it.
type Prompt struct {
	// Model is the model id the request was sent to.
	Model string
	// Time is when the request was sent; the zero time means "unknown" and is treated as
	// immediately after the previous request (no cache expiry).
	Time time.Time
	// Segments are tools, then system, then message blocks, in prompt order.
	Segments []Segment
	// Output is the number of output tokens the response had (0 when unknown).
	Output int
}

// Tokens returns the prompt's total estimated input tokens.
func (p *Prompt) Tokens() int {
	n := 0
	for _, s := range p.Segments {
		n += s.Tokens
	}
	return n
}

// Usage is the billing breakdown of one request (or a sum of requests), in tokens.
type Usage struct {
	// Input is uncached input billed at the base price.
	Input int64 `json:"input_tokens"`
	// CacheRead is input read from the cache.
	CacheRead int64 `json:"cache_read_tokens"`
	// CacheWrite5m is input written to the cache with the 5-minute TTL.
	CacheWrite5m int64 `json:"cache_write_5m_tokens"`
	// CacheWrite1h is input written to the cache with the 1-hour TTL.
	CacheWrite1h int64 `json:"cache_write_1h_tokens"`
	// Output is output tokens.
	Output int64 `json:"output_tokens"`
}

// Add returns u + v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		Input:        u.Input + v.Input,
		CacheRead:    u.CacheRead + v.CacheRead,
		CacheWrite5m: u.CacheWrite5m + v.CacheWrite5m,
		CacheWrite1h: u.CacheWrite1h + v.CacheWrite1h,
		Output:       u.Output + v.Output,
	}
}

// CacheWrite returns the tokens written to the cache with either TTL.
func (u Usage) CacheWrite() int64 { return u.CacheWrite5m + u.CacheWrite1h }

// Prompt returns every input token: uncached, read and written.
func (u Usage) Prompt() int64 { return u.Input + u.CacheRead + u.CacheWrite5m + u.CacheWrite1h }

// InputCost returns the USD cost of the input side of u at price p.
func (u Usage) InputCost(p Price) float64 {
	return (float64(u.Input)*p.Input +
		float64(u.CacheRead)*p.Input*p.CacheRead +
		float64(u.CacheWrite5m)*p.Input*p.CacheWrite5m +
		float64(u.CacheWrite1h)*p.Input*p.CacheWrite1h) / 1e6
}

// Cost returns the USD cost of u at price p, input and output.
func (u Usage) Cost(p Price) float64 {
	return u.InputCost(p) + float64(u.Output)*p.Output/1e6
}

// Bill is the cache model's verdict on one request.
type Bill struct {
	Usage
	// Price is the price the request was billed at.
	Price Price
	// KnownModel is false when the model was not in the price table (the fallback was used).
	KnownModel bool
	// Busted is true when the cache entry the previous request read or wrote was still alive
	// but this request's prefix no longer contains it (the content before it changed).
	Busted bool
	// LookbackMiss is true when the previous entry was alive and still a prefix of this
	// request, but no breakpoint of this request was close enough to find it.
	LookbackMiss bool
	// LostTokens is how many live cached tokens were not read because of a bust or a
	// lookback miss.
	LostTokens int64
	// Expired is true when the previous request's cache entry had expired before this request.
	Expired bool
}

type entry struct {
	tokens int64
	expiry time.Time
	ttl    time.Duration
}

// Cache simulates a provider's prompt cache for one session (one cache namespace). It is not
// safe for concurrent use; use one Cache per strategy being replayed.
type Cache struct {
	prices *Prices
	// lookback is how many block boundaries before a breakpoint are checked for an earlier
	// entry (DefaultLookback; negative: unlimited).
	lookback int
	entries  map[uint64]entry
	now      time.Time
	// last is the deepest entry the previous request read or wrote.
	last    uint64
	hasLast bool
	hashes  []uint64
	cum     []int64
}

// NewCache returns an empty cache simulator billing at prices (DefaultPrices when nil).
func NewCache(prices *Prices) *Cache {
	if prices == nil {
		prices = DefaultPrices()
	}
	return &Cache{prices: prices, lookback: DefaultLookback, entries: map[uint64]entry{}}
}

// Prices returns the price table the cache bills with.
func (c *Cache) Prices() *Prices { return c.prices }

// Peek reports how many leading tokens of p would be read from the cache if p were sent now,
// without changing the cache. Policies use it to weigh a rewrite against the live cache.
func (c *Cache) Peek(p *Prompt) int64 {
	price, _ := c.prices.Lookup(p.Model)
	t := c.clock(p.Time)
	c.prefix(p)
	best := c.longestHit(p, price, t)
	if best < 0 {
		return 0
	}
	return c.cum[best]
}

// Alive reports whether the previous request's deepest cache entry would still be alive at
// time t (the zero time meaning "right after the previous request").
func (c *Cache) Alive(t time.Time) bool {
	if !c.hasLast {
		return false
	}
	e, ok := c.entries[c.last]
	return ok && c.clock(t).Before(e.expiry)
}

func (c *Cache) clock(t time.Time) time.Time {
	if t.IsZero() || t.Before(c.now) {
		return c.now
	}
	return t
}

// prefix fills c.hashes / c.cum with the chained prefix hash and the cumulative tokens
// through each segment.
func (c *Cache) prefix(p *Prompt) {
	c.hashes = c.hashes[:0]
	c.cum = c.cum[:0]
	h := fnv.New64a()
	var buf [8]byte
	h.Write([]byte(p.Model))
	var sum int64
	for _, s := range p.Segments {
		binary.LittleEndian.PutUint64(buf[:], s.Key)
		h.Write(buf[:])
		sum += int64(s.Tokens)
		c.hashes = append(c.hashes, h.Sum64())
		c.cum = append(c.cum, sum)
	}
}

// longestHit returns the index of the deepest segment whose prefix is a live entry reachable
// under the cache mode's lookup rules, or -1.
func (c *Cache) longestHit(p *Prompt, price Price, t time.Time) int {
	alive := func(i int) bool {
		e, ok := c.entries[c.hashes[i]]
		return ok && t.Before(e.expiry) && e.tokens == c.cum[i]
	}
	switch price.Cache {
	case CacheNone:
		return -1
	case CacheAutomatic:
		for i := len(p.Segments) - 1; i >= 0; i-- {
			if alive(i) {
				return i
			}
		}
		return -1
	}
	best := -1
	for b := len(p.Segments) - 1; b >= 0; b-- {
		if !p.Segments[b].Breakpoint || b <= best {
			continue
		}
		lo := 0
		if c.lookback >= 0 {
			lo = b - c.lookback
		}
		if lo <= best {
			lo = best + 1
		}
		for i := b; i >= lo && i >= 0; i-- {
			if alive(i) {
				best = i
				break
			}
		}
	}
	return best
}

// Send bills prompt p against the cache and updates it as the provider would: the longest
// live prefix is read (and refreshed), then Anthropic writes each cacheable breakpoint after it
// (billed as cache writes) and automatic caching every block boundary (docs/cost-model.md).
func (c *Cache) Send(p *Prompt) Bill { return c.send(p, true) }

// Quote returns the bill Send would make for p now, without changing the cache: the price of
// a side request (such as a recovery round) that later requests do not build on.
func (c *Cache) Quote(p *Prompt) Bill { return c.send(p, false) }

// send bills p; commit applies the reads and writes to the cache.
func (c *Cache) send(p *Prompt, commit bool) Bill {
	price, known := c.prices.Lookup(p.Model)
	t := c.clock(p.Time)
	if commit {
		c.now = t
	}
	c.prefix(p)
	n := len(p.Segments)
	var total int64
	if n > 0 {
		total = c.cum[n-1]
	}
	bill := Bill{Price: price, KnownModel: known}
	bill.Output = int64(p.Output)

	var prev entry
	var prevAlive bool
	if c.hasLast {
		var ok bool
		prev, ok = c.entries[c.last]
		prevAlive = ok && t.Before(prev.expiry)
		bill.Expired = !prevAlive
	}

	best := c.longestHit(p, price, t)
	if best >= 0 {
		bill.CacheRead = c.cum[best]
		if commit {
			e := c.entries[c.hashes[best]]
			e.expiry = t.Add(e.ttl)
			c.entries[c.hashes[best]] = e
		}
	}
	if prevAlive && bill.CacheRead < prev.tokens {
		bill.LostTokens = prev.tokens - bill.CacheRead
		bill.Busted = true
		for i, h := range c.hashes {
			if h == c.last && c.cum[i] == prev.tokens {
				bill.Busted, bill.LookbackMiss = false, true
				break
			}
		}
	}

	deepest := best
	switch price.Cache {
	case CacheAnthropic:
		lastBP := -1
		for i := n - 1; i > best; i-- {
			if p.Segments[i].Breakpoint && c.cum[i] >= int64(price.MinCacheable) {
				lastBP = i
				break
			}
		}
		from := bill.CacheRead
		for i := best + 1; i <= lastBP; i++ {
			s := p.Segments[i]
			if !s.Breakpoint || c.cum[i] < int64(price.MinCacheable) {
				continue
			}
			ttl := s.TTL
			if ttl <= 0 {
				ttl = TTL5m
			}
			if ttl > TTL5m {
				bill.CacheWrite1h += c.cum[i] - from
			} else {
				bill.CacheWrite5m += c.cum[i] - from
			}
			if commit {
				c.put(c.hashes[i], c.cum[i], t, ttl)
			}
			from = c.cum[i]
			deepest = i
		}
	case CacheAutomatic:
		if total >= int64(price.MinCacheable) {
			for i := best + 1; commit && i < n; i++ {
				c.put(c.hashes[i], c.cum[i], t, TTL5m)
			}
			if price.CacheWrite5m != 1 {
				bill.CacheWrite5m = total - bill.CacheRead
			}
			deepest = n - 1
		}
	}
	bill.Input = total - bill.CacheRead - bill.CacheWrite5m - bill.CacheWrite1h
	if !commit {
		return bill
	}
	if deepest >= 0 {
		c.last = c.hashes[deepest]
		c.hasLast = true
	} else {
		c.hasLast = false
	}
	if len(c.entries) > 4096 {
		for k, e := range c.entries {
			if !t.Before(e.expiry) {
				delete(c.entries, k)
			}
		}
	}
	return bill
}

func (c *Cache) put(h uint64, tokens int64, now time.Time, ttl time.Duration) {
	expiry := now.Add(ttl)
	if e, ok := c.entries[h]; ok && e.expiry.After(expiry) {
		return
	}
	c.entries[h] = entry{tokens: tokens, expiry: expiry, ttl: ttl}
}
