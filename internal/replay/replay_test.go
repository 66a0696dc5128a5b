package replay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/condense-dev/condense/internal/replay"
	"github.com/condense-dev/condense/internal/strategies"
	"github.com/condense-dev/condense/internal/wire"
)

type lenEst struct{}

func (lenEst) Text(s string) int           { return len(s) }
func (lenEst) Image(string, string) int    { return 0 }
func (lenEst) Document(string, string) int { return 0 }
func (lenEst) Overhead(string) int         { return 0 }

// synthetic is a three-request Anthropic session with times (claude-sonnet-4-5):
//
//	m0 user "U"×2000                  2000
//	m1 assistant tool_use t1 ls {}       4
//	m2 user tool_result t1 "R"×3000   3000
//	m3 assistant text "done"             4
//	m4 user "again"                      5
//
// R0 = m0 at 10:00:00, R1 = m0..m2 at 10:01:00, R2 = m0..m4 at 10:10:00 (cache expired).
func synthetic() *replay.Requests {
	msgs := []string{
		`{"role":"user","content":"` + strings.Repeat("U", 2000) + `"}`,
		`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"ls","input":{}}]}`,
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"` + strings.Repeat("R", 3000) + `"}]}`,
		`{"role":"assistant","content":[{"type":"text","text":"done"}]}`,
		`{"role":"user","content":"again"}`,
	}
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	r := &replay.Requests{File: "syn.jsonl"}
	for i, n := range []int{1, 3, 5} {
		r.Bodies = append(r.Bodies, []byte(`{"model":"claude-sonnet-4-5","messages":[`+strings.Join(msgs[:n], ",")+`]}`))
		r.Metas = append(r.Metas, replay.Meta{Time: t0.Add([]time.Duration{0, time.Minute, 10 * time.Minute}[i]), OutputTokens: 100})
	}
	return r
}

// TestRunBillsEveryStrategy checks the none baseline by hand and the savings arithmetic:
//
//	none: R0 write 2000; R1 read 2000 write 3004; R2 (9 min later, expired) write 5013
//	      cost = (2000×3.75 + 2000×0.30 + 3004×3.75 + 5013×3.75)/1e6
//	           = (7500 + 600 + 11265 + 18798.75)/1e6 = 0.03816375
//	observation-mask window 0: R1 masks t1 → 2000+4+29 = 2033: read 2000 write 33;
//	      R2 → 2000+4+29+4+5 = 2042, expired: write 2042
//	      cost = (7500 + 600 + 33×3.75 + 2042×3.75)/1e6 = (8100 + 123.75 + 7657.5)/1e6 = 0.01588125
func TestRunBillsEveryStrategy(t *testing.T) {
	var progress atomic.Int32
	rep, err := replay.Run(context.Background(), synthetic(), replay.Options{
		Strategies: []replay.Strategy{strategies.None{}, strategies.ObservationMask{Window: 0}},
		Estimator:  lenEst{},
		Progress:   func() { progress.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := progress.Load(); n != 6 {
		t.Fatalf("progress calls = %d", n)
	}
	none, mask := rep.Strategies[0], rep.Strategies[1]
	if math.Abs(none.Cost-0.03816375) > 1e-12 || math.Abs(mask.Cost-0.01588125) > 1e-12 {
		t.Fatalf("costs none %.10f mask %.10f", none.Cost, mask.Cost)
	}
	if none.Expired != 1 || mask.Expired != 1 || none.CacheBusts != 0 || mask.CacheBusts != 0 {
		t.Fatalf("expiry/bust counts: %+v %+v", none, mask)
	}
	if want := (0.03816375 - 0.01588125) / 0.03816375; math.Abs(mask.Savings-want) > 1e-12 || none.Savings != 0 {
		t.Fatalf("savings %v", mask.Savings)
	}
	// Output: 3 × 100 tokens at $15/MTok, reported once per session.
	if rep.OutputTokens != 300 || math.Abs(rep.OutputCost-0.0045) > 1e-12 {
		t.Fatalf("output %d %v", rep.OutputTokens, rep.OutputCost)
	}
	if len(none.Series) != 3 || none.Series[2].Context != 5013 || math.Abs(none.Series[2].Cost-none.Cost) > 1e-12 {
		t.Fatalf("series %+v", none.Series)
	}
	all := replay.NewReport([]replay.SessionReport{rep, rep})
	if all.Baseline != "none" || math.Abs(all.Totals[1].Cost-2*0.01588125) > 1e-12 || all.Totals[0].Requests != 6 {
		t.Fatalf("totals %+v", all.Totals)
	}
}

// brokenStrategy returns bodies a provider would reject, and errors on request 1.
type brokenStrategy struct{}

func (brokenStrategy) Name() string { return "broken" }
func (brokenStrategy) New(context.Context, replay.Transcript) (replay.Runner, error) {
	return brokenRunner{}, nil
}

type brokenRunner struct{}

func (brokenRunner) Close() error { return nil }
func (brokenRunner) Rewrite(_ context.Context, r *replay.Request) (replay.Result, error) {
	if r.Index == 1 {
		return replay.Result{}, errors.New("boom")
	}
	// Drop every tool_result: the tool_use is left dangling.
	return replay.Result{Body: bytes.Replace(r.Body, []byte(`"type":"tool_result","tool_use_id":"t1"`), []byte(`"type":"tool_result","tool_use_id":"zz"`), 1)}, nil
}

func TestRunCountsInvalidAndErrors(t *testing.T) {
	rep, err := replay.Run(context.Background(), synthetic(), replay.Options{Strategies: []replay.Strategy{brokenStrategy{}}})
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Strategies[0]
	// R1 errors (the original is billed), R2 carries an orphan result.
	if s.Errors != 1 || s.Invalid != 1 || s.DiagnosticCounts["strategy-error"] != 1 || s.DiagnosticCounts["invalid-request"] != 1 {
		t.Fatalf("%+v", s)
	}
	if _, err := replay.Run(context.Background(), synthetic(), replay.Options{}); !errors.Is(err, replay.ErrNoStrategies) {
		t.Fatal(err)
	}
}

// garbageStrategy returns a body no parser reads for every request.
type garbageStrategy struct{}

func (garbageStrategy) Name() string { return "garbage" }
func (garbageStrategy) New(context.Context, replay.Transcript) (replay.Runner, error) {
	return garbageRunner{}, nil
}

type garbageRunner struct{}

func (garbageRunner) Close() error { return nil }
func (garbageRunner) Rewrite(context.Context, *replay.Request) (replay.Result, error) {
	return replay.Result{Body: []byte(`{"model":`)}, nil
}

// TestRunBillsUnreadableRewritesAsOriginal: a strategy whose bodies cannot be read is counted
// invalid once per request and billed as the original request (what the proxy forwards when
// its render fails), so it never looks cheaper than the baseline, and every request still
// advances the progress and the series.
func TestRunBillsUnreadableRewritesAsOriginal(t *testing.T) {
	var progress atomic.Int32
	rep, err := replay.Run(context.Background(), synthetic(), replay.Options{
		Strategies: []replay.Strategy{strategies.None{}, garbageStrategy{}},
		Estimator:  lenEst{},
		Progress:   func() { progress.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	none, g := rep.Strategies[0], rep.Strategies[1]
	if g.Invalid != 3 || g.DiagnosticCounts["invalid-request"] != 3 || g.DiagnosticCounts["unbillable-request"] != 3 {
		t.Fatalf("invalid %d, diagnostics %v", g.Invalid, g.DiagnosticCounts)
	}
	if g.Requests != 3 || len(g.Series) != 3 || progress.Load() != 6 {
		t.Fatalf("requests %d, series %d, progress %d", g.Requests, len(g.Series), progress.Load())
	}
	if math.Abs(g.Cost-none.Cost) > 1e-12 || g.Savings != 0 {
		t.Fatalf("garbage cost %v savings %v, none cost %v", g.Cost, g.Savings, none.Cost)
	}
}

func TestValidate(t *testing.T) {
	ok := `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"x","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"r"}]}]}`
	if err := replay.Validate(wire.Anthropic, []byte(ok)); err != nil {
		t.Fatal(err)
	}
	bad := map[string]string{
		"json":        `{`,
		"no messages": `{"model":"x"}`,
		"alternation": `{"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}`,
		"empty":       `{"messages":[{"role":"user","content":""}]}`,
		"empty text":  `{"messages":[{"role":"user","content":[{"type":"text","text":""}]}]}`,
		"orphan":      `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"r"}]}]}`,
		"dangling": `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"x","input":{}}]},` +
			`{"role":"user","content":"next"}]}`,
		"duplicate": `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"x","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"r"},{"type":"tool_result","tool_use_id":"a","content":"r"}]}]}`,
		"markers": `{"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"tools":[{"name":"a","cache_control":{"type":"ephemeral"}},{"name":"b","cache_control":{"type":"ephemeral"}}],` +
			`"messages":[{"role":"user","content":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}},{"type":"text","text":"b","cache_control":{"type":"ephemeral"}}]}]}`,
	}
	for name, body := range bad {
		err := replay.Validate(wire.Anthropic, []byte(body))
		var ve *wire.ValidationError
		if !errors.As(err, &ve) && !errors.Is(err, wire.ErrInvalid) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	oa := `{"messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"r"}]}`
	if err := replay.Validate(wire.OpenAI, []byte(oa)); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{
		`{"messages":[{"role":"tool","tool_call_id":"c","content":"r"}]}`,
		`{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"user","content":"x"}]}`,
	} {
		var ve *wire.ValidationError
		if err := replay.Validate(wire.OpenAI, []byte(body)); !errors.As(err, &ve) {
			t.Errorf("%s: %v", body, err)
		}
	}
}

func TestParseRequestLog(t *testing.T) {
	log := `{"model":"claude-sonnet-4-5","system":"s","messages":[{"role":"user","content":"a"}]}

{"time":"2026-05-01T10:00:00Z","output_tokens":7,"body":{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"b"}]}}
`
	r, err := replay.ParseRequestLog("log.jsonl", []byte(log))
	if err != nil {
		t.Fatal(err)
	}
	if r.Len() != 2 || r.WireFormat() != wire.Anthropic || r.Meta(1).OutputTokens != 7 || r.Meta(1).Time.IsZero() || r.Meta(0).Model != "claude-sonnet-4-5" {
		t.Fatalf("%+v", r.Metas)
	}
	oa, err := replay.ParseRequestLog("oa.jsonl", []byte(`{"model":"gpt-5","messages":[{"role":"system","content":"s"},{"role":"user","content":"a"}]}`))
	if err != nil || oa.WireFormat() != wire.OpenAI {
		t.Fatalf("openai: %v %v", err, oa)
	}
	if _, err := replay.ParseRequestLog("x", []byte(`{"type":"session"}`)); !errors.Is(err, replay.ErrNotRequestLog) {
		t.Fatalf("not a log: %v", err)
	}
	var le *replay.LineError
	if _, err := replay.ParseRequestLog("x", []byte("{\"messages\":[]}\n{oops\n")); !errors.As(err, &le) || le.Line != 2 {
		t.Fatalf("bad line: %v", err)
	}
	if _, err := replay.ParseRequestLog("x", []byte("{\"messages\":[]}\n{\"time\":\"yesterday\",\"body\":{\"messages\":[]}}\n")); !errors.As(err, &le) {
		t.Fatalf("bad time: %v", err)
	}
}

func TestOutputs(t *testing.T) {
	rep, err := replay.Run(context.Background(), synthetic(), replay.Options{
		Strategies: []replay.Strategy{strategies.None{}, strategies.ObservationMask{Window: 0}}, Estimator: lenEst{}})
	if err != nil {
		t.Fatal(err)
	}
	r := replay.NewReport([]replay.SessionReport{rep, {File: "bad.jsonl", Error: "unknown session format"}})
	var js bytes.Buffer
	if err := replay.WriteJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	var back replay.Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Totals) != 2 || back.Totals[1].Name != "observation-mask" {
		t.Fatalf("json: %v %+v", err, back.Totals)
	}
	var tb, md bytes.Buffer
	if err := replay.WriteTable(&tb, r, true); err != nil {
		t.Fatal(err)
	}
	if err := replay.WriteMarkdown(&md, r, "Corpus"); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{tb.String(), md.String()} {
		for _, want := range []string{"observation-mask", "none", "syn.jsonl", "vs none", "$0.02", "-58.4%"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
	}
	if !strings.Contains(md.String(), "bad.jsonl`: unknown session format") {
		t.Errorf("markdown lacks the failed file")
	}
}
