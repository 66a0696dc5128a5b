package proxy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/condense-dev/condense/internal/upstreamfake"
	"github.com/condense-dev/condense/internal/wire"
)

// TestDeltaTriggerFlushesWhenContextGrowsFast: with a turn delta of 1% of the context window
// (2,000 tokens for an unknown model's 200k), a request that grew by more than that since the
// previous one is flushed before it is forwarded; a request that grew less is not.
func TestDeltaTriggerFlushesWhenContextGrowsFast(t *testing.T) {
	r := newRig(t, nil, nil, func(o *Options) { o.Trigger = Trigger{OnDemand: true, TurnDelta: 0.01} })
	c := r.anthropic("sess-delta")
	deltas := func() float64 { return testutil.ToFloat64(r.px.met.FlushTriggers.WithLabelValues("delta")) }
	waitLastTokens := func() {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			snap, err := r.st.Load(context.Background(), "sess-delta")
			if err != nil {
				t.Fatal(err)
			}
			if snap.Stats[statLastTokens] > 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("the proxy never recorded the last request's size")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	r.up.Enqueue(
		upstreamfake.Reply{ToolCalls: []upstreamfake.ToolCall{{ID: "toolu_s", Name: "bash", Input: `{"cmd":"ls"}`}}},
		upstreamfake.Reply{ToolCalls: []upstreamfake.ToolCall{{ID: "toolu_d", Name: "bash", Input: `{"cmd":"cat big.log"}`}}},
		upstreamfake.Reply{Text: "read it"},
	)
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("look around"))}
	m := aTurn(t, c, msgs, false)
	waitLastTokens()
	// A small step: well under 2,000 tokens of growth.
	msgs = append(msgs, m.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_s", "a.go\nb.go", false)))
	m = aTurn(t, c, msgs, false)
	if deltas() != 0 {
		t.Fatal("delta trigger fired on a small step")
	}
	waitLastTokens()
	// A big step: a 400-line log (about 5,000 tokens).
	msgs = append(msgs, m.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_d", bigOutput("log", 400), false)))
	aTurn(t, c, msgs, false)
	if deltas() != 1 {
		t.Fatalf("delta trigger fired %v times on a big step, want 1", deltas())
	}
	rec, _ := lastModelRequest(t, r.up, wire.Anthropic)
	if strings.Contains(string(rec.Body), "log line 200") || !strings.Contains(string(rec.Body), "`t") {
		t.Fatalf("request after the delta flush not pruned: %d bytes", len(rec.Body))
	}
}
