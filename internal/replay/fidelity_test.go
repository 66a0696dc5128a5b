package replay_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/condense-dev/condense/internal/cost"
	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/replay"
	"github.com/condense-dev/condense/internal/strategies"
	"github.com/condense-dev/condense/internal/wire"
)

// used is synthetic() with a salient path in the tool result that the agent's reply writes:
//
//	m0 user "U"×2000                                      2000
//	m1 assistant tool_use t1 ls {}                           4
//	m2 user tool_result t1 "see internal/proxy/flush.go " + "R"×2972   3000
//	m3 assistant text "Editing internal/proxy/flush.go"      31
//	m4 user "again"                                          5
//
// The reply m3 (the response to R1) uses internal/proxy/flush.go, which R1 shows only in t1's
// result: one use, at R1, from call t1.
func used() *replay.Requests {
	result := "see internal/proxy/flush.go " + strings.Repeat("R", 2972)
	msgs := []string{
		`{"role":"user","content":"` + strings.Repeat("U", 2000) + `"}`,
		`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"ls","input":{}}]}`,
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"` + result + `"}]}`,
		`{"role":"assistant","content":[{"type":"text","text":"Editing internal/proxy/flush.go"}]}`,
		`{"role":"user","content":"again"}`,
	}
	return threeRequests("used.jsonl", msgs)
}

// threeRequests is the log of the requests R0 = m0, R1 = m0..m2, R2 = m0..m4 of five messages,
// a minute apart (claude-sonnet-4-5).
func threeRequests(file string, msgs []string) *replay.Requests {
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	r := &replay.Requests{File: file}
	for i, n := range []int{1, 3, 5} {
		r.Bodies = append(r.Bodies, []byte(`{"model":"claude-sonnet-4-5","messages":[`+strings.Join(msgs[:n], ",")+`]}`))
		r.Metas = append(r.Metas, replay.Meta{Time: t0.Add(time.Duration(i) * time.Minute)})
	}
	return r
}

// stubber replaces t1's result by a stub and says the original is recoverable, as the
// condense engine does.
type stubber struct{}

func (stubber) Name() string { return "stubber" }
func (stubber) New(context.Context, replay.Transcript) (replay.Runner, error) {
	return stubRunner{}, nil
}

type stubRunner struct{}

func (stubRunner) Close() error { return nil }
func (stubRunner) Rewrite(_ context.Context, r *replay.Request) (replay.Result, error) {
	i := bytes.Index(r.Body, []byte(`"see internal`))
	if i < 0 {
		return replay.Result{Body: r.Body}, nil
	}
	j := bytes.IndexByte(r.Body[i+1:], '"') + i + 1
	body := append(append(append([]byte{}, r.Body[:i]...), `"[stub t1]"`...), r.Body[j+1:]...)
	return replay.Result{Body: body, Recoverable: func(id string) bool { return id == "t1" }}, nil
}

// TestRecoveryCharges: a strategy that keeps the use is not charged; one that masks it with
// no way back is charged a re-run of t1 (its call and result re-sent); one that stubs it
// recoverably is charged a context_tree_query round. Each extra request reads the cached
// prefix of R1 and writes the calls and results after it (claude-sonnet-4-5: $3/MTok, read
// $0.30, write $3.75, output $15; lenEst counts bytes, no framing):
//
//	mask R1 = 2000 + 4 + 29 = 2033 tokens, cached by R1 itself;
//	  re-run: calls 2 ("ls") + 2 ("{}") = 4, results 3000
//	  = (2033×0.30 + 3004×3.75 + 4×15)/1e6 = 0.0119349
//	stubber R1 = 2000 + 4 + 9 ("[stub t1]") = 2013;
//	  query: calls 18 ("context_tree_query") + 14 (`{"ids":["t1"]}`) = 32,
//	  results 3000 + 15 ("## toolRef: t1\n") = 3015
//	  = (2013×0.30 + 3047×3.75 + 32×15)/1e6 = 0.01251015
func TestRecoveryCharges(t *testing.T) {
	rep, err := replay.Run(context.Background(), used(), replay.Options{
		Strategies: []replay.Strategy{strategies.None{}, strategies.ObservationMask{Window: 0}, stubber{}},
		Estimator:  lenEst{},
	})
	if err != nil {
		t.Fatal(err)
	}
	none, mask, stub := rep.Strategies[0], rep.Strategies[1], rep.Strategies[2]
	if none.Fidelity.Uses != 1 || none.Fidelity.Kept != 1 || none.RecoveryRounds != 0 || none.RecoveryCost != 0 || none.Cost != none.CostUncharged {
		t.Fatalf("none: %+v", none)
	}
	if mask.Fidelity.Lost != 1 || mask.RecoveryRounds != 1 || mask.Reruns != 1 || mask.RecoveryQueries != 0 {
		t.Fatalf("mask: fidelity %+v, rounds %d, reruns %d", mask.Fidelity, mask.RecoveryRounds, mask.Reruns)
	}
	if math.Abs(mask.RecoveryCost-0.0119349) > 1e-12 || math.Abs(mask.Cost-(mask.CostUncharged+0.0119349)) > 1e-12 {
		t.Fatalf("mask recovery %.10f, cost %.10f uncharged %.10f", mask.RecoveryCost, mask.Cost, mask.CostUncharged)
	}
	if mask.Recovery.CacheRead != 2033 || mask.Recovery.CacheWrite5m != 3004 || mask.Recovery.Output != 4 {
		t.Fatalf("mask recovery usage %+v", mask.Recovery)
	}
	if stub.Fidelity.Recoverable != 1 || stub.RecoveryQueries != 1 || stub.Reruns != 0 || math.Abs(stub.RecoveryCost-0.01251015) > 1e-12 {
		t.Fatalf("stubber: fidelity %+v, queries %d, recovery %.10f", stub.Fidelity, stub.RecoveryQueries, stub.RecoveryCost)
	}
	// The charge is in the series too (the last point is the charged total).
	if last := mask.Series[len(mask.Series)-1].Cost; math.Abs(last-mask.Cost) > 1e-12 {
		t.Fatalf("series ends at %v, cost %v", last, mask.Cost)
	}
	// Savings are charged; the uncharged ones are kept beside them.
	if mask.Savings >= mask.SavingsUncharged {
		t.Fatalf("charged savings %v not below uncharged %v", mask.Savings, mask.SavingsUncharged)
	}
	tot := replay.NewReport([]replay.SessionReport{rep, rep}).Totals
	if tot[1].Fidelity.Lost != 2 || tot[1].RecoveryRounds != 2 || math.Abs(tot[1].RecoveryCost-2*0.0119349) > 1e-12 {
		t.Fatalf("totals: %+v", tot[1])
	}
}

// textSession is a request log of a text-protocol agent (replay.TextObservations).
type textSession struct {
	*replay.Requests
	harness string
}

func (t textSession) ObservationHarness() string { return t.harness }

// usedText is used() for a text-protocol agent (mini-swe-agent): the action is assistant text,
// its output a user message the engine recognises as an observation:
//
//	m0 user "U"×2000                                              2000
//	m1 assistant "THOUGHT: list\n\n```bash\nls\n```"                 29
//	m2 user "<returncode>0</returncode>\n<output>\nsee internal/proxy/flush.go " + "R"×2926 + "\n</output>"   3000
//	m3 assistant text "Editing internal/proxy/flush.go"            31
//	m4 user "again"                                                 5
//
// The reply m3 uses internal/proxy/flush.go, which R1 shows only in the observation m2.
func usedText() (*replay.Requests, string) {
	act := "THOUGHT: list\n\n```bash\nls\n```"
	obs := "<returncode>0</returncode>\n<output>\nsee internal/proxy/flush.go " + strings.Repeat("R", 2926) + "\n</output>"
	msgs := []string{
		`{"role":"user","content":"` + strings.Repeat("U", 2000) + `"}`,
		`{"role":"assistant","content":` + strconv.Quote(act) + `}`,
		`{"role":"user","content":` + strconv.Quote(obs) + `}`,
		`{"role":"assistant","content":"Editing internal/proxy/flush.go"}`,
		`{"role":"user","content":"again"}`,
	}
	r := threeRequests("used-text.json", msgs)
	r1, err := wire.Parse(wire.Anthropic, r.Bodies[1])
	if err != nil {
		panic(err)
	}
	o, _ := pruner.ObservationOf(r1.Messages[1], r1.Messages[2], pruner.ObservationPolicy{Enabled: true, Harness: pruner.HarnessMiniSWEAgent})
	return r, o.Result.ID
}

// textStubber stubs the observation's output and says the original is recoverable under the
// observation's call id, as the condense engine does.
type textStubber struct{ id string }

func (textStubber) Name() string { return "stubber" }
func (s textStubber) New(context.Context, replay.Transcript) (replay.Runner, error) {
	return textStubRunner(s), nil
}

type textStubRunner struct{ id string }

func (textStubRunner) Close() error { return nil }
func (s textStubRunner) Rewrite(_ context.Context, r *replay.Request) (replay.Result, error) {
	i := bytes.Index(r.Body, []byte(`see internal`))
	if i < 0 {
		return replay.Result{Body: r.Body}, nil
	}
	j := bytes.Index(r.Body[i:], []byte(`\n</output>`)) + i
	body := append(append(append([]byte{}, r.Body[:i]...), `[stub t1]`...), r.Body[j:]...)
	return replay.Result{Body: body, Recoverable: func(id string) bool { return id == s.id }}, nil
}

// TestRecoveryChargesText: TestRecoveryCharges for a text-protocol session. The observation
// is a tool result of the engine's synthetic call (bash, {"command":"ls"}); without the
// harness the session has no use at all.
//
//	mask R1 = 2000 + 29 + 29 = 2058 tokens, cached by R1 itself;
//	  re-run: calls 4 ("bash") + 16 (`{"command":"ls"}`) = 20, results 3000
//	  = (2058×0.30 + 3020×3.75 + 20×15)/1e6 = 0.0122424
//	stubber R1 = 2000 + 29 + 55 (the observation around "[stub t1]") = 2084;
//	  query: calls 32, results 3000 + 15 = 3015
//	  = (2084×0.30 + 3047×3.75 + 32×15)/1e6 = 0.01253145
func TestRecoveryChargesText(t *testing.T) {
	reqs, id := usedText()
	if !strings.HasPrefix(id, "obs_") {
		t.Fatalf("observation id %q", id)
	}
	opts := replay.Options{
		Strategies: []replay.Strategy{strategies.None{}, strategies.ObservationMask{Window: 0}, textStubber{id}},
		Estimator:  lenEst{},
	}
	rep, err := replay.Run(context.Background(), textSession{reqs, "mini-swe-agent"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	none, mask, stub := rep.Strategies[0], rep.Strategies[1], rep.Strategies[2]
	if none.Fidelity.Uses != 1 || none.Fidelity.Kept != 1 || none.RecoveryRounds != 0 || none.Cost != none.CostUncharged {
		t.Fatalf("none: %+v", none)
	}
	if mask.Fidelity.Lost != 1 || mask.RecoveryRounds != 1 || mask.Reruns != 1 || mask.RecoveryQueries != 0 {
		t.Fatalf("mask: fidelity %+v, rounds %d, reruns %d", mask.Fidelity, mask.RecoveryRounds, mask.Reruns)
	}
	if mask.Recovery.CacheRead != 2058 || mask.Recovery.CacheWrite5m != 3020 || mask.Recovery.Output != 20 ||
		math.Abs(mask.RecoveryCost-0.0122424) > 1e-12 {
		t.Fatalf("mask recovery usage %+v, cost %.10f", mask.Recovery, mask.RecoveryCost)
	}
	if stub.Fidelity.Recoverable != 1 || stub.RecoveryQueries != 1 || stub.Reruns != 0 || math.Abs(stub.RecoveryCost-0.01253145) > 1e-12 {
		t.Fatalf("stubber: fidelity %+v, queries %d, recovery %+v %.10f", stub.Fidelity, stub.RecoveryQueries, stub.Recovery, stub.RecoveryCost)
	}
	rep, err = replay.Run(context.Background(), reqs, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.Strategies {
		if s.Fidelity.Uses != 0 || s.RecoveryRounds != 0 {
			t.Fatalf("%s without the harness: fidelity %+v", s.Name, s.Fidelity)
		}
	}
}

// TestDistributions: per-session savings are summarized by median and linearly interpolated
// quartiles; sessions that failed or cost the baseline nothing are left out.
func TestDistributions(t *testing.T) {
	sess := func(none, other float64) replay.SessionReport {
		return replay.SessionReport{File: "s", Strategies: []replay.StrategyReport{
			{Name: "none", Cost: none}, {Name: "x", Cost: other, Savings: (none - other) / none}}}
	}
	reps := []replay.SessionReport{sess(1, 0.9), sess(1, 0.5), sess(2, 1), sess(1, 1.2), sess(4, 1),
		{File: "bad", Error: "boom"}, {File: "empty", Strategies: []replay.StrategyReport{{Name: "none"}, {Name: "x"}}}}
	d := replay.Distributions(reps)
	x := d[1]
	// savings 0.1, 0.5, 0.5, -0.2, 0.75 → sorted -0.2 0.1 0.5 0.5 0.75
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-12 }
	if x.Sessions != 5 || !near(x.Median, 0.5) || !near(x.P25, 0.1) || !near(x.P75, 0.5) || !near(x.Min, -0.2) || !near(x.Max, 0.75) || x.Cheaper != 4 {
		t.Fatalf("%+v", x)
	}
	if d[0].Median != 0 || d[0].Cheaper != 0 {
		t.Fatalf("baseline %+v", d[0])
	}
}

// TestTableHygiene: counts agree in number, money has one precision, no line ends in
// spaces, every diagnostic kind shown is explained, models priced by family are warned
// about, and a report without a replayed session is an error rather than an empty table.
func TestTableHygiene(t *testing.T) {
	rep, err := replay.Run(context.Background(), used(), replay.Options{
		Strategies: []replay.Strategy{strategies.None{}, strategies.ObservationMask{Window: 0}, brokenStrategy{}},
		Estimator:  lenEst{},
	})
	if err != nil {
		t.Fatal(err)
	}
	rep.Models, rep.UnknownModels, rep.PricedAs = []string{"claude-haiku-9"}, []string{"claude-haiku-9"}, map[string]string{"claude-haiku-9": "claude-haiku-4-5"}
	r := replay.NewReport([]replay.SessionReport{rep})
	var tb, md bytes.Buffer
	if err := replay.WriteTable(&tb, r, true); err != nil {
		t.Fatal(err)
	}
	if err := replay.WriteMarkdown(&md, r, "x"); err != nil {
		t.Fatal(err)
	}
	out := tb.String()
	for _, want := range []string{"TOTAL: 1 session, 3 requests", "used.jsonl (requests, anthropic, 3 requests,",
		"strategy-error: the strategy failed on a request", "invalid-request: a rewritten request a provider would reject",
		"warning: model claude-haiku-9 is not in the price table: billed at claude-haiku-4-5's prices",
		"What the agent used from earlier tool output", "Cost change per session vs none (1 session)"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	for _, l := range strings.Split(out+md.String(), "\n") {
		if strings.HasSuffix(l, " ") || strings.HasSuffix(l, "\t") {
			t.Errorf("trailing space: %q", l)
		}
	}
	// Every dollar amount has two decimals.
	for _, f := range strings.Fields(out) {
		if i := strings.IndexByte(f, '$'); i >= 0 {
			amount := strings.TrimRight(f[i+1:], ",;)")
			if dot := strings.IndexByte(amount, '.'); dot < 0 || len(amount)-dot-1 != 2 {
				t.Errorf("amount %q does not have two decimals", f)
			}
		}
	}
	if !strings.Contains(md.String(), "**Warning**: model claude-haiku-9") || !strings.Contains(md.String(), "- `strategy-error`: ") {
		t.Errorf("markdown lacks the warning or the legend:\n%s", md.String())
	}
	failed := replay.NewReport([]replay.SessionReport{{File: "a", Error: "x"}, {File: "b", Error: "y"}})
	var empty bytes.Buffer
	if err := replay.WriteTable(&empty, failed, false); !errors.Is(err, replay.ErrNothingReplayed) || empty.Len() != 0 {
		t.Fatalf("all failed: %v, %q", err, empty.String())
	}
	if err := replay.WriteMarkdown(&empty, failed, "x"); !errors.Is(err, replay.ErrNothingReplayed) {
		t.Fatalf("markdown, all failed: %v", err)
	}
}

// TestPricedByFamilyReported: a session whose model the table lacks is billed at its
// family's entry and the report warns about it.
func TestPricedByFamilyReported(t *testing.T) {
	tr := used()
	for i := range tr.Bodies {
		tr.Bodies[i] = bytes.Replace(tr.Bodies[i], []byte("claude-sonnet-4-5"), []byte("claude-haiku-7"), 1)
	}
	rep, err := replay.Run(context.Background(), tr, replay.Options{Strategies: []replay.Strategy{strategies.None{}}, Estimator: lenEst{}})
	if err != nil {
		t.Fatal(err)
	}
	r := replay.NewReport([]replay.SessionReport{rep})
	if rep.PricedAs["claude-haiku-7"] != "claude-haiku-4-5" || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "claude-haiku-7") {
		t.Fatalf("priced as %v, warnings %q", rep.PricedAs, r.Warnings)
	}
	pr, _ := cost.DefaultPrices().Resolve("claude-haiku-4-5")
	// R0's 2000 tokens are below haiku's 4096-token cache minimum: input at haiku's $1, not
	// the fallback sonnet's $3.
	if first := rep.Strategies[0].Series[0].Cost; math.Abs(first-2000*pr.Input/1e6) > 1e-12 || pr.Input != 1 {
		t.Fatalf("first request billed %v", first)
	}
}
