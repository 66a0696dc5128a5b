package strategies

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/cost"
	"github.com/condense-dev/condense/internal/replay"
	"github.com/condense-dev/condense/internal/summarize"
)

// TestModeledLLMBillsPromptAndSummary: the modeled call's input is the system and user
// prompt an LLM summarizer sends, its output the extractive summary's size, both priced at
// the model's table entry; the text is the extractive summary.
func TestModeledLLMBillsPromptAndSummary(t *testing.T) {
	req := &summarize.Request{ID: "b1", System: "You condense tool activity.", Prompt: "You condense tool activity.\n\n<tool-call-batch>\n" +
		"[[1:read]] Tool: read({\"path\":\"a.go\"})\nResult (OK): package a\nfunc Open() {}\n</tool-call-batch>"}
	want, err := summarize.Extractive{}.Summarize(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	est := cost.CharEstimator{}
	got, err := ModeledLLM{Estimator: est}.Summarize(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	in := int64(est.Text(req.System) + est.Text(req.Prompt) + est.Overhead("message"))
	out := int64(est.Text(want.Text))
	pr, _ := cost.DefaultPrices().Lookup(DefaultLLMModel)
	if got.Text != want.Text || got.Model != DefaultLLMModel || got.Usage.InputTokens != in || got.Usage.OutputTokens != out || got.Usage.Calls != 1 {
		t.Fatalf("got %+v, want text %q, input %d, output %d", got, want.Text, in, out)
	}
	if usd := (float64(in)*pr.Input + float64(out)*pr.Output) / 1e6; math.Abs(got.Usage.CostUSD-usd) > 1e-12 || usd <= 0 {
		t.Fatalf("cost %v, want %v", got.Usage.CostUSD, usd)
	}
}

// TestCondenseLLMStrategyPaysItsSummaries: the engine with the modeled LLM summarizer bills
// every summary it consumes at the model's price, and its cost is its requests plus those
// calls (plus recovery rounds).
func TestCondenseLLMStrategyPaysItsSummaries(t *testing.T) {
	s, err := NewCondense(CondenseOptions{Name: "condense-llm", Summarizer: ModeledLLM{Model: "claude-haiku-4-5"}})
	if err != nil {
		t.Fatal(err)
	}
	rep := runEngine(t, s)
	r := rep.Strategies[1]
	if r.SummarizerCalls == 0 || r.Summarizer.Input == 0 || r.Summarizer.Output == 0 || r.SummarizerCost <= 0 {
		t.Fatalf("no summarizer bill: %+v", r)
	}
	if math.Abs(r.Cost-(r.InputCost+r.SummarizerCost+r.RecoveryCost)) > 1e-12 {
		t.Fatalf("cost %v ≠ input %v + summarizer %v + recovery %v", r.Cost, r.InputCost, r.SummarizerCost, r.RecoveryCost)
	}
}

// TestEngineOriginalsAreRecoverable: a use of a result the engine pruned is recoverable
// (its original is in the store, reachable by context_tree_query); the same use under
// observation masking is lost. The reply after the first flush names handler350 of a.go,
// which no summary keeps.
func TestEngineOriginalsAreRecoverable(t *testing.T) {
	tr := engineSession()
	for i := 3; i < len(tr.Bodies); i++ {
		tr.Bodies[i] = []byte(strings.Replace(string(tr.Bodies[i]), `"text":"Reading b.go."`, `"text":"handler350 of a.go is wrong too; reading b.go."`, 1))
	}
	rep, err := replay.Run(context.Background(), tr, replay.Options{Strategies: []replay.Strategy{None{}, Reference(), ObservationMask{Window: 0}}})
	if err != nil {
		t.Fatal(err)
	}
	none, ref, mask := rep.Strategies[0], rep.Strategies[1], rep.Strategies[2]
	if none.Fidelity.Uses != 1 || none.Fidelity.Kept != 1 {
		t.Fatalf("none: %+v", none.Fidelity)
	}
	if ref.Fidelity.Recoverable != 1 || ref.RecoveryQueries != 1 || ref.RecoveryCost <= 0 {
		t.Fatalf("reference: %+v, queries %d, recovery %v", ref.Fidelity, ref.RecoveryQueries, ref.RecoveryCost)
	}
	if mask.Fidelity.Lost != 1 || mask.Reruns != 1 {
		t.Fatalf("observation-mask: %+v, reruns %d", mask.Fidelity, mask.Reruns)
	}
}
