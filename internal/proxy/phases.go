package proxy

import (
	"log/slog"
	"time"

	"github.com/condense-dev/condense/internal/logs"
)

// phase is one step of a request's handling before it goes upstream (the proxy's own time,
// condense_added_latency_seconds), timed for condense_request_phase_seconds and the slow
// request log.
type phase uint8

const (
	phaseRead   phase = iota // reading the client's body
	phaseParse               // parsing it (reusing the session's previous parse) and checking the session
	phaseLoad                // loading the session from the store (and waiting for a flush or lease)
	phaseDecode              // decoding the stored state (a cache hit when this process has it decoded)
	phaseView                // loading hidden exchanges and building the model's view
	phaseRender              // rendering and serializing the forwarded body
	phaseFlush               // deciding on and starting a flush (waiting for it with flushWaitTimeout)
	nPhases
)

// phaseNames are the phase label values, in phase order.
var phaseNames = [nPhases]string{"read", "parse", "load", "decode", "view", "render", "flush"}

// phaseClock accumulates the time a request spends in each phase.
type phaseClock struct {
	spent [nPhases]time.Duration
	mark  time.Time
}

// start begins timing at t0.
func (c *phaseClock) start(t0 time.Time) { c.mark = t0 }

// done charges the time since the previous mark to p.
func (c *phaseClock) done(p phase) {
	now := time.Now()
	c.spent[p] += now.Sub(c.mark)
	c.mark = now
}

// attrs returns the phases that took any time, in milliseconds, for a log line: readMs,
// parseMs, ...
func (c *phaseClock) attrs() []any {
	out := make([]any, 0, nPhases)
	for p, d := range c.spent {
		if d > 0 {
			out = append(out, slog.Float64(phaseNames[p]+"Ms", logs.Ms(d)))
		}
	}
	return out
}
