package summarize

import (
	"context"
	"sync"
	"time"
)

// DefaultProbeCooldown is how long the FallbackController stays on the fallback model before
// it lets one request probe the primary again (reference §8.5: 10 minutes).
const DefaultProbeCooldown = 10 * time.Minute

// EventKind names a FallbackController transition worth telling an operator about.
type EventKind string

const (
	// EventEnter: the primary summarizer model is failing; the session's own model is used
	// until it recovers.
	EventEnter EventKind = "enter"
	// EventRecover: a probe of the primary succeeded; it is used again.
	EventRecover EventKind = "recover"
)

// Event is one FallbackController transition.
type Event struct {
	Kind     EventKind // what happened
	Primary  string    // primary endpoint label
	Fallback string    // fallback endpoint label ("" for EventRecover)
}

// FallbackController is the in-memory outage state shared by all calls of one Fallback
// summarizer (reference §8.5): which model to try, when to probe the primary again, and
// whether an "entered fallback" warning is still owed. Safe for concurrent use.
type FallbackController struct {
	// Cooldown between probes of the primary while in fallback; zero means DefaultProbeCooldown.
	Cooldown time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu          sync.Mutex
	inFallback  bool
	lastProbeAt time.Time
	owedEnter   bool
}

// target is what chooseTarget elects.
type target uint8

const (
	targetPrimary target = iota
	targetProbe
	targetFallback
)

func (c *FallbackController) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *FallbackController) cooldown() time.Duration {
	if c.Cooldown > 0 {
		return c.Cooldown
	}
	return DefaultProbeCooldown
}

// choose elects the target synchronously: concurrent callers after a cooldown elect at
// most one probe.
func (c *FallbackController) choose() target {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.inFallback {
		return targetPrimary
	}
	if now := c.now(); now.Sub(c.lastProbeAt) >= c.cooldown() {
		c.lastProbeAt = now
		return targetProbe
	}
	return targetFallback
}

// primaryOK records a primary success; a successful probe recovers.
func (c *FallbackController) primaryOK(t target) (recovered bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t == targetProbe && c.inFallback {
		c.inFallback, c.owedEnter = false, false
		return true
	}
	return false
}

// fallbackOK records a success on the fallback target; it returns true once when an enter
// warning was owed.
func (c *FallbackController) fallbackOK() (emitEnter bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.owedEnter {
		c.owedEnter = false
		return true
	}
	return false
}

// rescued records a failed primary rescued by the fallback model.
func (c *FallbackController) rescued() (emitEnter bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastProbeAt = c.now()
	if c.owedEnter || !c.inFallback {
		c.inFallback, c.owedEnter = true, false
		return true
	}
	return false
}

// bothDown records a failure of both models: enter silently and owe the warning.
func (c *FallbackController) bothDown() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastProbeAt = c.now()
	if !c.inFallback {
		c.inFallback, c.owedEnter = true, true
	}
}

// Fallback wraps an LLM: while the primary fails (transient, timeout, rejection), requests with
// a distinct Fallback endpoint go to it until a probe finds the primary healthy; others make one
// attempt. A double failure is KindRejected only when both rejected the request.
type Fallback struct {
	// Primary is the configured summarizer model.
	Primary *LLM
	// Control holds the outage state.
	Control *FallbackController
	// OnEvent, when set, is called on every transition (outside any lock).
	OnEvent func(Event)
}

// NewFallback returns a Fallback over primary with a fresh controller.
func NewFallback(primary *LLM) *Fallback {
	return &Fallback{Primary: primary, Control: &FallbackController{}}
}

func (f *Fallback) emit(k EventKind, fb *LLM) {
	if f.OnEvent == nil {
		return
	}
	ev := Event{Kind: k, Primary: f.Primary.Endpoint().Label()}
	if fb != nil {
		ev.Fallback = fb.Endpoint().Label()
	}
	f.OnEvent(ev)
}

// Summarize implements Summarizer with the reference's outage-fallback semantics.
func (f *Fallback) Summarize(ctx context.Context, req *Request) (*Result, error) {
	if req == nil || req.Session == nil || req.Session.same(f.Primary.Endpoint()) {
		return f.Primary.Summarize(ctx, req)
	}
	fb := f.Primary.WithEndpoint(*req.Session)
	t := f.Control.choose()
	if t == targetFallback {
		res, err := fb.Summarize(ctx, req)
		if err != nil {
			return nil, err // deliberately leaves lastProbeAt alone
		}
		if f.Control.fallbackOK() {
			f.emit(EventEnter, fb)
		}
		res.Fallback = true
		return res, nil
	}
	res, err := f.Primary.Summarize(ctx, req)
	if err == nil {
		if f.Control.primaryOK(t) {
			f.emit(EventRecover, nil)
		}
		return res, nil
	}
	if ctx.Err() != nil || !failover(err) {
		return nil, err
	}
	res, ferr := fb.Summarize(ctx, req)
	if ferr == nil {
		if f.Control.rescued() {
			f.emit(EventEnter, fb)
		}
		res.Fallback = true
		return res, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	f.Control.bothDown()
	switch {
	case KindOf(ferr) == KindRejected && KindOf(err) != KindRejected:
		return nil, err // the session model refuses the request; the primary's failure may pass
	case failover(ferr) || KindOf(ferr) == KindAuth:
		return nil, ferr
	}
	return nil, err
}
