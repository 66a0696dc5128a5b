package flush

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/summarize"
	"github.com/condense-dev/condense/internal/wire"
)

// Job is one flush request: the Queued message and, for an in-process flush, what the proxy
// already holds in memory (never queued; none of it may be modified once submitted).
type Job struct {
	Queued
	// Request, when set, is Body already parsed (the proxy hands in-process flushes the
	// request it parsed, so the planner does not parse it again).
	Request *wire.Request `json:"-"`
	// State, when set, is the decoded engine state of session version StateVersion (the
	// proxy hands in-process flushes the state it rendered the request with); the planner
	// uses it instead of decoding the snapshot it loads when that snapshot is this version.
	State *pruner.State `json:"-"`
	// StateVersion is the session version State was decoded from (0: State is unused).
	StateVersion uint64 `json:"-"`
	// Rendered, when set, is Request rendered with State (what the proxy forwarded); the
	// cache-aware weighing uses it as the current render when the plan is over State, instead
	// of rendering again.
	Rendered *wire.Request `json:"-"`
}

// Queued is a flush job as it crosses the Redis queue (JSON; Queue drops the session model's
// credentials): a session and the request that triggered it.
type Queued struct {
	// Session is the session id.
	Session string `json:"session"`
	// Format is the wire format of Body.
	Format wire.Format `json:"format"`
	// Body is the latest request body, exactly as the client sent it. An in-process job that
	// carries Request may leave it empty (Queue.Enqueue serializes Request into it): nothing
	// then serializes the request on the proxy's request path.
	Body []byte `json:"body"`
	// Hash is the hex SHA-256 of Body — or, when Body is empty (an in-process job), "xxh64:"
	// and the hex xxhash64 of Request's content (requestKey) — computed by Normalize when
	// empty; with Session it is the job's idempotency key.
	Hash string `json:"hash"`
	// Trigger says why the flush runs (agent-message, budget, delta, manual...).
	Trigger string `json:"trigger,omitempty"`
	// SessionModel is the session's own model (summarizer fallback target). Credentials are
	// never serialized into queued jobs.
	SessionModel *summarize.Endpoint `json:"sessionModel,omitempty"`
	// Enqueued is when the job was first submitted.
	Enqueued time.Time `json:"enqueued"`
	// Attempt counts failed attempts so far (queued jobs).
	Attempt int `json:"attempt,omitempty"`
	// LastError is the error of the previous attempt (queued jobs).
	LastError string `json:"lastError,omitempty"`
	// PlanMessages, when > 0, limits what the flush may touch to the first PlanMessages
	// messages of Body (a mid-run flush leaves the latest tool-using turns alone); the cache
	// check still weighs the whole request.
	PlanMessages int `json:"planMessages,omitempty"`
	// Cache, when set, weighs the flush against the prompt cache before commit (cachepolicy.Decide):
	// a rewrite that costs more than it saves ends OutcomeDeferred with nothing committed. Nil
	// commits unconditionally (manual and budget flushes).
	Cache *CacheCheck `json:"cache,omitempty"`
}

// CacheCheck is what the cache-aware decision needs to know about the session's prompt cache
// and how long its context will live.
type CacheCheck struct {
	// At is when the triggering request arrived (the decision's "now").
	At time.Time `json:"at"`
	// LastRequest is when the session's previous request went to the provider, writing the
	// cache; zero when unknown (the cache then counts as expired).
	LastRequest time.Time `json:"lastRequest,omitempty"`
	// Requests is how many requests the session's context has seen so far (horizon rule).
	Requests int `json:"requests,omitempty"`
	// Horizon is the fewest expected further requests (cachepolicy.DefaultHorizon when 0).
	Horizon int `json:"horizon,omitempty"`
	// MaxHorizon caps the expected further requests (cachepolicy.DefaultMaxHorizon when 0).
	MaxHorizon int `json:"maxHorizon,omitempty"`
}

// StatFlushPending is the session counter that is 1 while the session's latest weighed flush
// of the whole transcript was deferred (a flush is still due and should be retried) and 0
// once one was committed or found nothing to do. Mid-run flushes (PlanMessages > 0) leave it.
const StatFlushPending = "flushPending"

// Normalize validates the job and fills Hash and Enqueued.
func (j *Job) Normalize() error {
	if err := store.ValidateSessionID(j.Session); err != nil {
		return &JobError{Msg: "bad session id", Err: err}
	}
	if len(j.Body) == 0 && (j.Request == nil || len(j.Request.Raw()) == 0) {
		return &JobError{Msg: "empty request body"}
	}
	switch j.Format {
	case wire.Anthropic, wire.OpenAI, wire.Responses:
	default:
		return &JobError{Msg: fmt.Sprintf("unknown format %v", j.Format)}
	}
	var h string
	if len(j.Body) > 0 {
		sum := sha256.Sum256(j.Body)
		h = hex.EncodeToString(sum[:])
	} else {
		// An in-process job: its key never leaves the process, so a fast 64-bit hash is
		// enough to recognize a resubmitted request.
		h = "xxh64:" + strconv.FormatUint(requestKey(j.Request), 16)
	}
	if j.Hash != "" && j.Hash != h {
		return &JobError{Msg: "hash does not match body"}
	}
	j.Hash = h
	if j.Enqueued.IsZero() {
		j.Enqueued = time.Now()
	}
	return nil
}

// requestKey hashes a parsed request's content without serializing it: the client's bytes
// and every tool, system block and message as the request now holds them (the proxy's view
// adds messages and tools to what the client sent, so the bytes alone do not identify it).
func requestKey(r *wire.Request) uint64 {
	d := xxhash.New()
	var n [8]byte
	part := func(b []byte) {
		binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
		_, _ = d.Write(n[:])
		_, _ = d.Write(b)
	}
	part(r.Raw())
	for _, t := range r.Tools {
		part(t.Raw())
	}
	for _, b := range r.System {
		part(b.Raw())
	}
	for _, m := range r.Messages {
		part(m.Bytes())
	}
	return d.Sum64()
}

// JobError reports a job that can never run (bad input); it is not retried.
type JobError struct {
	Msg string // what is wrong
	Err error  // the cause, may be nil
}

// Error implements error.
func (e *JobError) Error() string {
	if e.Err != nil {
		return "flush: invalid job: " + e.Msg + ": " + e.Err.Error()
	}
	return "flush: invalid job: " + e.Msg
}

// Unwrap returns the cause.
func (e *JobError) Unwrap() error { return e.Err }
