package flush

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/summarize"
	"github.com/condense-dev/condense/internal/upstreamfake"
	"github.com/condense-dev/condense/internal/wire"
)

// worker returns a fast-cycling worker for tests.
func (r *rig) worker(name string, m *Metrics) (*Worker, *Queue) {
	q := NewQueue(r.rdb, "")
	q.Metrics = m
	o := r.orch(name, nil)
	o.Metrics = m
	return &Worker{Queue: q, Orch: o, Consumer: name, Concurrency: 2, Block: 50 * time.Millisecond,
		ClaimIdle: 500 * time.Millisecond, MaxAttempts: 3, BackoffBase: 50 * time.Millisecond, BackoffMax: time.Second,
		BusyDelay: 200 * time.Millisecond, ShutdownGrace: 5 * time.Second, Log: quiet}, q
}

// run starts w and returns a stop function that cancels it and waits for Run to return.
func run(t *testing.T, w *Worker) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	select {
	case <-w.Ready():
	case err := <-done:
		t.Fatalf("worker: %v", err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker Run: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

func waitState(t *testing.T, q *Queue, j *Job, d time.Duration) *Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	st, err := q.Wait(ctx, j.Session, j.Hash)
	if err != nil {
		t.Fatalf("wait: %v (last status %+v)", err, st)
	}
	return st
}

func TestQueueJobRunsOnceAndIsIdempotent(t *testing.T) {
	r := newRig(t, "redis")
	m := NewMetrics(prometheus.NewRegistry())
	w, q := r.worker("w1", m)
	run(t, w)
	ctx := context.Background()
	j := job("s1", "q", 2)
	if dup, err := q.Enqueue(ctx, j); err != nil || dup {
		t.Fatalf("dup %v err %v", dup, err)
	}
	if dup, _ := q.Enqueue(ctx, job("s1", "q", 2)); !dup {
		t.Fatal("second enqueue of the same (session, hash) was accepted")
	}
	st := waitState(t, q, j, 10*time.Second)
	if st.State != StateDone || st.Result == nil || st.Result.Outcome != OutcomeFlushed || st.Result.Version != 1 {
		t.Fatalf("status %+v", st)
	}
	if v, err := waitVersion(ctx, r.st, "s1", 0); err != nil || v != 1 {
		t.Fatalf("version %d err %v", v, err)
	}
	if dup, _ := q.Enqueue(ctx, job("s1", "q", 2)); !dup {
		t.Fatal("enqueue of a done job was accepted")
	}
	// A redelivered copy of a done job (e.g. the ack was lost) is acknowledged without running.
	payload, _ := encodeJob(j)
	if err := r.rdb.XAdd(ctx, &redis.XAddArgs{Stream: q.StreamKey(), Values: []string{"job", payload}}).Err(); err != nil {
		t.Fatal(err)
	}
	// Duplicates: the two refused enqueues above, then the redelivered copy.
	deadline := time.Now().Add(5 * time.Second)
	for testutil.ToFloat64(m.Jobs.WithLabelValues("duplicate")) < 3 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := testutil.ToFloat64(m.Jobs.WithLabelValues("duplicate")); got != 3 {
		t.Fatalf("duplicates %v", got)
	}
	if n := len(r.up.Requests()); n != 2 {
		t.Fatalf("%d summarizer calls, want 2", n)
	}
	waitFor(t, func() bool { l, _, _ := q.Depth(ctx); return l == 0 }) // acknowledged and deleted
	if got := testutil.ToFloat64(m.Flushes.WithLabelValues("flushed")); got != 1 {
		t.Fatalf("flushes metric %v", got)
	}
	if got := testutil.ToFloat64(m.SummarizerCalls.WithLabelValues("anthropic/claude-haiku-4-5", "false")); got != 2 {
		t.Fatalf("summarizer calls metric %v", got)
	}
}

func TestQueueRetriesThenDeadLetters(t *testing.T) {
	r := newRig(t, "redis")
	r.up.SetResponder(func(upstreamfake.Recorded) upstreamfake.Reply {
		return upstreamfake.Reply{Status: 500, ErrorType: "api_error", ErrorMessage: "internal"}
	})
	m := NewMetrics(prometheus.NewRegistry())
	w, q := r.worker("w1", m)
	run(t, w)
	ctx := context.Background()
	j := job("s1", "d", 1)
	if _, err := q.Enqueue(ctx, j); err != nil {
		t.Fatal(err)
	}
	st := waitState(t, q, j, 10*time.Second)
	if st.State != StateDead || st.Attempt != 3 || !strings.Contains(st.Error, "every summarizer call failed") {
		t.Fatalf("status %+v", st)
	}
	if n := len(r.up.Requests()); n != 3 {
		t.Fatalf("%d attempts reached the summarizer, want 3", n)
	}
	if n, err := q.DeadCount(ctx); err != nil || n != 1 {
		t.Fatalf("dead count %d err %v", n, err)
	}
	dead, err := r.rdb.XRange(ctx, q.DeadKey(), "-", "+").Result()
	if err != nil || len(dead) != 1 || dead[0].Values["attempts"] != "3" {
		t.Fatalf("dead stream %+v err %v", dead, err)
	}
	if dj, err := decodeJob(dead[0].Values["job"].(string)); err != nil || dj.Hash != j.Hash || dj.Session != "s1" {
		t.Fatalf("dead job %+v err %v", dj, err)
	}
	if got := testutil.ToFloat64(m.Jobs.WithLabelValues("retried")); got != 2 {
		t.Fatalf("retried %v", got)
	}
	if got := testutil.ToFloat64(m.DeadLetters); got != 1 {
		t.Fatalf("dead metric %v", got)
	}
	if _, v := r.state("s1"); v != 0 {
		t.Fatal("a dead job committed")
	}
	// A dead job may be submitted again.
	r.up.SetResponder(labelResponder)
	if dup, err := q.Enqueue(ctx, job("s1", "d", 1)); err != nil || dup {
		t.Fatalf("re-enqueue of a dead job: dup %v err %v", dup, err)
	}
	if st := waitState(t, q, j, 10*time.Second); st.State != StateDone {
		t.Fatalf("status %+v", st)
	}
}

// TestQueueRejectedRequestIsNotRetried checks that a job whose summarizer calls the provider
// rejects as invalid (HTTP 400: the same request fails the same way every time) is
// dead-lettered after its first attempt instead of being retried up to MaxAttempts.
func TestQueueRejectedRequestIsNotRetried(t *testing.T) {
	r := newRig(t, "redis")
	r.up.SetResponder(func(upstreamfake.Recorded) upstreamfake.Reply {
		return upstreamfake.Reply{Status: 400, ErrorType: "invalid_request_error", ErrorMessage: "prompt is too long"}
	})
	m := NewMetrics(prometheus.NewRegistry())
	w, q := r.worker("w1", m)
	run(t, w)
	j := job("s1", "rej", 1)
	if _, err := q.Enqueue(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	st := waitState(t, q, j, 10*time.Second)
	if st.State != StateDead || st.Attempt != 1 || !strings.Contains(st.Error, "prompt is too long") {
		t.Fatalf("status %+v", st)
	}
	if n := len(r.up.Requests()); n != 1 {
		t.Fatalf("%d summarizer calls, want 1", n)
	}
	if got := testutil.ToFloat64(m.Jobs.WithLabelValues("retried")); got != 0 {
		t.Fatalf("retried %v", got)
	}
	if got := testutil.ToFloat64(m.SummarizerErrors.WithLabelValues("rejected")); got != 1 {
		t.Fatalf("rejected summarizer errors %v", got)
	}
}

func TestQueueRetryThenSuccess(t *testing.T) {
	r := newRig(t, "redis")
	r.up.Enqueue(upstreamfake.Reply{Status: 529, ErrorType: "overloaded_error", ErrorMessage: "Overloaded"})
	w, q := r.worker("w1", nil)
	log, buf := captureLog()
	w.Log = log
	run(t, w)
	j := job("s1", "r", 1)
	if _, err := q.Enqueue(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	st := waitState(t, q, j, 10*time.Second)
	if st.State != StateDone || st.Attempt != 1 || st.Result.Version != 1 {
		t.Fatalf("status %+v", st)
	}
	// The retry delay is logged in milliseconds (BackoffBase 50ms).
	retries := buf.Lines("flush worker: job failed, retrying")
	if len(retries) != 1 || retries[0].Get("retryInMs").Float() != 50 || retries[0].Get("in").Exists() {
		t.Fatalf("retry lines %v", retries)
	}
}

func TestQueueInvalidJobsDeadLetterAtOnce(t *testing.T) {
	r := newRig(t, "redis")
	w, q := r.worker("w1", nil)
	run(t, w)
	ctx := context.Background()
	bad := &Job{Queued: Queued{Session: "s1", Format: wire.Anthropic, Body: []byte(`{"messages": [`)}}
	if _, err := q.Enqueue(ctx, bad); err != nil {
		t.Fatal(err)
	}
	if st := waitState(t, q, bad, 10*time.Second); st.State != StateDead || st.Attempt != 0 || !strings.Contains(st.Error, "unparsable request body") {
		t.Fatalf("status %+v", st)
	}
	// An undecodable stream entry is dead-lettered too.
	if err := r.rdb.XAdd(ctx, &redis.XAddArgs{Stream: q.StreamKey(), Values: []string{"job", "not json"}}).Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, _ := q.DeadCount(ctx)
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dead count %d", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(r.up.Requests()) != 0 {
		t.Fatal("invalid jobs reached the summarizer")
	}
	// Enqueue refuses what can never run.
	var je *JobError
	if _, err := q.Enqueue(ctx, &Job{Queued: Queued{Session: "s1", Format: wire.Anthropic}}); !errors.As(err, &je) {
		t.Fatalf("err %v", err)
	}
}

func TestQueueGracefulShutdownRequeues(t *testing.T) {
	r := newRig(t, "redis")
	r.up.SetResponder(func(rec upstreamfake.Recorded) upstreamfake.Reply {
		rep := labelResponder(rec)
		rep.Delay = 2 * time.Second
		return rep
	})
	w1, q := r.worker("w1", nil)
	w1.ShutdownGrace = 50 * time.Millisecond
	log, buf := captureLog()
	w1.Log = log
	stop := run(t, w1)
	j := job("s1", "g", 1)
	if _, err := q.Enqueue(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(r.up.Requests()) == 1 })
	stop() // the running job is aborted after the grace period and handed back
	st, _ := q.Status(context.Background(), j.Session, j.Hash)
	if st == nil || st.State != StateRetrying || st.Attempt != 0 {
		t.Fatalf("status after shutdown %+v", st)
	}
	// The shutdown line says what was drained: one job running, handed back after the grace.
	stopped := buf.Lines("flush worker: stopped")
	if len(stopped) != 1 || stopped[0].Get("running").Int() != 1 || stopped[0].Get("requeued").Int() != 1 ||
		stopped[0].Get("finished").Int() != 0 || stopped[0].Get("ms").Float() < 50 {
		t.Fatalf("stopped lines %v", stopped)
	}
	w2, _ := r.worker("w2", nil)
	run(t, w2)
	if st := waitState(t, q, j, 10*time.Second); st.State != StateDone || st.Attempt != 0 {
		t.Fatalf("status %+v", st)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHelperWorkerProcess is not a test: TestWorkerKilledMidJobIsRedelivered runs the test
// binary again with CONDENSE_FLUSH_HELPER set, making this a real worker process to SIGKILL.
func TestHelperWorkerProcess(t *testing.T) {
	if os.Getenv("CONDENSE_FLUSH_HELPER") != "worker" {
		t.Skip("helper process only")
	}
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("CONDENSE_FLUSH_REDIS")})
	st, err := store.NewRedisStore(ctx, redis.NewClient(&redis.Options{Addr: os.Getenv("CONDENSE_FLUSH_REDIS")}), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	l, err := summarize.NewLLM(summarize.LLMOptions{Endpoint: summarize.Endpoint{Format: wire.Anthropic,
		BaseURL: os.Getenv("CONDENSE_FLUSH_UPSTREAM"), Model: "claude-haiku-4-5", APIKey: "k"}, IdleTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	w := &Worker{Queue: NewQueue(rdb, ""), Consumer: "doomed", Block: 50 * time.Millisecond, ClaimIdle: time.Minute, Log: quiet,
		Orch: &Orchestrator{Store: st, Planner: EnginePlanner{Policy: testPolicy()}, Summarizer: l, Owner: "doomed", LeaseTTL: time.Second, Log: quiet}}
	_ = w.Run(ctx) // runs until killed
}

// TestWorkerKilledMidJobIsRedelivered starts a real worker process, SIGKILLs it while its
// summarizer call is in flight, and checks that another worker reclaims the job (XAUTOCLAIM),
// waits out the dead worker's lease and completes the flush exactly once.
func TestWorkerKilledMidJobIsRedelivered(t *testing.T) {
	r := newRig(t, "redis")
	r.up.Enqueue(upstreamfake.Reply{Text: "- never delivered", Delay: 2 * time.Second})
	q := NewQueue(r.rdb, "")
	if err := q.ensureGroup(context.Background()); err != nil {
		t.Fatal(err)
	}
	j := job("s1", "k", 1)
	if _, err := q.Enqueue(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperWorkerProcess$", "-test.v")
	cmd.Env = append(os.Environ(), "CONDENSE_FLUSH_HELPER=worker", "CONDENSE_FLUSH_REDIS="+r.redis.Addr, "CONDENSE_FLUSH_UPSTREAM="+r.up.URL)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	waitFor(t, func() bool {
		st, _ := q.Status(context.Background(), j.Session, j.Hash)
		return st != nil && st.State == StateRunning && len(r.up.Requests()) == 1
	})
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed = true
	pending, err := r.rdb.XPending(context.Background(), q.StreamKey(), q.Group).Result()
	if err != nil || pending.Count != 1 || pending.Consumers["doomed"] != 1 {
		t.Fatalf("pending %+v err %v", pending, err)
	}

	m := NewMetrics(prometheus.NewRegistry())
	w, _ := r.worker("survivor", m)
	run(t, w)
	st := waitState(t, q, j, 20*time.Second)
	if st.State != StateDone || st.Result.Outcome != OutcomeFlushed || st.Result.Version != 1 {
		t.Fatalf("status %+v", st)
	}
	if got := testutil.ToFloat64(m.Jobs.WithLabelValues("reclaimed")); got < 1 {
		t.Fatalf("reclaimed %v", got)
	}
	stt, v := r.state("s1")
	if v != 1 || len(stt.Summaries) != 1 {
		t.Fatalf("version %d summaries %d", v, len(stt.Summaries))
	}
	if pending, _ := r.rdb.XPending(context.Background(), q.StreamKey(), q.Group).Result(); pending.Count != 0 {
		t.Fatalf("still pending %+v", pending)
	}
}

func TestFlusherInterface(t *testing.T) {
	r := newRig(t, "redis")
	w, q := r.worker("w1", nil)
	run(t, w)
	for name, f := range map[string]Flusher{"queue": q, "in-process": &InProcess{Orch: r.orch("ip", nil)}} {
		t.Run(name, func(t *testing.T) {
			tk, err := f.Submit(context.Background(), job("s-"+name, name, 1))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			res, err := tk.Wait(ctx)
			if err != nil || res.Outcome != OutcomeFlushed || res.Version != 1 {
				t.Fatalf("res %+v err %v", res, err)
			}
		})
	}
	r.up.SetResponder(func(upstreamfake.Recorded) upstreamfake.Reply {
		return upstreamfake.Reply{Status: 500, ErrorType: "api_error", ErrorMessage: "down"}
	})
	tk, err := q.Submit(context.Background(), job("s-dead", "x", 1))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := tk.Wait(ctx); err == nil || !strings.Contains(err.Error(), "dead-lettered after 3") {
		t.Fatalf("err %v", err)
	}
}

// TestQueueSerializesRequestOnlyJob checks that a job handed over with only its parsed
// request (as the proxy builds in-process jobs) is serialized into its body when queued and
// runs on a worker.
func TestQueueSerializesRequestOnlyJob(t *testing.T) {
	r := newRig(t, "redis")
	w, q := r.worker("w1", NewMetrics(prometheus.NewRegistry()))
	run(t, w)
	body := job("s2", "q", 2).Body
	j := &Job{Queued: Queued{Session: "s2", Format: wire.Anthropic}, Request: parseTranscript(t, body)}
	if dup, err := q.Enqueue(context.Background(), j); err != nil || dup {
		t.Fatalf("dup %v err %v", dup, err)
	}
	if string(j.Body) != string(body) {
		t.Fatal("the queued job's body is not the request's serialization")
	}
	if st := waitState(t, q, j, 10*time.Second); st.State != StateDone || st.Result.Outcome != OutcomeFlushed {
		t.Fatalf("status %+v", st)
	}
}

// leaseWatch is a store seen through its flush leases: it counts acquire attempts and the
// most flushes of any one session holding the lease at once.
type leaseWatch struct {
	store.Store
	second chan struct{} // closed at the second acquire attempt

	mu             sync.Mutex
	attempts       int
	held, mostHeld int
}

// AcquireLease implements store.Store.
func (l *leaseWatch) AcquireLease(ctx context.Context, session, owner string, ttl time.Duration) (store.Lease, error) {
	lease, err := l.Store.AcquireLease(ctx, session, owner, ttl)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.attempts++; l.attempts == 2 {
		close(l.second)
	}
	if err == nil {
		l.held++
		l.mostHeld = max(l.mostHeld, l.held)
	}
	return lease, err
}

// ReleaseLease implements store.Store (counted before the lease is gone, so no acquire can
// succeed in between).
func (l *leaseWatch) ReleaseLease(ctx context.Context, lease store.Lease) error {
	l.mu.Lock()
	l.held--
	l.mu.Unlock()
	return l.Store.ReleaseLease(ctx, lease)
}

// TestQueueOneFlushPerSessionAtATime submits two jobs of one session together to a worker
// that runs two jobs at once, holds the first flush's summarizer call until the other job
// tried to take the lease, and checks that the lease kept the two flushes apart: the second
// waits as busy (no attempt counted) and runs once the first is done, and nothing fails.
func TestQueueOneFlushPerSessionAtATime(t *testing.T) {
	r := newRig(t, "redis")
	gate := make(chan struct{})
	var opened sync.Once
	open := func() { opened.Do(func() { close(gate) }) }
	t.Cleanup(open)
	var calls atomic.Int32
	r.up.SetResponder(func(rec upstreamfake.Recorded) upstreamfake.Reply {
		rep := labelResponder(rec)
		if calls.Add(1) == 1 {
			rep.Hold = gate
		}
		return rep
	})
	m := NewMetrics(prometheus.NewRegistry())
	w, q := r.worker("w1", m)
	lw := &leaseWatch{Store: r.st, second: make(chan struct{})}
	w.Orch.Store = lw
	jobs := []*Job{job("s1", "p", 1), job("s1", "p", 2)}
	for _, j := range jobs {
		if _, err := q.Enqueue(context.Background(), j); err != nil {
			t.Fatal(err)
		}
	}
	run(t, w)
	select {
	case <-lw.second:
	case <-time.After(10 * time.Second):
		t.Fatal("the second job never tried to take the lease")
	}
	open()
	for _, j := range jobs {
		if st := waitState(t, q, j, 10*time.Second); st.State != StateDone || st.Attempt != 0 {
			t.Fatalf("status %+v", st)
		}
	}
	lw.mu.Lock()
	most := lw.mostHeld
	lw.mu.Unlock()
	if most != 1 {
		t.Fatalf("%d flushes of the session held the lease at once", most)
	}
	if got := testutil.ToFloat64(m.Jobs.WithLabelValues("busy")); got < 1 {
		t.Fatalf("busy %v", got)
	}
	for _, o := range []Outcome{OutcomeFenced, OutcomeConflict, OutcomeError} {
		if got := testutil.ToFloat64(m.Flushes.WithLabelValues(string(o))); got != 0 {
			t.Fatalf("%s flushes %v", o, got)
		}
	}
	if got := testutil.ToFloat64(m.Jobs.WithLabelValues("retried")); got != 0 {
		t.Fatalf("retried %v", got)
	}
}

// signalLog is a slog.Handler that closes seen at the first record whose message contains
// want (and drops every record).
type signalLog struct {
	want string
	seen chan struct{}
	once *sync.Once
}

// Enabled implements slog.Handler.
func (h signalLog) Enabled(context.Context, slog.Level) bool { return true }

// Handle implements slog.Handler.
func (h signalLog) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.want) {
		h.once.Do(func() { close(h.seen) })
	}
	return nil
}

// WithAttrs implements slog.Handler.
func (h signalLog) WithAttrs([]slog.Attr) slog.Handler { return h }

// WithGroup implements slog.Handler.
func (h signalLog) WithGroup(string) slog.Handler { return h }

// TestHeartbeatLeavesAReclaimedJobAlone checks that a worker's heartbeat keeps only the jobs
// it still owns fresh: once another consumer has claimed a running job's entry, the heartbeat
// stops instead of claiming the entry back.
func TestHeartbeatLeavesAReclaimedJobAlone(t *testing.T) {
	r := newRig(t, "redis")
	gate := make(chan struct{})
	r.up.SetResponder(func(rec upstreamfake.Recorded) upstreamfake.Reply {
		rep := labelResponder(rec)
		rep.Hold = gate
		return rep
	})
	w, q := r.worker("w1", nil)
	stopped := signalLog{want: "heartbeat stopped", seen: make(chan struct{}), once: new(sync.Once)}
	w.Log = slog.New(stopped)
	w.Orch.Summarizer = summarizeWithoutIdleTimeout(t, r)
	run(t, w)
	t.Cleanup(func() { close(gate) }) // before the worker stops (cleanups run last first)
	ctx := context.Background()
	j := job("s1", "hb", 1)
	if _, err := q.Enqueue(ctx, j); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(r.up.Requests()) == 1 }) // running, its summarizer call held
	pending, err := r.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: q.StreamKey(), Group: q.Group, Start: "-", End: "+", Count: 1}).Result()
	if err != nil || len(pending) != 1 || pending[0].Consumer != "w1" {
		t.Fatalf("pending %+v err %v", pending, err)
	}
	id := pending[0].ID
	if owned, err := q.heartbeat(ctx, id, "w1"); err != nil || !owned {
		t.Fatalf("heartbeat of an owned job: owned %v err %v", owned, err)
	}
	if err := r.rdb.XClaim(ctx, &redis.XClaimArgs{Stream: q.StreamKey(), Group: q.Group, Consumer: "thief", Messages: []string{id}}).Err(); err != nil {
		t.Fatal(err)
	}
	owner := func() string {
		p, _ := r.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: q.StreamKey(), Group: q.Group, Start: id, End: id, Count: 1}).Result()
		if len(p) == 0 {
			return ""
		}
		return p[0].Consumer
	}
	waitFor(t, func() bool {
		select {
		case <-stopped.seen:
			return true
		default:
			return owner() != "thief"
		}
	})
	if got := owner(); got != "thief" {
		t.Fatalf("the heartbeat took the reclaimed job back: owner %q", got)
	}
}

// summarizeWithoutIdleTimeout is the rig's summarizer without its idle timeout, for calls a
// test holds as long as it needs.
func summarizeWithoutIdleTimeout(t *testing.T, r *rig) summarize.Summarizer {
	t.Helper()
	l, err := summarize.NewLLM(summarize.LLMOptions{Endpoint: r.llm.Endpoint(), Thinking: summarize.ThinkingOff})
	if err != nil {
		t.Fatal(err)
	}
	return l
}
