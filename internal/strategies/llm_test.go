package strategies

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/condense-dev/condense/internal/summarize"
	"github.com/condense-dev/condense/internal/upstreamfake"
	"github.com/condense-dev/condense/internal/wire"
)

// TestCondenseWithLLMSummarizer replays a session with an LLM summarizer (the configured-model
// path of `condense replay --config`) against the local fake provider: the summarizer is
// called over the Anthropic wire format with the configured model and key, its usage is billed
// at the summarizer model's price, and the replayed requests are pruned.
func TestCondenseWithLLMSummarizer(t *testing.T) {
	up := upstreamfake.Start()
	defer up.Close()
	var calls atomic.Int32
	up.SetResponder(func(req upstreamfake.Recorded) upstreamfake.Reply {
		calls.Add(1)
		return upstreamfake.Reply{
			Text:  "- [[1:read]] read a.go: 400 handler functions, all return nil. SUMMARY-FROM-LLM",
			Usage: upstreamfake.Usage{InputTokens: 3000, OutputTokens: 40},
		}
	})
	llm, err := summarize.NewLLM(summarize.LLMOptions{Endpoint: summarize.Endpoint{
		Format: wire.Anthropic, BaseURL: up.URL, Model: "claude-haiku-4-5", APIKey: "sk-test"}})
	if err != nil {
		t.Fatal(err)
	}
	withLLM, err := NewCondense(CondenseOptions{Name: "llm", Summarizer: llm, Horizon: 1000})
	if err != nil {
		t.Fatal(err)
	}
	rep := runEngine(t, withLLM)
	none, s := rep.Strategies[0], rep.Strategies[1]
	if calls.Load() == 0 || s.SummarizerCalls == 0 {
		t.Fatalf("summarizer never called (fake saw %d calls, report %d)", calls.Load(), s.SummarizerCalls)
	}
	if s.Summarizer.Input < 3000 || s.SummarizerCost <= 0 {
		t.Fatalf("summarizer usage not billed: %+v cost %v", s.Summarizer, s.SummarizerCost)
	}
	if s.Cost != s.InputCost+s.SummarizerCost {
		t.Fatalf("cost %v is not input %v + summarizer %v", s.Cost, s.InputCost, s.SummarizerCost)
	}
	for _, r := range up.Requests() {
		b := string(r.Body)
		if r.Path != "/v1/messages" || !strings.Contains(b, `"claude-haiku-4-5"`) || !strings.Contains(b, "[[1:read]]") {
			t.Fatalf("summarizer request is not an Anthropic call to the configured model with labelled input: %s %.300s", r.Path, b)
		}
		if r.Header.Get("X-Api-Key") != "sk-test" {
			t.Fatal("summarizer key not sent")
		}
	}
	if s.Series[4].Context >= none.Series[4].Context {
		t.Fatalf("no pruning with the LLM summarizer: %d vs %d tokens", s.Series[4].Context, none.Series[4].Context)
	}
}
