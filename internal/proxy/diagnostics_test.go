package proxy

import (
	"context"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/condense-dev/condense/internal/upstreamfake"
	"github.com/condense-dev/condense/internal/wire"
)

// TestLastingDiagnosticCountedOnce: a condition every render reports again (here a tool result
// that answers no call, swept as an orphan) is counted and recorded once per session, not once
// per request.
func TestLastingDiagnosticCountedOnce(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	msgs, c := conversation(t, r, "sess-diag", false)
	msgs = append(msgs, anthropic.NewUserMessage(
		anthropic.NewToolResultBlock("toolu_ghost", "stale output", false),
		anthropic.NewTextBlock("Carry on."),
	))
	orphans := func() float64 { return testutil.ToFloat64(r.px.met.Diagnostics.WithLabelValues("orphan-sweep")) }
	for i := 0; i < 3; i++ {
		r.up.Enqueue(upstreamfake.Reply{Text: "Carrying on."})
		aTurn(t, c, msgs, false)
		_, fwd := lastModelRequest(t, r.up, wire.Anthropic)
		for _, m := range fwd.Messages {
			for _, b := range m.Blocks {
				if b.Kind == wire.KindToolResult && b.ID == "toolu_ghost" {
					t.Fatalf("request %d: the orphan result reached the provider", i)
				}
			}
		}
		if i == 0 {
			// Wait until the background write of the first report has landed in the store.
			deadline := time.Now().Add(10 * time.Second)
			for {
				snap, err := r.st.Load(context.Background(), "sess-diag")
				if err != nil {
					t.Fatal(err)
				}
				if snap.DiagnosticCounts["orphan-sweep"] == 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("orphan-sweep diagnostic never recorded: %+v", snap.DiagnosticCounts)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	if got := orphans(); got != 1 {
		t.Fatalf("condense_diagnostics_total{kind=orphan-sweep} = %v after 3 requests, want 1", got)
	}
	snap, err := r.st.Load(context.Background(), "sess-diag")
	if err != nil {
		t.Fatal(err)
	}
	if n := snap.DiagnosticCounts["orphan-sweep"]; n != 1 || !snap.HasDiagnostic(snap.Diagnostics[0].Key) || snap.HasDiagnostic("no-such-key") {
		t.Fatalf("store holds %d orphan-sweep diagnostics (%+v)", n, snap.Diagnostics)
	}
}
