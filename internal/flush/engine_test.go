package flush

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/condense-dev/condense/internal/config"
	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/summarize"
	"github.com/condense-dev/condense/internal/wire"
)

// flushedSession flushes a tag-turn transcript into a fresh memory store as session "s" and
// returns the committed snapshot and its decoded state.
func flushedSession(t *testing.T, tag string, turns int) (*store.Snapshot, *pruner.State) {
	t.Helper()
	ctx := context.Background()
	st := store.NewMemory(0)
	t.Cleanup(func() { st.Close() })
	o := &Orchestrator{Store: st, Planner: EnginePlanner{Policy: testPolicy()}, Summarizer: summarize.Extractive{}, Owner: "t", Log: quiet}
	if res, err := o.Flush(ctx, &Job{Queued: Queued{Session: "s", Format: wire.Anthropic, Body: transcript(tag, turns)}}); err != nil || res.Outcome != OutcomeFlushed {
		t.Fatalf("first flush: %+v %v", res, err)
	}
	snap, err := st.Load(ctx, "s")
	if err != nil || snap.Version == 0 {
		t.Fatalf("load: %+v %v", snap, err)
	}
	state := pruner.NewState()
	if err := state.UnmarshalBinary(snap.State); err != nil {
		t.Fatal(err)
	}
	return snap, state
}

// TestPlanUsesHandedState checks that the planner plans over the decoded state a job carries
// (Job.State) exactly when the loaded snapshot is the version it was decoded from, and
// decodes the snapshot otherwise.
func TestPlanUsesHandedState(t *testing.T) {
	ctx := context.Background()
	snap, handed := flushedSession(t, "a", 3)
	body := transcript("a", 5)
	plan := func(version uint64) *enginePlan {
		t.Helper()
		p, err := EnginePlanner{Policy: testPolicy()}.Plan(ctx, &Job{Queued: Queued{Session: "s", Format: wire.Anthropic, Body: body}, State: handed, StateVersion: version}, snap)
		if err != nil {
			t.Fatal(err)
		}
		return p.(*enginePlan)
	}
	if p := plan(snap.Version); p.cur != handed {
		t.Fatal("the state handed for the loaded version was not used")
	}
	for _, v := range []uint64{0, snap.Version + 1} {
		p := plan(v)
		if p.cur == handed {
			t.Fatalf("StateVersion %d: the handed state was used for snapshot version %d", v, snap.Version)
		}
		if len(p.cur.Records) != len(handed.Records) || len(p.cur.Records) == 0 {
			t.Fatalf("StateVersion %d: decoded state has %d records, want %d", v, len(p.cur.Records), len(handed.Records))
		}
	}
}

// TestNormalizeKeysRequestOnlyJobs checks that a job carrying only its parsed request (an
// in-process job from the proxy) is keyed by (a fast hash of) its content, and that a job with
// neither a body nor a request is rejected.
func TestNormalizeKeysRequestOnlyJobs(t *testing.T) {
	body := transcript("k", 2)
	withBody := &Job{Queued: Queued{Session: "s", Format: wire.Anthropic, Body: body}}
	if err := withBody.Normalize(); err != nil {
		t.Fatal(err)
	}
	req := parseTranscript(t, body)
	onlyReq := &Job{Queued: Queued{Session: "s", Format: wire.Anthropic}, Request: req}
	if err := onlyReq.Normalize(); err != nil {
		t.Fatal(err)
	}
	again := &Job{Queued: Queued{Session: "s", Format: wire.Anthropic}, Request: parseTranscript(t, body)}
	other := &Job{Queued: Queued{Session: "s", Format: wire.Anthropic}, Request: parseTranscript(t, transcript("k", 3))}
	if err := again.Normalize(); err != nil {
		t.Fatal(err)
	}
	if err := other.Normalize(); err != nil {
		t.Fatal(err)
	}
	if onlyReq.Hash != again.Hash || onlyReq.Hash == other.Hash || onlyReq.Hash == withBody.Hash || len(onlyReq.Body) != 0 {
		t.Fatalf("request-only hashes %s, %s (same bytes), %s (other bytes); body hash %s", onlyReq.Hash, again.Hash, other.Hash, withBody.Hash)
	}
	// A view of the same client bytes with a message appended (the proxy's agent-message
	// flush adds the response) is another job.
	longer := &Job{Queued: Queued{Session: "s", Format: wire.Anthropic}, Request: req.WithMessages(append(append([]*wire.Message(nil), req.Messages...), req.Messages[len(req.Messages)-2:]...))}
	if err := longer.Normalize(); err != nil {
		t.Fatal(err)
	}
	if longer.Hash == onlyReq.Hash {
		t.Fatal("a view with more messages than the client's bytes got the same key")
	}
	if err := (&Job{Queued: Queued{Session: "s", Format: wire.Anthropic}}).Normalize(); err == nil {
		t.Fatal("a job with no body and no request was accepted")
	}
}

func parseTranscript(t *testing.T, body []byte) *wire.Request {
	t.Helper()
	r, err := wire.Parse(wire.Anthropic, body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestWeighUsesHandedRender checks that the weighing takes the job's Rendered request as the
// current render exactly when the plan is over the state and request it was rendered from,
// and that the decision equals the one from a fresh render.
func TestWeighUsesHandedRender(t *testing.T) {
	ctx := context.Background()
	snap, state := flushedSession(t, "w", 3)
	req := parseTranscript(t, transcript("w", 6))
	rendered := pruner.Render(req, state, testPolicy()).Request
	if rendered == req {
		t.Fatal("the state renders nothing: the test needs a changed render")
	}
	job := &Job{Queued: Queued{Session: "s", Format: wire.Anthropic}, Request: req, State: state, StateVersion: snap.Version, Rendered: rendered}
	p, err := EnginePlanner{Policy: testPolicy()}.Plan(ctx, job, snap)
	if err != nil {
		t.Fatal(err)
	}
	ep := p.(*enginePlan)
	if ep.current(job) != rendered {
		t.Fatal("the handed render was not used")
	}
	fresh := *job
	fresh.Rendered = nil
	if ep.current(&fresh) == rendered {
		t.Fatal("a fresh render returned the handed one")
	}
	other := *job
	other.State = pruner.NewState()
	if ep.current(&other) == rendered {
		t.Fatal("the handed render was used for a plan over another state")
	}
	if changed, err := p.Apply(map[string]string{"batch-1": "- summary", "batch-2": "- summary"}); err != nil || !changed {
		t.Fatalf("commit: changed %v err %v", changed, err)
	}
	at := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	job.Cache = &CacheCheck{At: at.Add(time.Second), LastRequest: at, Requests: 3}
	fresh.Cache = job.Cache
	d1, err1 := ep.Weigh(job, defaultPrices(), 0)
	d2, err2 := ep.Weigh(&fresh, defaultPrices(), 0)
	if err1 != nil || err2 != nil || d1 != d2 {
		t.Fatalf("decisions differ: %+v (%v) vs %+v (%v)", d1, err1, d2, err2)
	}
}

// responsesTranscript is transcript as a Responses API request: function calls with large
// outputs (a reasoning item before each call), a final answer and a next prompt.
func responsesTranscript(tag string, n int) []byte {
	items := []any{map[string]any{"type": "message", "role": "user", "content": "task " + tag}}
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("call_%s_%d", tag, i)
		items = append(items,
			map[string]any{"type": "reasoning", "summary": []any{}, "encrypted_content": "enc-" + id},
			map[string]any{"type": "function_call", "call_id": id, "name": "exec_command", "arguments": fmt.Sprintf(`{"cmd":"step %d"}`, i)},
			map[string]any{"type": "function_call_output", "call_id": id,
				"output": fmt.Sprintf("Chunk ID: 1\nWall time: 1 seconds\nProcess exited with code 0\nOutput:\noutput %s %d\n", tag, i) + strings.Repeat("line of output\n", 200)})
	}
	items = append(items, map[string]any{"type": "message", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": "done " + tag}}},
		map[string]any{"type": "message", "role": "user", "content": "next"})
	b, _ := json.Marshal(map[string]any{"model": "gpt-5.2-codex", "store": false, "input": items})
	return b
}

// TestFlushResponsesJob: a flush job of format "responses" is accepted and planned over the
// Responses request; the committed state renders the request with its outputs stub-replaced,
// valid, the reasoning items unchanged.
func TestFlushResponsesJob(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemory(0)
	t.Cleanup(func() { st.Close() })
	o := &Orchestrator{Store: st, Planner: EnginePlanner{Policy: testPolicy()}, Summarizer: summarize.Extractive{}, Owner: "t", Log: quiet}
	body := responsesTranscript("r", 3)
	res, err := o.Flush(ctx, &Job{Queued: Queued{Session: "s", Format: wire.Responses, Body: body}})
	if err != nil || res.Outcome != OutcomeFlushed {
		t.Fatalf("flush: %+v %v", res, err)
	}
	snap, _ := st.Load(ctx, "s")
	state := pruner.NewState()
	if err := state.UnmarshalBinary(snap.State); err != nil {
		t.Fatal(err)
	}
	req, err := wire.Parse(wire.Responses, body)
	if err != nil {
		t.Fatal(err)
	}
	out := pruner.RenderRequest(req, state, testPolicy()).Request
	if err := wire.Validate(out); err != nil {
		t.Fatalf("rendered request invalid: %v", err)
	}
	rendered := string(out.Bytes())
	if strings.Contains(rendered, strings.Repeat("line of output\n", 20)) || !strings.Contains(rendered, `"encrypted_content":"enc-call_r_2"`) {
		t.Fatalf("not pruned, or the reasoning changed:\n%s", rendered)
	}
	if err := (&Job{Queued: Queued{Session: "s", Format: wire.Format(9), Body: body}}).Normalize(); err == nil {
		t.Fatal("a job of an unknown format was accepted")
	}
}

// TestPolicyFromConfigObservations: engine.observations becomes the engine's observation
// policy, and the configuration accepts exactly the harnesses the engine has patterns for.
func TestPolicyFromConfigObservations(t *testing.T) {
	e := config.Default().Engine
	if p := PolicyFromConfig(e).Observations; p.Enabled || p.Harness != "" || len(p.Patterns) != 0 {
		t.Fatalf("default: %+v", p)
	}
	e.Observations = config.Observations{Enabled: true, Harness: "swe-agent",
		Patterns: []config.ObservationPattern{{Match: `\Aok`, Stub: "ok ${stub}", Action: "(.*)", Tool: "sh", Failed: true}}}
	want := pruner.ObservationPolicy{Enabled: true, Harness: "swe-agent",
		Patterns: []pruner.ObservationPattern{{Match: `\Aok`, Stub: "ok ${stub}", Action: "(.*)", Tool: "sh", Failed: true}}}
	if got := PolicyFromConfig(e).Observations; !reflect.DeepEqual(got, want) {
		t.Fatalf("%+v, want %+v", got, want)
	}
	if !slices.Equal(config.ObservationHarnesses, pruner.Harnesses) {
		t.Fatalf("config accepts harnesses %v, the engine has %v", config.ObservationHarnesses, pruner.Harnesses)
	}
}
