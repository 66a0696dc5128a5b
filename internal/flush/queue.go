package flush

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/condense-dev/condense/internal/store"
)

// Job states recorded in a job's status key.
const (
	StateQueued   = "queued"
	StateRunning  = "running"
	StateRetrying = "retrying"
	StateDone     = "done"
	StateDead     = "dead"
)

// Status is the recorded state of one (session, hash) job.
type Status struct {
	// State is one of the State* constants.
	State string `json:"state"`
	// Attempt counts failed attempts so far.
	Attempt int `json:"attempt,omitempty"`
	// Result is the flush result once done.
	Result *Result `json:"result,omitempty"`
	// Error is the last failure (retrying, dead).
	Error string `json:"error,omitempty"`
}

// Queue is the Redis side of queued flushes: the jobs stream (consumer group Group), the
// retry set, the dead-letter stream and its count, and each job's Status, all under one hash
// tag {<prefix>:flush} (key schema: docs/summarizer.md).
type Queue struct {
	rdb redis.UniversalClient
	// Group is the consumer group of the workers (default "condense-pruner").
	Group string
	// StatusTTL is how long a job's status (and so its idempotency) is kept (default 24h).
	StatusTTL time.Duration
	// DeadMaxLen caps the dead-letter stream, approximately (default 10000).
	DeadMaxLen int64
	// EnqueueTimeout bounds Enqueue and Submit (default 2s), so that a Redis outage fails the
	// submit fast instead of stalling the request that triggered the flush.
	EnqueueTimeout time.Duration
	// Metrics, when set, counts job events.
	Metrics *Metrics

	tag string
}

// DefaultEnqueueTimeout is Queue.EnqueueTimeout's default.
const DefaultEnqueueTimeout = 2 * time.Second

// NewQueue returns a queue over rdb with key prefix (default "condense").
func NewQueue(rdb redis.UniversalClient, prefix string) *Queue {
	if prefix == "" {
		prefix = "condense"
	}
	return &Queue{rdb: rdb, Group: "condense-pruner", StatusTTL: 24 * time.Hour, DeadMaxLen: 10000, EnqueueTimeout: DefaultEnqueueTimeout,
		tag: "{" + prefix + ":flush}"}
}

// StreamKey is the job stream's key.
func (q *Queue) StreamKey() string { return q.tag + ":jobs" }

// RetryKey is the backoff sorted set's key.
func (q *Queue) RetryKey() string { return q.tag + ":retry" }

// DeadKey is the dead-letter stream's key.
func (q *Queue) DeadKey() string { return q.tag + ":dead" }

// DeadCountKey is the dead-letter counter's key.
func (q *Queue) DeadCountKey() string { return q.tag + ":dead-count" }

// StatusKey is the status key of job (session, hash).
func (q *Queue) StatusKey(session, hash string) string {
	return q.tag + ":st:" + store.EncodeSessionID(session) + ":" + hash
}

// enqueueScript sets the status to queued unless a live status exists (a dead job may be
// submitted again), then adds the job to the stream. Returns 1 when enqueued, 0 for a duplicate.
var enqueueScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur and not string.find(cur, '"state":"dead"', 1, true) then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('XADD', KEYS[2], '*', 'job', ARGV[3])
return 1
`)

// moveDueScript moves jobs whose backoff expired from the retry set to the stream.
var moveDueScript = redis.NewScript(`
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, m in ipairs(due) do
  redis.call('ZREM', KEYS[1], m)
  redis.call('XADD', KEYS[2], '*', 'job', m)
end
return #due
`)

// heartbeatScript resets a pending entry's idle time (XCLAIM … JUSTID, delivery count untouched)
// only while the consumer still owns it. ARGV: group, entry id, consumer. Returns 1 when the
// entry is still the consumer's, 0 otherwise.
var heartbeatScript = redis.NewScript(`
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if #p == 0 or p[1][2] ~= ARGV[3] then return 0 end
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[3], 0, ARGV[2], 'JUSTID')
return 1
`)

// heartbeat keeps the running entry id of consumer fresh; owned is false once the entry is no
// longer the consumer's (reclaimed by another worker, or gone).
func (q *Queue) heartbeat(ctx context.Context, id, consumer string) (owned bool, err error) {
	n, err := heartbeatScript.Run(ctx, q.rdb, []string{q.StreamKey()}, q.Group, id, consumer).Int()
	return n == 1, err
}

// Enqueue submits a job. It returns dup == true, and enqueues nothing, when the same
// (session, hash) is queued, running, retrying or done (within StatusTTL). It gives up after
// EnqueueTimeout (an error satisfying errors.Is(err, store.ErrUnavailable)).
func (q *Queue) Enqueue(ctx context.Context, job *Job) (dup bool, err error) {
	if len(job.Body) == 0 && job.Request != nil {
		job.Body = job.Request.Bytes() // workers parse the body; Request is never sent
	}
	if err := job.Normalize(); err != nil {
		return false, err
	}
	payload, err := encodeJob(job)
	if err != nil {
		return false, err
	}
	st, _ := json.Marshal(Status{State: StateQueued})
	timeout := q.EnqueueTimeout
	if timeout <= 0 {
		timeout = DefaultEnqueueTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	n, err := enqueueScript.Run(ctx, q.rdb, []string{q.StatusKey(job.Session, job.Hash), q.StreamKey()},
		st, q.StatusTTL.Milliseconds(), payload).Int()
	if err != nil {
		return false, fmt.Errorf("%w: flush enqueue: %w", store.ErrUnavailable, err)
	}
	if n == 0 {
		q.Metrics.job("duplicate")
		return true, nil
	}
	q.Metrics.job("enqueued")
	return false, nil
}

// Submit implements Flusher: it enqueues job (a duplicate joins the existing job) and
// returns a ticket whose Wait polls the job's status. A dead job's Wait returns its last
// error; its Result is nil unless the job completed.
func (q *Queue) Submit(ctx context.Context, job *Job) (*Ticket, error) {
	if _, err := q.Enqueue(ctx, job); err != nil {
		return nil, err
	}
	session, hash := job.Session, job.Hash
	return &Ticket{wait: func(ctx context.Context) (*Result, error) {
		st, err := q.Wait(ctx, session, hash)
		if err != nil {
			return nil, err
		}
		if st.State == StateDead {
			return st.Result, fmt.Errorf("flush: job dead-lettered after %d attempt(s): %s", st.Attempt, st.Error)
		}
		return st.Result, nil
	}}, nil
}

// Status returns the recorded status of (session, hash), or nil when none is recorded.
func (q *Queue) Status(ctx context.Context, session, hash string) (*Status, error) {
	b, err := q.rdb.Get(ctx, q.StatusKey(session, hash)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: flush status: %w", store.ErrUnavailable, err)
	}
	var s Status
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("flush: corrupt status of %s: %w", hash, err)
	}
	return &s, nil
}

// Wait polls the job's status until it is done or dead, or ctx ends (use a context with a
// deadline for a bounded wait). It returns the final status.
func (q *Queue) Wait(ctx context.Context, session, hash string) (*Status, error) {
	d := 5 * time.Millisecond
	for {
		s, err := q.Status(ctx, session, hash)
		if err != nil {
			return nil, err
		}
		if s != nil && (s.State == StateDone || s.State == StateDead) {
			return s, nil
		}
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-time.After(d):
		}
		if d < 200*time.Millisecond {
			d *= 2
		}
	}
}

// DeadCount returns how many jobs were ever dead-lettered.
func (q *Queue) DeadCount(ctx context.Context) (int64, error) {
	n, err := q.rdb.Get(ctx, q.DeadCountKey()).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return n, err
}

// Depth returns the number of jobs waiting in the stream (not yet delivered or pending) and
// in the retry set.
func (q *Queue) Depth(ctx context.Context) (stream, retry int64, err error) {
	stream, err = q.rdb.XLen(ctx, q.StreamKey()).Result()
	if err != nil {
		return 0, 0, err
	}
	retry, err = q.rdb.ZCard(ctx, q.RetryKey()).Result()
	return stream, retry, err
}

// ensureGroup creates the consumer group (and the stream) if missing.
func (q *Queue) ensureGroup(ctx context.Context) error {
	err := q.rdb.XGroupCreateMkStream(ctx, q.StreamKey(), q.Group, "0").Err()
	if err != nil && !isBusyGroup(err) {
		return err
	}
	return nil
}

func isBusyGroup(err error) bool {
	return err != nil && len(err.Error()) >= 9 && err.Error()[:9] == "BUSYGROUP"
}

// moveDue moves up to 100 due retries into the stream.
func (q *Queue) moveDue(ctx context.Context, now time.Time) (int, error) {
	return moveDueScript.Run(ctx, q.rdb, []string{q.RetryKey(), q.StreamKey()}, now.UnixMilli(), 100).Int()
}

func (q *Queue) setStatus(ctx context.Context, p redis.Pipeliner, job *Job, s Status) {
	b, _ := json.Marshal(s)
	p.Set(ctx, q.StatusKey(job.Session, job.Hash), b, q.StatusTTL)
}

// finish acknowledges and deletes a stream entry and records the job's status, atomically.
func (q *Queue) finish(ctx context.Context, id string, job *Job, s Status) error {
	_, err := q.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		q.setStatus(ctx, p, job, s)
		p.XAck(ctx, q.StreamKey(), q.Group, id)
		p.XDel(ctx, q.StreamKey(), id)
		return nil
	})
	return err
}

// retry schedules job for due, acknowledging the stream entry, atomically.
func (q *Queue) retry(ctx context.Context, id string, job *Job, due time.Time) error {
	payload, err := encodeJob(job)
	if err != nil {
		return err
	}
	_, err = q.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		q.setStatus(ctx, p, job, Status{State: StateRetrying, Attempt: job.Attempt, Error: job.LastError})
		p.ZAdd(ctx, q.RetryKey(), redis.Z{Score: float64(due.UnixMilli()), Member: payload})
		p.XAck(ctx, q.StreamKey(), q.Group, id)
		p.XDel(ctx, q.StreamKey(), id)
		return nil
	})
	return err
}

// deadLetter moves a job to the dead-letter stream, atomically.
func (q *Queue) deadLetter(ctx context.Context, id string, job *Job, payload string, cause string) error {
	_, err := q.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.XAdd(ctx, &redis.XAddArgs{Stream: q.DeadKey(), MaxLen: q.DeadMaxLen, Approx: true,
			Values: []string{"job", payload, "error", cause, "attempts", strconv.Itoa(job.Attempt)}})
		p.Incr(ctx, q.DeadCountKey())
		if job.Session != "" && job.Hash != "" {
			q.setStatus(ctx, p, job, Status{State: StateDead, Attempt: job.Attempt, Error: cause})
		}
		p.XAck(ctx, q.StreamKey(), q.Group, id)
		p.XDel(ctx, q.StreamKey(), id)
		return nil
	})
	if err == nil {
		q.Metrics.job("dead")
		q.Metrics.dead()
	}
	return err
}

// encodeJob serializes a job for the stream; the session model's credentials are dropped.
func encodeJob(job *Job) (string, error) {
	q := job.Queued
	if q.SessionModel != nil {
		ep := *q.SessionModel
		ep.APIKey, ep.Header = "", nil
		q.SessionModel = &ep
	}
	b, err := json.Marshal(&q)
	if err != nil {
		return "", fmt.Errorf("flush: encode job: %w", err)
	}
	return string(b), nil
}

func decodeJob(s string) (*Job, error) {
	var j Job
	if err := json.Unmarshal([]byte(s), &j.Queued); err != nil {
		return nil, &JobError{Msg: "undecodable job", Err: err}
	}
	return &j, nil
}
