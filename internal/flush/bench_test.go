package flush

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/summarize"
	"github.com/condense-dev/condense/internal/testutil/redistest"
	"github.com/condense-dev/condense/internal/wire"
)

// BenchmarkFlushExtractiveMemory measures one whole flush (lease, load, plan, extractive
// summaries of 5 batches, blobs, commit, stats, release) on the in-memory store.
func BenchmarkFlushExtractiveMemory(b *testing.B) {
	st := store.NewMemory(0)
	defer st.Close()
	o := &Orchestrator{Store: st, Planner: EnginePlanner{Policy: testPolicy()}, Summarizer: summarize.Extractive{}, Owner: "bench", Log: quiet}
	body := transcript("bench", 5)
	ctx := context.Background()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := o.Flush(ctx, &Job{Queued: Queued{Session: fmt.Sprintf("s%d", i), Format: wire.Anthropic, Body: body}})
		if err != nil || res.Outcome != OutcomeFlushed {
			b.Fatalf("res %+v err %v", res, err)
		}
	}
}

// BenchmarkQueueThroughput enqueues b.N flush jobs (distinct sessions, 2 batches each) on a
// real redis-server and waits until two workers (concurrency 2 each) have completed them all
// with the extractive summarizer and the Redis store: end-to-end jobs per second.
func BenchmarkQueueThroughput(b *testing.B) {
	srv := redistest.Start(b, nil)
	ctx := context.Background()
	st, err := store.Open(ctx, srv.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	rdb, prefix, err := RedisFromURL(srv.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer rdb.Close()
	q := NewQueue(rdb, prefix)
	var stops []context.CancelFunc
	var dones []chan struct{}
	for i := 0; i < 2; i++ {
		w := &Worker{Queue: q, Consumer: fmt.Sprintf("w%d", i), Concurrency: 2, Block: 20 * time.Millisecond, Log: quiet,
			Orch: &Orchestrator{Store: st, Planner: EnginePlanner{Policy: testPolicy()}, Summarizer: summarize.Extractive{}, Owner: fmt.Sprintf("w%d", i), Log: quiet}}
		c, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { _ = w.Run(c); close(done) }()
		<-w.Ready()
		stops, dones = append(stops, cancel), append(dones, done)
	}
	body := transcript("qb", 2)
	jobs := make([]*Job, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range jobs {
		jobs[i] = &Job{Queued: Queued{Session: fmt.Sprintf("qb-%d", i), Format: wire.Anthropic, Body: body}}
		if _, err := q.Enqueue(ctx, jobs[i]); err != nil {
			b.Fatal(err)
		}
	}
	for _, j := range jobs {
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		s, err := q.Wait(wctx, j.Session, j.Hash)
		cancel()
		if err != nil || s.State != StateDone {
			b.Fatalf("status %+v err %v", s, err)
		}
	}
	b.StopTimer()
	for i := range stops {
		stops[i]()
		<-dones[i]
	}
}

// BenchmarkFlushWeighedExtractiveMemory is BenchmarkFlushExtractiveMemory with the
// cache-aware decision (two renders, two prompt flattenings, a cache model) before the
// commit; the difference is what weighing costs per flush.
func BenchmarkFlushWeighedExtractiveMemory(b *testing.B) {
	st := store.NewMemory(0)
	defer st.Close()
	o := &Orchestrator{Store: st, Planner: EnginePlanner{Policy: testPolicy()}, Summarizer: summarize.Extractive{}, Owner: "bench", Log: quiet}
	body := transcript("bench", 5)
	ctx := context.Background()
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// A warm cache and a long horizon: the decision runs in full and keeps the flush.
		job := &Job{Queued: Queued{Session: fmt.Sprintf("s%d", i), Format: wire.Anthropic, Body: body,
			Cache: &CacheCheck{At: t0.Add(time.Second), LastRequest: t0, Requests: 1000, Horizon: 1000, MaxHorizon: 1000}}}
		res, err := o.Flush(ctx, job)
		if err != nil || res.Outcome != OutcomeFlushed {
			b.Fatalf("res %+v err %v", res, err)
		}
	}
}

// BenchmarkFlushExtractiveMemoryParsed is BenchmarkFlushExtractiveMemory with the job
// carrying the request already parsed (Job.Request, as the proxy hands in-process flushes):
// the difference is the parse the planner no longer does.
func BenchmarkFlushExtractiveMemoryParsed(b *testing.B) {
	st := store.NewMemory(0)
	defer st.Close()
	o := &Orchestrator{Store: st, Planner: EnginePlanner{Policy: testPolicy()}, Summarizer: summarize.Extractive{}, Owner: "bench", Log: quiet}
	body := transcript("bench", 5)
	req, err := wire.Parse(wire.Anthropic, body)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := o.Flush(ctx, &Job{Queued: Queued{Session: fmt.Sprintf("s%d", i), Format: wire.Anthropic, Body: body}, Request: req})
		if err != nil || res.Outcome != OutcomeFlushed {
			b.Fatalf("res %+v err %v", res, err)
		}
	}
}

// BenchmarkFlushRetryDeferred measures the flush the proxy retries on a session's requests
// while an earlier one stays deferred: a session whose state covers 40 turns sends 2 more,
// the plan summarizes them (the summaries come from the orchestrator's memo after the first
// round), and the cache-aware decision — a live cache, one expected further request —
// defers it, so nothing is committed. In the load test 70 % of flushes end this way.
func BenchmarkFlushRetryDeferred(b *testing.B) {
	st := store.NewMemory(0)
	defer st.Close()
	o := &Orchestrator{Store: st, Planner: EnginePlanner{Policy: testPolicy()}, Summarizer: summarize.Extractive{}, Owner: "bench", Log: quiet}
	ctx := context.Background()
	if res, err := o.Flush(ctx, &Job{Queued: Queued{Session: "s", Format: wire.Anthropic, Body: transcript("bench", 40)}}); err != nil || res.Outcome != OutcomeFlushed {
		b.Fatalf("first flush: %+v %v", res, err)
	}
	body := transcript("bench", 42)
	req, err := wire.Parse(wire.Anthropic, body)
	if err != nil {
		b.Fatal(err)
	}
	// As the proxy hands it over: the parsed request, the state it already decoded and the
	// request as it forwarded it.
	snap, err := st.Load(ctx, "s")
	if err != nil {
		b.Fatal(err)
	}
	state := &pruner.State{}
	if err := state.UnmarshalBinary(snap.State); err != nil {
		b.Fatal(err)
	}
	fwd := pruner.RenderRequest(req, state, testPolicy()).Request
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		job := &Job{Request: req, State: state, StateVersion: snap.Version, Rendered: fwd, Queued: Queued{Session: "s", Format: wire.Anthropic,
			Cache: &CacheCheck{At: t0.Add(time.Second), LastRequest: t0, Requests: 1, Horizon: 1, MaxHorizon: 1}}}
		res, err := o.Flush(ctx, job)
		if err != nil || res.Outcome != OutcomeDeferred {
			b.Fatalf("res %+v err %v", res, err)
		}
	}
}
