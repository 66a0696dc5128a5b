//go:build loadtest

package proxy

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/condense-dev/condense/internal/upstreamfake"
)

// loadModel is the workload of one load test run, read from CONDENSE_LOAD_* variables.
type loadModel struct {
	mode       string // "realistic" (default) or "saturate"
	sessions   int    // virtual agent sessions
	perSess    int    // requests per session
	latency    upstreamfake.Latency
	thinkScale float64       // multiplies the recorded think time
	thinkMax   time.Duration // caps one think time (after scaling)
	thinkDef   time.Duration // think time where the corpus has no timestamps
	ramp       time.Duration // session starts are spread over this
	outDef     int           // output tokens where the corpus has no usage
	outMax     int           // caps the recorded output tokens of one answer
	summarizer string        // "in-proxy" or "jobs"
	duration   time.Duration // no session starts a request after this (0: no limit)
	// floor ("buffer" or "stream") runs hack/floorproxy, a proxy that only forwards, in
	// place of condense: what a second hop alone adds on this machine ("": condense).
	floor string
	// beside ("buffer" or "stream") runs hack/floorproxy next to condense and sends every
	// request through it too, so condense is compared with a forwarding-only proxy under the
	// same machine conditions, request by request ("": not run).
	beside string
	// history is how many of the recorded requests before each session's window are sent
	// through the proxy, unmeasured and without model time, before the measured run: a
	// deployed proxy has followed a session from its start, so its first measured request
	// finds the session parsed, its state flushed and its requests pruned (0: each window
	// starts cold, as before session 8).
	history int
	// bodyIDs names each session in its body (metadata.user_id, after the messages, where the
	// SDKs put it) instead of the X-Condense-Session header, as a client that was not set up
	// for condense does: the proxy then finds the session's fields in the body
	// (CONDENSE_LOAD_SESSION_ID=body).
	bodyIDs bool
}

func readLoadModel() loadModel {
	scale := envFloat("CONDENSE_LOAD_TIME_SCALE", 1)
	m := loadModel{
		mode:       os.Getenv("CONDENSE_LOAD_MODE"),
		sessions:   envInt("CONDENSE_LOAD_SESSIONS", 200),
		perSess:    envInt("CONDENSE_LOAD_REQUESTS", 10),
		thinkScale: envFloat("CONDENSE_LOAD_THINK_SCALE", 1) * scale,
		thinkMax:   time.Duration(scale * float64(envInt("CONDENSE_LOAD_THINK_MAX_MS", 20000)) * float64(time.Millisecond)),
		thinkDef:   time.Duration(scale * float64(envInt("CONDENSE_LOAD_THINK_DEFAULT_MS", 3000)) * float64(time.Millisecond)),
		ramp:       time.Duration(scale * float64(envInt("CONDENSE_LOAD_RAMP_MS", 30000)) * float64(time.Millisecond)),
		outDef:     envInt("CONDENSE_LOAD_OUTPUT_TOKENS", 250),
		outMax:     envInt("CONDENSE_LOAD_MAX_OUTPUT_TOKENS", 2000),
		summarizer: os.Getenv("CONDENSE_LOAD_SUMMARIZER"),
		floor:      os.Getenv("CONDENSE_LOAD_FLOOR"),
		beside:     os.Getenv("CONDENSE_LOAD_BESIDE"),
		history:    envInt("CONDENSE_LOAD_HISTORY", 20),
		bodyIDs:    os.Getenv("CONDENSE_LOAD_SESSION_ID") == "body",
		duration:   time.Duration(scale * float64(envInt("CONDENSE_LOAD_DURATION_S", 180)) * float64(time.Second)),
		latency: upstreamfake.Latency{
			TTFT:            time.Duration(scale * float64(envInt("CONDENSE_LOAD_TTFT_MS", 1000)) * float64(time.Millisecond)),
			TokensPerSecond: envFloat("CONDENSE_LOAD_TOKENS_PER_SEC", 60) / scale,
		},
	}
	if m.mode == "" {
		m.mode = "realistic"
	}
	if m.summarizer == "" {
		m.summarizer = "in-proxy"
	}
	if m.mode == "saturate" {
		m.latency, m.thinkScale, m.thinkMax, m.thinkDef, m.ramp, m.duration = upstreamfake.Latency{}, 0, 0, 0, 0, 0
	}
	return m
}

func (m loadModel) String() string {
	if m.floor != "" {
		return fmt.Sprintf("%s; proxy: hack/floorproxy -mode %s (forwarding only, no condense)", m.withoutFloor(), m.floor)
	}
	if m.beside != "" {
		return fmt.Sprintf("%s; every request also sent through hack/floorproxy -mode %s (forwarding only), in rotating order", m.withoutFloor(), m.beside)
	}
	if m.mode == "saturate" {
		return fmt.Sprintf("saturate: %d closed-loop sessions × ≤ %d requests, no model time, no think time, summarizer %s",
			m.sessions, m.perSess, m.summarizer)
	}
	return fmt.Sprintf("realistic: %d sessions × ≤ %d requests, model TTFT %v + recorded output tokens (≤ %d) at %.0f tok/s, think = recorded gap − modeled model time, × %.2f, ≤ %v (%v where not recorded), starts spread over %v, no request starts after %v, summarizer %s, %s, %s",
		m.sessions, m.perSess, m.latency.TTFT, m.outMax, m.latency.TokensPerSecond, m.thinkScale, m.thinkMax, m.thinkDef, m.ramp, m.duration, m.summarizer, m.historyString(), m.sessionIDString())
}

func (m loadModel) sessionIDString() string {
	if m.bodyIDs {
		return "sessions named by metadata.user_id in the body (no X-Condense-Session header)"
	}
	return "sessions named by the X-Condense-Session header"
}

// sessionBody returns body as session id sends it: with bodyIDs, with a metadata.user_id
// member of id appended after its last member.
func (m loadModel) sessionBody(id string, body []byte) []byte {
	if !m.bodyIDs {
		return body
	}
	end := bytes.LastIndexByte(body, '}')
	out := make([]byte, 0, len(body)+64)
	out = append(out, body[:end]...)
	out = append(out, `,"metadata":{"user_id":"`...)
	out = append(out, id...)
	out = append(out, `"}}`...)
	return out
}

func (m loadModel) historyString() string {
	if m.history == 0 {
		return "no history (each session's window starts cold)"
	}
	return fmt.Sprintf("the proxy first followed each session through up to %d recorded requests before its window (unmeasured)", m.history)
}

func (m loadModel) withoutFloor() string {
	m.floor, m.beside = "", ""
	return m.String()
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v >= 0 {
		return v
	}
	return def
}

func envFloat(name string, def float64) float64 {
	if v, err := strconv.ParseFloat(os.Getenv(name), 64); err == nil && v >= 0 {
		return v
	}
	return def
}
