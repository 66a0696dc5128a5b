package flush

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestFlushCacheAwareDefersThenCommits: a weighed flush whose cache rewrite costs more than
// it saves over the horizon ends deferred — nothing committed, StatFlushPending set, the
// outcome counted — and the same flush once the cache has expired is committed (pending
// cleared) without paying the summarizer again for the batches it already summarized.
func TestFlushCacheAwareDefersThenCommits(t *testing.T) {
	r := newRig(t, "memory")
	met := NewMetrics(nil)
	o := r.orch("w1", nil)
	o.Metrics = met
	ctx := context.Background()
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

	warm := job("s-cache", "a", 3)
	warm.Cache = &CacheCheck{At: t0.Add(30 * time.Second), LastRequest: t0}
	res, err := o.Flush(ctx, warm)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != OutcomeDeferred || res.Reason == "" || res.Batches == 0 {
		t.Fatalf("warm cache: %+v", res)
	}
	if _, v := r.state("s-cache"); v != 0 {
		t.Fatalf("a deferred flush committed version %d", v)
	}
	st := r.stats("s-cache")
	if st[StatFlushPending] != 1 || st["flush.deferred"] != 1 || st["flushes"] != 0 {
		t.Fatalf("stats after deferral: %v", st)
	}
	calls := len(r.up.Requests())
	if calls == 0 {
		t.Fatal("the summarizer was not called")
	}

	expired := job("s-cache", "a", 3)
	expired.Cache = &CacheCheck{At: t0.Add(10 * time.Minute), LastRequest: t0}
	res, err = o.Flush(ctx, expired)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != OutcomeFlushed {
		t.Fatalf("expired cache: %+v", res)
	}
	if _, v := r.state("s-cache"); v == 0 {
		t.Fatal("nothing committed once the cache expired")
	}
	if st := r.stats("s-cache"); st[StatFlushPending] != 0 || st["flushes"] != 1 {
		t.Fatalf("stats after the commit: %v", st)
	}
	if n := len(r.up.Requests()); n != calls {
		t.Fatalf("the retried flush called the summarizer again: %d calls, had %d", n, calls)
	}
	if d, f := testutil.ToFloat64(met.Flushes.WithLabelValues(string(OutcomeDeferred))), testutil.ToFloat64(met.Flushes.WithLabelValues(string(OutcomeFlushed))); d != 1 || f != 1 {
		t.Fatalf("condense_flushes_total deferred %v flushed %v, want 1 and 1", d, f)
	}
}

// TestFlushCacheAwareKeepsWorthwhileFlush: with a long horizon the same warm-cache flush pays
// for its rewrite and is committed at once; a job without a CacheCheck is never weighed.
func TestFlushCacheAwareKeepsWorthwhileFlush(t *testing.T) {
	r := newRig(t, "memory")
	o := r.orch("w1", nil)
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	j := job("s-long", "b", 3)
	j.Cache = &CacheCheck{At: t0.Add(30 * time.Second), LastRequest: t0, Requests: 200, Horizon: 100, MaxHorizon: 100}
	res, err := o.Flush(context.Background(), j)
	if err != nil || res.Outcome != OutcomeFlushed || res.Reason == "" {
		t.Fatalf("long horizon: %+v %v", res, err)
	}
	res, err = o.Flush(context.Background(), job("s-plain", "b", 3))
	if err != nil || res.Outcome != OutcomeFlushed || res.Reason != "" {
		t.Fatalf("unweighed job: %+v %v", res, err)
	}
}

// TestFlushPlanMessagesLimitsTheFlush: a mid-run job (PlanMessages) plans only over the
// leading messages; a deferred mid-run flush does not mark the session pending.
func TestFlushPlanMessagesLimitsTheFlush(t *testing.T) {
	r := newRig(t, "memory")
	o := r.orch("w1", nil)
	whole, err := o.Flush(context.Background(), job("s-whole", "c", 3))
	if err != nil {
		t.Fatal(err)
	}
	j := job("s-mid", "c", 3)
	j.PlanMessages = 3 // the task, the first tool call and its result
	part, err := o.Flush(context.Background(), j)
	if err != nil {
		t.Fatal(err)
	}
	if part.Outcome != OutcomeFlushed || part.Batches == 0 || part.Batches >= whole.Batches {
		t.Fatalf("PlanMessages 3: %d batches, whole transcript %d", part.Batches, whole.Batches)
	}
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	d := job("s-mid-deferred", "c", 3)
	d.PlanMessages = 3
	d.Cache = &CacheCheck{At: t0.Add(time.Second), LastRequest: t0}
	res, err := o.Flush(context.Background(), d)
	if err != nil || res.Outcome != OutcomeDeferred {
		t.Fatalf("warm mid-run flush: %+v %v", res, err)
	}
	if st := r.stats("s-mid-deferred"); st[StatFlushPending] != 0 || st["flush.deferred"] != 1 {
		t.Fatalf("a deferred mid-run flush must not mark the session pending: %v", st)
	}
}
