package upstreamfake

import (
	"time"
)

// HeaderSlept is the response header carrying, in microseconds, the fake's modeled provider time
// from reading the request body to writing the response headers (Reply.Delay plus Latency); the
// fake's own handling runs inside it. Load tests subtract it from end-to-end times.
const HeaderSlept = "Upstreamfake-Slept-Us"

// Latency models a provider's answer time: TTFT before anything is sent, then the reply's output
// tokens at TokensPerSecond. A non-streamed reply is sent after both; a streamed one sends its
// first event after TTFT and its closing events after generation. The zero value adds no delay.
type Latency struct {
	// TTFT is the time to first token.
	TTFT time.Duration
	// TokensPerSecond is the output generation speed (<= 0: generation takes no time).
	TokensPerSecond float64
}

// Generation returns the time to generate n output tokens.
func (l Latency) Generation(n int) time.Duration {
	if l.TokensPerSecond <= 0 || n <= 0 {
		return 0
	}
	return time.Duration(float64(n) / l.TokensPerSecond * float64(time.Second))
}

// Total returns the modeled time of a whole reply with n output tokens.
func (l Latency) Total(n int) time.Duration { return l.TTFT + l.Generation(n) }
