package strategies

import (
	"context"

	"github.com/condense-dev/condense/internal/cost"
	"github.com/condense-dev/condense/internal/summarize"
)

// DefaultLLMModel is the model the condense-llm strategy bills its summarizer calls at: a
// small, cheap model, as a summarizer would be configured.
const DefaultLLMModel = "claude-haiku-4-5"

// ModeledLLM stands in for an LLM summarizer in a replay: Text's (extractive) summaries, billed
// as an LLM call on the same batch would be (input: summarize.LLM's prompts; output: the tokens
// of Text's summary). Safe for concurrent use.
type ModeledLLM struct {
	// Model is the model the calls are billed at (DefaultLLMModel when empty).
	Model string
	// Estimator counts the tokens (cost.DefaultEstimator when nil).
	Estimator cost.Estimator
	// Prices prices the calls (cost.DefaultPrices when nil).
	Prices *cost.Prices
	// Text writes the summaries (summarize.Extractive when nil).
	Text summarize.Summarizer
}

// Summarize implements summarize.Summarizer.
func (m ModeledLLM) Summarize(ctx context.Context, req *summarize.Request) (*summarize.Result, error) {
	text := m.Text
	if text == nil {
		text = summarize.Extractive{}
	}
	res, err := text.Summarize(ctx, req)
	if err != nil {
		return nil, err
	}
	est := m.Estimator
	if est == nil {
		est = cost.DefaultEstimator
	}
	model := m.Model
	if model == "" {
		model = DefaultLLMModel
	}
	prices := m.Prices
	if prices == nil {
		prices = cost.DefaultPrices()
	}
	in := int64(est.Text(req.Prompt) + est.Overhead("message"))
	if req.System != "" {
		in += int64(est.Text(req.System))
	}
	out := int64(est.Text(res.Text))
	pr, _ := prices.Lookup(model)
	u := summarize.Usage{InputTokens: in, OutputTokens: out, Calls: 1, CostUSD: cost.Usage{Input: in, Output: out}.Cost(pr)}
	return &summarize.Result{Text: res.Text, Usage: u, Model: model}, nil
}
