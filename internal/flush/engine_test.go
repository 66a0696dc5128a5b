package flush

import (
	"context"
	"testing"

	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/summarize"
	"github.com/condense-dev/condense/internal/wire"
)

// TestPlanUsesHandedState checks that the planner plans over the decoded state a job carries
// (Job.State) exactly when the loaded snapshot is the version it was decoded from, and
// decodes the snapshot otherwise.
func TestPlanUsesHandedState(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemory(0)
	defer st.Close()
	o := &Orchestrator{Store: st, Planner: EnginePlanner{Policy: testPolicy()}, Summarizer: summarize.Extractive{}, Owner: "t", Log: quiet}
	if res, err := o.Flush(ctx, &Job{Session: "s", Format: "anthropic", Body: transcript("a", 3)}); err != nil || res.Outcome != OutcomeFlushed {
		t.Fatalf("first flush: %+v %v", res, err)
	}
	snap, err := st.Load(ctx, "s")
	if err != nil || snap.Version == 0 {
		t.Fatalf("load: %+v %v", snap, err)
	}
	handed := pruner.NewState()
	if err := handed.UnmarshalBinary(snap.State); err != nil {
		t.Fatal(err)
	}
	body := transcript("a", 5)
	plan := func(version uint64) *enginePlan {
		t.Helper()
		p, err := EnginePlanner{Policy: testPolicy()}.Plan(ctx, &Job{Session: "s", Format: "anthropic", Body: body, State: handed, StateVersion: version}, snap)
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
// in-process job from the proxy) is keyed by the bytes the request was parsed from, and that
// a job with neither a body nor a request is rejected.
func TestNormalizeKeysRequestOnlyJobs(t *testing.T) {
	body := transcript("k", 2)
	withBody := &Job{Session: "s", Format: "anthropic", Body: body}
	if err := withBody.Normalize(); err != nil {
		t.Fatal(err)
	}
	req := parseTranscript(t, body)
	onlyReq := &Job{Session: "s", Format: "anthropic", Request: req}
	if err := onlyReq.Normalize(); err != nil {
		t.Fatal(err)
	}
	if onlyReq.Hash != withBody.Hash || len(onlyReq.Body) != 0 {
		t.Fatalf("hash %s (body %d bytes), want %s with no body", onlyReq.Hash, len(onlyReq.Body), withBody.Hash)
	}
	if err := (&Job{Session: "s", Format: "anthropic"}).Normalize(); err == nil {
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
