package flush

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/summarize"
	"github.com/condense-dev/condense/internal/upstreamfake"
	"github.com/condense-dev/condense/internal/wire"
)

func TestFlushCommitsSummaries(t *testing.T) {
	for _, backend := range []string{"memory", "redis"} {
		t.Run(backend, func(t *testing.T) {
			r := newRig(t, backend)
			o := r.orch("a", nil)
			res, err := o.Flush(context.Background(), job("s1", "x", 3))
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != OutcomeFlushed || res.Version != 1 || res.Batches != 3 || res.Failed != 0 || res.Plans != 1 {
				t.Fatalf("res %+v", res)
			}
			if n := len(r.up.Requests()); n != 3 {
				t.Fatalf("%d summarizer calls", n)
			}
			st, v := r.state("s1")
			if v != 1 || len(st.Summaries) != 3 || len(st.Records) != 3 {
				t.Fatalf("version %d summaries %d records %d", v, len(st.Summaries), len(st.Records))
			}
			for _, s := range st.Summaries {
				if !strings.Contains(s.Text, "`t") || strings.Contains(s.Text, "[[") {
					t.Fatalf("summary not decorated: %q", s.Text)
				}
			}
			// Originals are kept as blobs for recovery.
			for k := range st.Records {
				if _, err := r.st.GetBlob(context.Background(), "s1", "result/"+k); err != nil {
					t.Fatalf("blob of %s: %v", k, err)
				}
			}
			stats := r.stats("s1")
			if stats["flush.flushed"] != 1 || stats[store.StatFlushes] != 1 || stats["summarizerCalls"] != 3 ||
				stats["summarizerInputTokens"] != 3000 || stats[store.StatSummarizerCostMicros] <= 0 {
				t.Fatalf("stats %v", stats)
			}
			// The same request again: nothing left to do.
			res, err = o.Flush(context.Background(), job("s1", "x", 3))
			if err != nil || res.Outcome != OutcomeEmpty || res.Version != 1 {
				t.Fatalf("second flush %+v %v", res, err)
			}
			if n := len(r.up.Requests()); n != 3 {
				t.Fatalf("%d summarizer calls after the empty flush", n)
			}
			// Lease released: another owner can flush the session at once.
			if l, err := r.st.AcquireLease(context.Background(), "s1", "other", time.Second); err != nil {
				t.Fatalf("lease not released: %v", err)
			} else {
				_ = r.st.ReleaseLease(context.Background(), l)
			}
		})
	}
}

func TestFlushChainFollowup(t *testing.T) {
	r := newRig(t, "memory")
	r.pol.Chain.Enabled = true
	r.pol.Chain.RollingWindow = 0
	res, err := r.orch("a", nil).Flush(context.Background(), job("s1", "c", 2))
	if err != nil || res.Outcome != OutcomeFlushed {
		t.Fatalf("res %+v err %v", res, err)
	}
	st, v := r.state("s1")
	if len(st.Chains) != 1 || len(st.Summaries) != 2 {
		t.Fatalf("chains %d summaries %d (version %d, plans %d)", len(st.Chains), len(st.Summaries), v, res.Plans)
	}
}

func TestFlushExtractiveDefault(t *testing.T) {
	r := newRig(t, "memory")
	s, err := summarize.FromConfig(defaultConfigWithModel(""), summarize.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.orch("a", s).Flush(context.Background(), job("s1", "e", 2))
	if err != nil || res.Outcome != OutcomeFlushed || res.Usage.Calls != 0 {
		t.Fatalf("res %+v err %v", res, err)
	}
	if len(r.up.Requests()) != 0 {
		t.Fatal("extractive called the upstream")
	}
	st, _ := r.state("s1")
	if len(st.Summaries) != 2 || !strings.Contains(st.Summaries[0].Text, "bash command=") {
		t.Fatalf("summaries %+v", st.Summaries)
	}
}

func TestFlushSummarizerFailureCommitsNothing(t *testing.T) {
	r := newRig(t, "redis")
	r.up.SetResponder(func(upstreamfake.Recorded) upstreamfake.Reply {
		return upstreamfake.Reply{Status: 529, ErrorType: "overloaded_error", ErrorMessage: "Overloaded"}
	})
	res, err := r.orch("a", nil).Flush(context.Background(), job("s1", "f", 2))
	if !errors.Is(err, ErrSummarizerFailed) || !errors.Is(err, summarize.ErrTransient) || res.Outcome != OutcomeSummarizerFailed || res.Failed != 2 {
		t.Fatalf("res %+v err %v", res, err)
	}
	if _, v := r.state("s1"); v != 0 {
		t.Fatalf("committed version %d", v)
	}
	if s := r.stats("s1"); s["flush.summarizer-failed"] != 1 || s[store.StatFlushes] != 0 {
		t.Fatalf("stats %v", s)
	}
}

func TestFlushBadInputIsTyped(t *testing.T) {
	r := newRig(t, "memory")
	o := r.orch("a", nil)
	var je *JobError
	for name, j := range map[string]*Job{
		"bad-json":   {Queued: Queued{Session: "s1", Format: wire.Anthropic, Body: []byte(`{"messages":[`)}},
		"empty-body": {Queued: Queued{Session: "s1", Format: wire.Anthropic}},
		"no-format":  {Queued: Queued{Session: "s1", Body: []byte(`{}`)}},
		"bad-format": {Queued: Queued{Session: "s1", Format: wire.Format(9), Body: []byte(`{}`)}},
		"bad-id":     {Queued: Queued{Session: "", Format: wire.Anthropic, Body: []byte(`{}`)}},
		"bad-hash":   {Queued: Queued{Session: "s1", Format: wire.Anthropic, Body: []byte(`{}`), Hash: "00"}},
	} {
		res, err := o.Flush(context.Background(), j)
		if !errors.As(err, &je) || res.Outcome != OutcomeError {
			t.Fatalf("%s: res %+v err %v", name, res, err)
		}
	}
}

// TestFlushLeaseExclusion runs two orchestrators (two owners, as in two proxy replicas) on one
// session over one real Redis at the same time: exactly one flushes, the other is busy.
func TestFlushLeaseExclusion(t *testing.T) {
	r := newRig(t, "redis")
	r.up.SetResponder(func(rec upstreamfake.Recorded) upstreamfake.Reply {
		rep := labelResponder(rec)
		rep.Delay = time.Second
		return rep
	})
	var wg sync.WaitGroup
	results := make([]*Result, 2)
	errs := make([]error, 2)
	start := make(chan struct{})
	for i, owner := range []string{"replica-a", "replica-b"} {
		wg.Add(1)
		go func(i int, owner string) {
			defer wg.Done()
			<-start
			results[i], errs[i] = r.orch(owner, nil).Flush(context.Background(), job("shared", "l", 2))
		}(i, owner)
	}
	close(start)
	wg.Wait()
	var flushed, busy int
	for i := range results {
		switch {
		case errs[i] == nil && results[i].Outcome == OutcomeFlushed:
			flushed++
		case errors.Is(errs[i], ErrBusy) && errors.Is(errs[i], store.ErrLeaseHeld) && results[i].Outcome == OutcomeBusy:
			busy++
		default:
			t.Fatalf("result %d: %+v %v", i, results[i], errs[i])
		}
	}
	if flushed != 1 || busy != 1 {
		t.Fatalf("flushed %d busy %d", flushed, busy)
	}
	if n := len(r.up.Requests()); n != 2 {
		t.Fatalf("%d summarizer calls, want 2 (one flush)", n)
	}
	if _, v := r.state("shared"); v != 1 {
		t.Fatalf("version %d", v)
	}
}

// committer is a summarizer that, on its first call, commits a new version of the session
// behind the orchestrator's back (as the proxy does when it records a hidden exchange), then
// delegates to the real summarizer.
type committer struct {
	s       summarize.Summarizer
	st      store.Store
	session string
	done    atomic.Bool
}

func (c *committer) Summarize(ctx context.Context, req *summarize.Request) (*summarize.Result, error) {
	if c.done.CompareAndSwap(false, true) {
		snap, err := c.st.Load(ctx, c.session)
		if err != nil {
			return nil, err
		}
		if _, err := c.st.Commit(ctx, c.session, snap.Version, snap.State, 0); err != nil {
			return nil, err
		}
	}
	return c.s.Summarize(ctx, req)
}

func TestFlushCASConflictReplans(t *testing.T) {
	for _, backend := range []string{"memory", "redis"} {
		t.Run(backend, func(t *testing.T) {
			r := newRig(t, backend)
			c := &committer{s: r.llm, st: r.st, session: "s1"}
			res, err := r.orch("a", c).Flush(context.Background(), job("s1", "cas", 2))
			if err != nil || res.Outcome != OutcomeFlushed {
				t.Fatalf("res %+v err %v", res, err)
			}
			// Plan 1 lost the compare-and-set to the concurrent commit (version 1); plan 2
			// re-planned over version 1, reused the summaries, and committed version 2.
			if res.Plans != 2 || res.Version != 2 {
				t.Fatalf("plans %d version %d", res.Plans, res.Version)
			}
			if n := len(r.up.Requests()); n != 2 {
				t.Fatalf("%d summarizer calls; re-plan should reuse the summaries", n)
			}
			st, _ := r.state("s1")
			if len(st.Summaries) != 2 {
				t.Fatalf("summaries %d", len(st.Summaries))
			}
		})
	}
}

// racingPlanner is the real engine planner, but after every plan another writer commits a
// new version of the session (a hot session written by other requests), so every commit of
// the orchestrator loses the compare-and-set.
type racingPlanner struct {
	EnginePlanner
	st store.Store
}

func (p racingPlanner) Plan(ctx context.Context, job *Job, snap *store.Snapshot) (Plan, error) {
	plan, err := p.EnginePlanner.Plan(ctx, job, snap)
	if err != nil {
		return nil, err
	}
	if _, err := p.st.Commit(ctx, job.Session, snap.Version, snap.State, 0); err != nil {
		return nil, err
	}
	return plan, nil
}

func TestFlushConflictGivesUp(t *testing.T) {
	r := newRig(t, "memory")
	o := r.orch("a", nil)
	o.Planner = racingPlanner{EnginePlanner: EnginePlanner{Policy: r.pol}, st: r.st}
	o.MaxPlans = 3
	res, err := o.Flush(context.Background(), job("s1", "cc", 1))
	if !errors.Is(err, ErrConflict) || res.Outcome != OutcomeConflict || res.Plans != 3 {
		t.Fatalf("res %+v err %v", res, err)
	}
	// Summaries were reused across the re-plans: one call for the one batch.
	if n := len(r.up.Requests()); n != 1 {
		t.Fatalf("%d summarizer calls", n)
	}
	if s := r.stats("s1"); s["flush.conflict"] != 1 {
		t.Fatalf("stats %v", s)
	}
}

func TestInProcessCoalesces(t *testing.T) {
	r := newRig(t, "memory")
	r.up.SetResponder(func(rec upstreamfake.Recorded) upstreamfake.Reply {
		rep := labelResponder(rec)
		rep.Delay = time.Second
		return rep
	})
	p := &InProcess{Orch: r.orch("a", nil)}
	ctx := context.Background()
	j1 := job("s1", "p", 1)
	t1, err := p.Enqueue(ctx, j1)
	if err != nil {
		t.Fatal(err)
	}
	same, _ := p.Enqueue(ctx, job("s1", "p", 1))
	if same != t1 {
		t.Fatal("same (session, hash) got a new ticket")
	}
	// Two newer requests while the first runs: only the newest runs next, both share its ticket.
	t2, _ := p.Enqueue(ctx, job("s1", "p", 2))
	t3, _ := p.Enqueue(ctx, job("s1", "p", 3))
	if t2 != t3 {
		t.Fatal("waiting jobs of one session should coalesce")
	}
	other, _ := p.Enqueue(ctx, job("s2", "q", 1))
	for _, tk := range []*Ticket{t1, t3, other} {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		res, err := tk.Wait(wctx)
		cancel()
		if err != nil || res.Outcome != OutcomeFlushed {
			t.Fatalf("res %+v err %v", res, err)
		}
	}
	st, v := r.state("s1")
	if v != 2 || len(st.Summaries) != 3 {
		t.Fatalf("version %d summaries %d", v, len(st.Summaries))
	}
	// 1 + 2 (the third transcript's new calls) + 1 for s2.
	if n := len(r.up.Requests()); n != 4 {
		t.Fatalf("%d summarizer calls", n)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Enqueue(ctx, job("s3", "z", 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("enqueue after close: %v", err)
	}
	// A bounded wait that times out returns the context error.
	short, cancel := context.WithTimeout(ctx, time.Millisecond)
	defer cancel()
	if _, err := (&Ticket{done: make(chan struct{})}).Wait(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait: %v", err)
	}
}

func TestWaitVersion(t *testing.T) {
	for _, backend := range []string{"memory", "redis"} {
		t.Run(backend, func(t *testing.T) {
			r := newRig(t, backend)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			got := make(chan uint64, 1)
			go func() {
				v, err := waitVersion(ctx, r.st, "s1", 0)
				if err != nil {
					t.Error(err)
				}
				got <- v
			}()
			time.Sleep(50 * time.Millisecond)
			if _, err := r.orch("a", nil).Flush(ctx, job("s1", "w", 1)); err != nil {
				t.Fatal(err)
			}
			if v := <-got; v != 1 {
				t.Fatalf("version %d", v)
			}
			short, c2 := context.WithTimeout(ctx, 100*time.Millisecond)
			defer c2()
			if v, err := waitVersion(short, r.st, "s1", 1); !errors.Is(err, context.DeadlineExceeded) || v != 1 {
				t.Fatalf("v %d err %v", v, err)
			}
		})
	}
}

// openAITranscript is transcript() in Chat Completions form.
func openAITranscript(tag string, n int) []byte {
	msgs := []any{map[string]any{"role": "system", "content": "you are an agent"}, map[string]any{"role": "user", "content": "task " + tag}}
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("call_%s_%d", tag, i)
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": id, "type": "function",
				"function": map[string]any{"name": "shell", "arguments": fmt.Sprintf(`{"cmd":"step %d"}`, i)}}}},
			map[string]any{"role": "tool", "tool_call_id": id, "content": fmt.Sprintf("out %s %d\n", tag, i) + strings.Repeat("some output line\n", 150)})
	}
	msgs = append(msgs, map[string]any{"role": "assistant", "content": "done"}, map[string]any{"role": "user", "content": "next"})
	b, _ := json.Marshal(map[string]any{"model": "gpt-5", "messages": msgs})
	return b
}

// TestFlushFallsBackToSessionModel: the summarizer model is down; the job carries the
// session's own model (an OpenAI endpoint on a second fake upstream), which writes the
// summaries; the fallback is visible in the metrics.
func TestFlushFallsBackToSessionModel(t *testing.T) {
	r := newRig(t, "memory")
	r.up.SetResponder(func(upstreamfake.Recorded) upstreamfake.Reply {
		return upstreamfake.Reply{Status: 503, ErrorType: "api_error", ErrorMessage: "unavailable"}
	})
	sess := upstreamfake.Start()
	defer sess.Close()
	sess.SetResponder(func(rec upstreamfake.Recorded) upstreamfake.Reply {
		prompt := gjson.GetBytes(rec.Body, "messages.0.content").String()
		_, calls := summarize.ParseBatchPrompt(prompt)
		var lines []string
		for _, c := range calls {
			lines = append(lines, fmt.Sprintf("- [[%d:%s]] via session model", c.Label, c.Tool))
		}
		return upstreamfake.Reply{Text: strings.Join(lines, "\n")}
	})
	m := NewMetrics(prometheus.NewRegistry())
	fb := summarize.NewFallback(r.llm)
	fb.OnEvent = m.FallbackEvent
	o := r.orch("a", fb)
	o.Metrics = m
	o.Parallelism = 1
	j := &Job{Queued: Queued{Session: "oa", Format: wire.OpenAI, Body: openAITranscript("o", 2),
		SessionModel: &summarize.Endpoint{Format: wire.OpenAI, BaseURL: sess.URL + "/v1", Model: "gpt-5", APIKey: "client-key"}}}
	res, err := o.Flush(context.Background(), j)
	if err != nil || res.Outcome != OutcomeFlushed || res.Batches != 2 {
		t.Fatalf("res %+v err %v", res, err)
	}
	st, _ := r.state("oa")
	if len(st.Summaries) != 2 || !strings.Contains(st.Summaries[0].Text, "via session model") {
		t.Fatalf("summaries %+v", st.Summaries)
	}
	// First batch: primary failed, session rescued and fallback entered; second batch went
	// straight to the session model.
	if p, s := len(r.up.Requests()), len(sess.Requests()); p != 1 || s != 2 {
		t.Fatalf("primary %d session %d", p, s)
	}
	if got := testutil.ToFloat64(m.FallbackActive); got != 1 {
		t.Fatalf("fallback gauge %v", got)
	}
	if got := testutil.ToFloat64(m.SummarizerCalls.WithLabelValues("openai/gpt-5", "true")); got != 2 {
		t.Fatalf("fallback calls %v", got)
	}
}

// knownCounter is a store that counts LoadKnown calls answered without the state's bytes.
type knownCounter struct {
	store.Store
	known atomic.Int64
}

func (k *knownCounter) LoadKnown(ctx context.Context, session string, known uint64) (*store.Snapshot, error) {
	snap, err := k.Store.(store.KnownStateLoader).LoadKnown(ctx, session, known)
	if err == nil && snap.StateKnown {
		k.known.Add(1)
	}
	return snap, err
}

// TestFlushWithDecodedStateSkipsItsBytes: a job carrying the decoded state of the stored
// version loads without the state's bytes and commits what a job without it commits; one
// whose state is older than the stored version plans on the stored state.
func TestFlushWithDecodedStateSkipsItsBytes(t *testing.T) {
	ctx := context.Background()
	mem := store.NewMemory(0)
	defer mem.Close()
	st := &knownCounter{Store: mem}
	fixed := func() time.Time { return time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC) }
	o := &Orchestrator{Store: st, Planner: EnginePlanner{Policy: testPolicy(), Now: fixed}, Summarizer: summarize.Extractive{}, Owner: "t", Log: quiet}
	for _, s := range []string{"plain", "decoded"} {
		if res, err := o.Flush(ctx, &Job{Queued: Queued{Session: s, Format: wire.Anthropic, Body: transcript("k", 3)}}); err != nil || res.Outcome != OutcomeFlushed {
			t.Fatalf("%s first flush: %+v %v", s, res, err)
		}
	}
	decoded := func(session string) (*pruner.State, uint64) {
		snap, err := mem.Load(ctx, session)
		if err != nil {
			t.Fatal(err)
		}
		ps := &pruner.State{}
		if err := ps.UnmarshalBinary(snap.State); err != nil {
			t.Fatal(err)
		}
		return ps, snap.Version
	}
	body := transcript("k", 6)
	ps, v := decoded("decoded")
	if res, err := o.Flush(ctx, &Job{Queued: Queued{Session: "plain", Format: wire.Anthropic, Body: body}}); err != nil || res.Outcome != OutcomeFlushed {
		t.Fatalf("plain: %+v %v", res, err)
	}
	if st.known.Load() != 0 {
		t.Fatal("a job without a decoded state loaded without the state")
	}
	if res, err := o.Flush(ctx, &Job{Queued: Queued{Session: "decoded", Format: wire.Anthropic, Body: body}, State: ps, StateVersion: v}); err != nil || res.Outcome != OutcomeFlushed {
		t.Fatalf("decoded: %+v %v", res, err)
	}
	if st.known.Load() != 1 {
		t.Fatalf("%d loads without the state, want 1", st.known.Load())
	}
	a, _ := mem.Load(ctx, "plain")
	b, _ := mem.Load(ctx, "decoded")
	if !bytes.Equal(a.State, b.State) {
		t.Fatal("the job with the decoded state committed another state")
	}
	// A stale decoded state (version v, the store now holds v+1) is not used.
	if res, err := o.Flush(ctx, &Job{Queued: Queued{Session: "decoded", Format: wire.Anthropic, Body: transcript("k", 9)}, State: ps, StateVersion: v}); err != nil || res.Outcome != OutcomeFlushed {
		t.Fatalf("stale: %+v %v", res, err)
	}
	if res, err := o.Flush(ctx, &Job{Queued: Queued{Session: "plain", Format: wire.Anthropic, Body: transcript("k", 9)}}); err != nil || res.Outcome != OutcomeFlushed {
		t.Fatalf("plain 9: %+v %v", res, err)
	}
	a, _ = mem.Load(ctx, "plain")
	b, _ = mem.Load(ctx, "decoded")
	if !bytes.Equal(a.State, b.State) {
		t.Fatal("the job with a stale decoded state committed another state")
	}
}
