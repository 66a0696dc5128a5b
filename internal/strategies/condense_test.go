package strategies

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/replay"
)

// engineSession: two agent turns with large reads, each ending in a final reply, then a
// request after a long pause.
//
//	R0 [m0]          10:00:00
//	R1 [m0..m2]      10:00:10   t1 read → 12,000-char result
//	R2 [m0..m4]      10:00:20   m3 final reply "done" (flush trigger), m4 "next"
//	R3 [m0..m6]      10:00:30   t2 read → 12,000-char result
//	R4 [m0..m8]      10:20:00   m7 final reply (trigger), m8 "bye" — the prefix cache has expired
func engineSession() *replay.Requests {
	big := func(tag string) string {
		var b strings.Builder
		for i := 0; i < 400; i++ {
			fmt.Fprintf(&b, "%s line %03d: func handler%03d() error { return nil }\\n", tag, i, i)
		}
		return b.String()
	}
	msgs := []string{
		`{"role":"user","content":"Please fix the handlers in a.go and b.go."}`,
		`{"role":"assistant","content":[{"type":"text","text":"Reading a.go."},{"type":"tool_use","id":"toolu_1","name":"read","input":{"path":"a.go"}}]}`,
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"` + big("a") + `"}]}`,
		`{"role":"assistant","content":[{"type":"text","text":"done with a.go"}]}`,
		`{"role":"user","content":"next: b.go"}`,
		`{"role":"assistant","content":[{"type":"text","text":"Reading b.go."},{"type":"tool_use","id":"toolu_2","name":"read","input":{"path":"b.go"}}]}`,
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_2","content":"` + big("b") + `"}]}`,
		`{"role":"assistant","content":[{"type":"text","text":"done with b.go"}]}`,
		`{"role":"user","content":"bye"}`,
	}
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	at := []time.Duration{0, 10 * time.Second, 20 * time.Second, 30 * time.Second, 20 * time.Minute}
	r := &replay.Requests{File: "engine.jsonl"}
	for k := 0; k < 5; k++ {
		body := `{"model":"claude-sonnet-4-5","max_tokens":4096,"system":"You are a coding agent.","messages":[` + strings.Join(msgs[:2*k+1], ",") + `]}`
		r.Bodies = append(r.Bodies, []byte(body))
		r.Metas = append(r.Metas, replay.Meta{Time: t0.Add(at[k])})
	}
	return r
}

func diagAt(s replay.StrategyReport, kind string) []int {
	var out []int
	for _, d := range s.Diagnostics {
		if d.Kind == kind {
			out = append(out, d.Request)
		}
	}
	return out
}

func runEngine(t *testing.T, strats ...replay.Strategy) replay.SessionReport {
	t.Helper()
	rep, err := replay.Run(context.Background(), engineSession(), replay.Options{Strategies: append([]replay.Strategy{None{}}, strats...)})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.Strategies {
		if s.Invalid != 0 || s.Errors != 0 {
			t.Fatalf("%s: invalid %d errors %d %+v", s.Name, s.Invalid, s.Errors, s.Diagnostics)
		}
	}
	return rep
}

// TestReferenceFlushesAtFinalReplies: the reference strategy flushes at R2 and R4 (the
// requests that show a new final reply), so R2..R4 are smaller than the agent's own.
func TestReferenceFlushesAtFinalReplies(t *testing.T) {
	rep := runEngine(t, Reference())
	none, ref := rep.Strategies[0], rep.Strategies[1]
	if got := diagAt(ref, "flush"); fmt.Sprint(got) != "[2 4]" {
		t.Fatalf("flushes at %v, want [2 4]", got)
	}
	for k := 0; k < 5; k++ {
		n, r := none.Series[k].Context, ref.Series[k].Context
		if k < 2 && n != r || k >= 2 && r >= n-2000 {
			t.Errorf("request %d: none %d tokens, reference %d", k, n, r)
		}
	}
	if ref.PeakContext >= none.PeakContext {
		t.Fatalf("peak %d vs %d", ref.PeakContext, none.PeakContext)
	}
}

// TestCondenseCacheAware: with a horizon of 1 the flush due at R2 is not worth breaking the live
// cache (it saves ~3,000 tokens × 0.1 × 2 requests but re-writes ~4,000 cached tokens at
// 1.25 − 0.1), so it is deferred at R2 and R3 and R3 is billed exactly like none's; at R4 the
// cache has expired and the flush runs for free. With a long horizon it flushes at R2 at once.
func TestCondenseCacheAware(t *testing.T) {
	short, _ := NewCondense(CondenseOptions{Name: "short", CacheAware: true, Horizon: 1})
	long, _ := NewCondense(CondenseOptions{Name: "long", CacheAware: true, Horizon: 1000})
	rep := runEngine(t, short, long)
	none, s, l := rep.Strategies[0], rep.Strategies[1], rep.Strategies[2]
	if got := diagAt(s, "flush-deferred"); fmt.Sprint(got) != "[2 3]" {
		t.Fatalf("short: deferred at %v, want [2 3]; %+v", got, s.Diagnostics)
	}
	if got := diagAt(s, "flush"); fmt.Sprint(got) != "[4]" {
		t.Fatalf("short: flush at %v, want [4]", got)
	}
	for _, d := range s.Diagnostics {
		if d.Kind == "flush" && !strings.Contains(d.Detail, "expired") {
			t.Fatalf("flush at R4 should be the expired-cache case: %q", d.Detail)
		}
	}
	// Deferred: through R3 the bill is exactly none's.
	if s.Series[3].Cost != none.Series[3].Cost || s.CacheBusts != 0 {
		t.Fatalf("short through R3: %v vs none %v, busts %d", s.Series[3].Cost, none.Series[3].Cost, s.CacheBusts)
	}
	if s.Series[4].Context >= none.Series[4].Context {
		t.Fatalf("short did not prune at R4")
	}
	if got := diagAt(l, "flush"); len(got) == 0 || got[0] != 2 {
		t.Fatalf("long: flushes at %v, want the first at 2", got)
	}
	if l.Cost >= none.Cost {
		t.Fatalf("long horizon: cost %v not below none %v", l.Cost, none.Cost)
	}
}

func TestNewCondenseErrors(t *testing.T) {
	if _, err := NewCondense(CondenseOptions{Horizon: -1}); err == nil {
		t.Fatal("negative horizon accepted")
	}
	e, _ := NewCondense(CondenseOptions{})
	if e.Name() != "condense" || Reference().Name() != "reference" {
		t.Fatal("names")
	}
}

func TestParsePolicy(t *testing.T) {
	pp := `apiVersion: condense.dev/v1alpha1
kind: PruningPolicy
metadata: {name: p}
spec:
  batchingMode: agent-message
  minBatchChars: 0
  protectedTools: [todo]
  chainCompression: {rollingWindow: 5, enabled: false}
  purgeErrors: {cooldownTurns: 4}
  proxy: {replicas: 2}
`
	pol, err := ParsePolicy("pp.yaml", []byte(pp))
	if err != nil {
		t.Fatal(err)
	}
	def := pruner.DefaultPolicy()
	if pol.BatchingMode != pruner.BatchAgentMessage || pol.MinBatchChars != 0 || pol.ProtectedTools[0] != "todo" ||
		pol.Chain.RollingWindow != 5 || pol.Chain.Enabled || pol.PurgeErrors.CooldownTurns != 4 ||
		pol.PurgeErrors.MinArgChars != def.PurgeErrors.MinArgChars || pol.SpillThreshold != def.SpillThreshold || !pol.Dedup {
		t.Fatalf("%+v", pol)
	}
	pc, err := ParsePolicy("pc.yaml", []byte("apiVersion: condense.dev/config/v1\nkind: ProxyConfig\nengine:\n  spill: {threshold: 1000}\n"))
	if err != nil || pc.SpillThreshold != 1000 {
		t.Fatalf("proxyconfig: %v %+v", err, pc)
	}
	bare, err := ParsePolicy("bare.json", []byte(`{"dedup":false}`))
	if err != nil || bare.Dedup {
		t.Fatalf("bare: %v", err)
	}
	obs, err := ParsePolicy("obs.yaml", []byte("observations: {enabled: true, harness: swe-agent}\n"))
	if err != nil || !obs.Observations.Enabled || obs.Observations.Harness != "swe-agent" || def.Observations.Enabled {
		t.Fatalf("observations: %v %+v", err, obs.Observations)
	}
	for name, doc := range map[string]string{
		"harness":  "observations: {enabled: true, harness: openhands}\n",
		"pattern":  "observations: {enabled: true, patterns: [{match: \"(\"}]}\n",
		"kind":     "kind: Deployment\n",
		"mode":     "batchingMode: sometimes\n",
		"negative": "minBatchChars: -1\n",
		"type":     "minBatchChars: lots\n",
		"yaml":     "a: [\n",
		"nospec":   "kind: PruningPolicy\n",
	} {
		var pe *PolicyFileError
		if _, err := ParsePolicy(name, []byte(doc)); !errors.As(err, &pe) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
