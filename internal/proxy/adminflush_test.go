package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/condense-dev/condense/internal/flush"
	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/summarize"
	"github.com/condense-dev/condense/internal/testutil/redistest"
	"github.com/condense-dev/condense/internal/upstreamfake"
	"github.com/condense-dev/condense/internal/wire"
)

// TestManualFlushServedOnce: two requests of two replicas that loaded the same snapshot (one
// admin flush request pending) both start the manual flush; the request counts as served once, so the
// next admin flush request is not ignored.
func TestManualFlushServedOnce(t *testing.T) {
	r := newRig(t, nil, nil, func(o *Options) { o.Trigger = Trigger{OnDemand: true} })
	msgs, _ := conversation(t, r, "sess-served", false)
	if code, _ := httpDo(t, http.MethodPost, adminURL(t, r)+"/admin/sessions/sess-served/flush"); code != http.StatusAccepted {
		t.Fatalf("admin flush: %d", code)
	}
	ctx := context.Background()
	snap, err := r.st.Load(ctx, "sess-served")
	if err != nil || snap.Stats[statFlushRequested] != 1 {
		t.Fatalf("%v %v", snap.Stats, err)
	}
	body, _ := aParams(msgs).MarshalJSON()
	req, err := wire.Parse(wire.Anthropic, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ { // as two requests (two replicas) would, from one snapshot
		r.px.servedFlush.Delete("sess-served") // another replica has no record of the first flush
		tn := &turn{f: wire.Anthropic, ep: epMessages, sid: "sess-served", log: r.px.log, hdr: http.Header{}, client: req, view: req, fwd: req, snap: snap, at: time.Now()}
		if trig, _ := r.px.dueTrigger(tn); trig != "manual" {
			t.Fatalf("trigger %q", trig)
		}
		if done := r.px.startFlush(tn, "manual", req, body, flushOpts{}, true); done != nil {
			<-done
		}
	}
	r.settle()
	snap, _ = r.st.Load(ctx, "sess-served")
	if req, served := snap.Stats[statFlushRequested], snap.Stats[statFlushServed]; served != req {
		t.Fatalf("served %d of %d requested flushes", served, req)
	}
}

// TestManualFlushRefusedByLeaseIsNotServed: while the snapshot shows the session's lease
// held by another flusher no request starts the manual flush; one that finds the lease held
// all the same (taken after its snapshot was loaded) did not run, so the admin request stays
// pending, and the session's next request once the lease is released starts it again.
func TestManualFlushRefusedByLeaseIsNotServed(t *testing.T) {
	r := newRig(t, nil, nil, func(o *Options) { o.Trigger = Trigger{OnDemand: true}; o.FlushWaitTimeout = 0 })
	msgs, c := conversation(t, r, "sess-busy", false)
	ctx := context.Background()
	if code, _ := httpDo(t, http.MethodPost, adminURL(t, r)+"/admin/sessions/sess-busy/flush"); code != http.StatusAccepted {
		t.Fatalf("admin flush: %d", code)
	}
	before, _ := r.st.Load(ctx, "sess-busy") // no lease yet
	lease, err := r.st.AcquireLease(ctx, "sess-busy", "another-replica", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	manual := func() float64 { return testutil.ToFloat64(r.px.met.FlushTriggers.WithLabelValues("manual")) }
	waitFlight := func() { // the flush the last request started has ended
		r.settleFlush("sess-busy")
	}
	next := func(text string) {
		msgs = userTurn(t, r, c, msgs, text)
		waitFlight()
	}
	next("one")
	next("two")
	if n := manual(); n != 0 {
		t.Fatalf("%v manual flushes submitted while the lease was held; want 0", n)
	}
	tn := staleTurn(t, r, "sess-busy", msgs, before)
	if trig, _ := r.px.dueTrigger(tn); trig != "manual" {
		t.Fatalf("trigger %q from a snapshot without the lease; want manual", trig)
	}
	<-r.px.startFlush(tn, "manual", tn.view, nil, flushOpts{}, true) // finds the lease held
	waitFlight()
	snap, _ := r.st.Load(ctx, "sess-busy")
	if snap.Stats[statFlushServed] != 0 {
		t.Fatalf("a flush refused by the lease counted as served: %v", snap.Stats)
	}
	if err := r.st.ReleaseLease(ctx, lease); err != nil {
		t.Fatal(err)
	}
	next("three") // starts it again, and it runs
	snap, _ = r.st.Load(ctx, "sess-busy")
	if n := manual(); snap.Stats[statFlushServed] != 1 || snap.Version == 0 || n != 2 {
		t.Fatalf("the admin flush never ran: version %d, %v, %v manual flushes (want 2)", snap.Version, snap.Stats, n)
	}
}

// TestManualFlushNotResubmittedOnOtherReplicas: two proxies on one real Redis; while replica
// A runs the admin flush (holding the session's lease), replica B's requests do not submit
// it too, and once it ended neither re-fires it.
func TestManualFlushNotResubmittedOnOtherReplicas(t *testing.T) {
	rs := redistest.Start(t, nil)
	open := redisOpener(t, rs)
	onDemand := func(o *Options) { o.Trigger = Trigger{OnDemand: true}; o.FlushWaitTimeout = 0 }
	a := newRig(t, nil, open(), onDemand)
	b := newRig(t, a.up, open(), onDemand)
	g, release := gate(t, a)
	const sid = "sess-replica-flush"
	msgs, ca := conversation(t, a, sid, false)
	cb := b.anthropic(sid)
	if code, _ := httpDo(t, http.MethodPost, adminURL(t, a)+"/admin/sessions/"+sid+"/flush"); code != http.StatusAccepted {
		t.Fatalf("admin flush: %d", code)
	}
	manual := func(r *rig) float64 {
		return testutil.ToFloat64(r.px.met.FlushTriggers.WithLabelValues("manual"))
	}
	msgs = userTurn(t, a, ca, msgs, "one") // A starts it; it waits in the summarizer, leased
	select {
	case <-g.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the manual flush never reached the summarizer")
	}
	msgs = userTurn(t, b, cb, msgs, "two")
	msgs = userTurn(t, b, cb, msgs, "three")
	b.settle()
	if n := manual(b); n != 0 {
		t.Fatalf("replica B submitted %v manual flushes while A's ran; want 0", n)
	}
	release()
	a.settleFlush(sid)
	msgs = userTurn(t, b, cb, msgs, "four")
	userTurn(t, a, ca, msgs, "five")
	a.settle()
	b.settle()
	snap, _ := a.st.Load(context.Background(), sid)
	if na, nb := manual(a), manual(b); na != 1 || nb != 0 || snap.Stats[statFlushServed] != 1 || snap.Version == 0 {
		t.Fatalf("manual flushes A %v, B %v, served %d, version %d; want 1, 0, 1, > 0", na, nb, snap.Stats[statFlushServed], snap.Version)
	}
}

// userTurn sends one more user message of the conversation msgs and returns it with the
// model's answer ("ok") appended.
func userTurn(t *testing.T, r *rig, c *anthropic.Client, msgs []anthropic.MessageParam, text string) []anthropic.MessageParam {
	t.Helper()
	r.up.Enqueue(upstreamfake.Reply{Text: "ok"})
	msgs = append(msgs, anthropic.NewUserMessage(anthropic.NewTextBlock(text)))
	m := aTurn(t, c, msgs, false)
	return append(msgs, m.ToParam())
}

// gatedSummarizer is the extractive summarizer, but each call first says it started (on
// entered, once) and waits until gate closes.
type gatedSummarizer struct {
	summarize.Extractive
	entered chan struct{}
	once    sync.Once
	gate    chan struct{}
}

func (g *gatedSummarizer) Summarize(ctx context.Context, req *summarize.Request) (*summarize.Result, error) {
	g.once.Do(func() { close(g.entered) })
	select {
	case <-g.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.Extractive.Summarize(ctx, req)
}

// gatedRig is an on-demand rig whose requests do not wait for flushes and whose flushes wait
// in a gatedSummarizer until release is called (at the latest by the test's cleanup).
func gatedRig(t *testing.T) (r *rig, g *gatedSummarizer, release func()) {
	r = newRig(t, nil, nil, func(o *Options) { o.Trigger = Trigger{OnDemand: true}; o.FlushWaitTimeout = 0 })
	g, release = gate(t, r)
	return r, g, release
}

// gate makes r's in-process flushes wait in a gatedSummarizer until release is called (at the
// latest by the test's cleanup, before the rig's waits for the flush).
func gate(t *testing.T, r *rig) (g *gatedSummarizer, release func()) {
	g = &gatedSummarizer{entered: make(chan struct{}), gate: make(chan struct{})}
	r.inpro.Orch.Summarizer = g
	release = sync.OnceFunc(func() { close(g.gate) })
	t.Cleanup(release)
	return g, release
}

// TestManualFlushNotRefiredWhileRunning: requests arriving while the admin flush runs in this
// process do not submit it again; once it ended the request is served and nothing re-fires.
func TestManualFlushNotRefiredWhileRunning(t *testing.T) {
	r, g, release := gatedRig(t)
	msgs, c := conversation(t, r, "sess-running", false)
	if code, _ := httpDo(t, http.MethodPost, adminURL(t, r)+"/admin/sessions/sess-running/flush"); code != http.StatusAccepted {
		t.Fatalf("admin flush: %d", code)
	}
	manual := func() float64 { return testutil.ToFloat64(r.px.met.FlushTriggers.WithLabelValues("manual")) }
	next := func(text string) { msgs = userTurn(t, r, c, msgs, text) }
	next("one") // starts the manual flush, which waits in the summarizer
	select {
	case <-g.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the manual flush never reached the summarizer")
	}
	next("two")
	next("three")
	r.settle() // flushes are submitted in the background
	if n := manual(); n != 1 {
		t.Fatalf("%v manual flushes submitted while the first ran; want 1", n)
	}
	release()
	r.settleFlush("sess-running")
	next("four")
	r.settle()
	snap, _ := r.st.Load(context.Background(), "sess-running")
	if n := manual(); n != 1 || snap.Stats[statFlushServed] != 1 || snap.Version == 0 {
		t.Fatalf("manual flushes %v, served %d, version %d; want 1, 1, > 0", n, snap.Stats[statFlushServed], snap.Version)
	}
}

// recordingFlusher is a flush.Queue whose submitted jobs are remembered.
type recordingFlusher struct {
	*flush.Queue
	mu   sync.Mutex
	jobs []*flush.Job
}

func (f *recordingFlusher) Submit(ctx context.Context, job *flush.Job) (*flush.Ticket, error) {
	tk, err := f.Queue.Submit(ctx, job)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.jobs = append(f.jobs, job)
	return tk, err
}

func (f *recordingFlusher) submitted() []*flush.Job {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*flush.Job(nil), f.jobs...)
}

// TestDeadManualFlushJobIsServed: in jobs mode an admin flush whose job is dead-lettered (a
// status without a result) counts as served: the session's later requests do not enqueue the
// manual job again and again.
func TestDeadManualFlushJobIsServed(t *testing.T) {
	rs := redistest.Start(t, nil)
	ctx := context.Background()
	st, err := store.Open(ctx, rs.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	q := &recordingFlusher{Queue: flush.NewQueue(rdb, "")} // no worker: the test decides the job's fate
	r := newRig(t, nil, st, func(o *Options) { o.Trigger = Trigger{OnDemand: true}; o.FlushWaitTimeout = 0; o.Flusher = q })
	msgs, c := conversation(t, r, "sess-dead", false)
	if code, _ := httpDo(t, http.MethodPost, adminURL(t, r)+"/admin/sessions/sess-dead/flush"); code != http.StatusAccepted {
		t.Fatalf("admin flush: %d", code)
	}
	next := func(text string) { msgs = userTurn(t, r, c, msgs, text) }
	next("one")
	var jobs []*flush.Job
	for jobs = q.submitted(); len(jobs) == 0; jobs = q.submitted() { // submitted in the background
		time.Sleep(5 * time.Millisecond)
	}
	if len(jobs) != 1 || jobs[0].Trigger != "manual" {
		t.Fatalf("jobs %+v", jobs)
	}
	dead, _ := json.Marshal(flush.Status{State: flush.StateDead, Attempt: 3, Error: "summarizer down"})
	if err := rdb.Set(ctx, q.StatusKey("sess-dead", jobs[0].Hash), dead, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	r.settleFlush("sess-dead")
	snap, _ := st.Load(ctx, "sess-dead")
	if snap.Stats[statFlushServed] != 1 {
		t.Fatalf("a dead-lettered manual flush was not counted as served: %v", snap.Stats)
	}
	next("two")
	r.settle()
	if jobs := q.submitted(); len(jobs) != 1 {
		t.Fatalf("the admin flush was enqueued again: %d jobs", len(jobs))
	}
}

// staleTurn is a request of the session carrying snap, as a request that loaded snap and
// reaches the flush triggers later would be.
func staleTurn(t *testing.T, r *rig, sid string, msgs []anthropic.MessageParam, snap *store.Snapshot) *turn {
	t.Helper()
	body, _ := aParams(msgs).MarshalJSON()
	req, err := wire.Parse(wire.Anthropic, body)
	if err != nil {
		t.Fatal(err)
	}
	return &turn{f: wire.Anthropic, ep: epMessages, sid: sid, log: r.px.log, hdr: http.Header{},
		client: req, view: req, fwd: req, body: wire.Segments{req.Raw()}, snap: snap, at: time.Now()}
}

// TestConcurrentRequestsSubmitOneManualFlush: of requests due the same admin flush, one
// submits it — requests racing to start it (waited or not), requests arriving while it runs,
// and requests whose snapshot was loaded before it wrote the served count but that weigh the
// triggers after it ended.
func TestConcurrentRequestsSubmitOneManualFlush(t *testing.T) {
	r, g, release := gatedRig(t)
	const sid = "sess-race"
	msgs, c := conversation(t, r, sid, false)
	if code, _ := httpDo(t, http.MethodPost, adminURL(t, r)+"/admin/sessions/"+sid+"/flush"); code != http.StatusAccepted {
		t.Fatalf("admin flush: %d", code)
	}
	ctx := context.Background()
	stale, err := r.st.Load(ctx, sid)
	if err != nil || stale.Stats[statFlushRequested] != 1 || stale.Stats[statFlushServed] != 0 {
		t.Fatalf("snapshot %+v, %v; want one admin flush requested, none served", stale, err)
	}
	manual := func() float64 { return testutil.ToFloat64(r.px.met.FlushTriggers.WithLabelValues("manual")) }

	// Requests racing to start it, as requests that wait for their flush do: all found it
	// due before any started it.
	var due []*turn
	for i := 0; i < 8; i++ {
		tn := staleTurn(t, r, sid, msgs, stale)
		if trig, _ := r.px.dueTrigger(tn); trig != "manual" {
			t.Fatalf("trigger %q; want manual", trig)
		}
		due = append(due, tn)
	}
	var wg sync.WaitGroup
	for _, tn := range due {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r.px.startFlush(tn, "manual", tn.view, nil, flushOpts{}, true) == nil {
				t.Error("startFlush failed")
			}
		}()
	}
	wg.Wait()
	select {
	case <-g.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the manual flush never reached the summarizer")
	}
	if n := manual(); n != 1 {
		t.Fatalf("8 racing requests submitted %v manual flushes; want 1", n)
	}

	// Concurrent client requests while it runs.
	for i := 0; i < 4; i++ {
		r.up.Enqueue(upstreamfake.Reply{Text: "ok"})
	}
	more := append(append([]anthropic.MessageParam(nil), msgs...), anthropic.NewUserMessage(anthropic.NewTextBlock("during")))
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Messages.New(ctx, aParams(more)); err != nil {
				t.Errorf("messages.new: %v", err)
			}
		}()
	}
	wg.Wait()
	r.settle()
	if n := manual(); n != 1 {
		t.Fatalf("%v manual flushes after requests during the flush; want 1", n)
	}

	// Right after it ended: a request still carrying the snapshot from before the served
	// count was written, and the client's next request.
	release()
	r.settleFlush(sid)
	if trig, _ := r.px.dueTrigger(staleTurn(t, r, sid, msgs, stale)); trig == "manual" {
		t.Fatal("a request with a snapshot from before the flush was served fires it again")
	}
	msgs = userTurn(t, r, c, msgs, "after")
	r.settle()
	snap, _ := r.st.Load(ctx, sid)
	if n := manual(); n != 1 || snap.Stats[statFlushServed] != 1 || snap.Version == 0 {
		t.Fatalf("manual flushes %v, served %d, version %d; want 1, 1, > 0", n, snap.Stats[statFlushServed], snap.Version)
	}
}
