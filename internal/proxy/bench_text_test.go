package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/condense-dev/condense/internal/cachepolicy"
	"github.com/condense-dev/condense/internal/flush"
	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/summarize"
	"github.com/condense-dev/condense/internal/upstreamfake"
	"github.com/condense-dev/condense/internal/wire"
)

// benchTextBody builds a Chat Completions request of a mini-swe-agent session: turns actions
// with observations of resultLines lines each, no tools.
func benchTextBody(turns, resultLines int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"model":"gpt-4o","messages":[{"role":"system","content":%q},{"role":"user","content":"<pr_description>\nFix the build.\n</pr_description>"}`, msaSystem)
	for i := 0; i < turns; i++ {
		fmt.Fprintf(&b, `,{"role":"assistant","content":%q},{"role":"user","content":%q}`,
			msaReply(fmt.Sprint("Step ", i), fmt.Sprint("make step", i)), msaObservation(0, bigOutput(fmt.Sprint("s", i), resultLines)))
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// BenchmarkTextTurn measures what a text-protocol turn adds to a request's path with
// observations on — the final-reply and mid-run decisions (finalReply, MidRunCutFunc over
// pruner.ToolTurnFunc; the whole view's ToolTurns for scale) and HasObservations (whether a
// stream is held) — next to prepare as a whole (load, view, render) for the same request, its
// session's state a flush of the first half of its turns.
func BenchmarkTextTurn(b *testing.B) {
	body := benchTextBody(60, 150)
	pol := testPolicy()
	pol.Observations = pruner.ObservationPolicy{Enabled: true, Harness: pruner.HarnessMiniSWEAgent}
	st := store.NewMemory(0)
	b.Cleanup(func() { _ = st.Close() })
	orch := &flush.Orchestrator{Store: st, Planner: flush.EnginePlanner{Policy: pol}, Summarizer: summarize.Extractive{},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if res, err := orch.Flush(context.Background(), &flush.Job{Queued: flush.Queued{Session: "bench", Format: wire.OpenAI, Body: benchTextBody(30, 150), Trigger: "bench"}}); err != nil || res.Version == 0 {
		b.Fatalf("flush: %v %+v", err, res)
	}
	up := upstreamfake.Start()
	defer up.Close()
	px, err := New(Options{AnthropicBaseURL: up.URL, OpenAIBaseURL: up.URL + "/v1", Store: st, Policy: pol,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = px.Close() })
	req, err := wire.Parse(wire.OpenAI, body)
	if err != nil {
		b.Fatal(err)
	}
	hdr := http.Header{HeaderSession: []string{"bench"}}
	newTurn := func() *turn {
		t := &turn{f: wire.OpenAI, ep: epChat, hdr: hdr, client: req, log: px.log, sid: "bench"}
		t.side, t.text = px.classify(req)
		return t
	}
	t0 := newTurn()
	px.prepare(context.Background(), t0)
	if !t0.text || t0.open != "" || !t0.state.HasObservations() {
		b.Fatalf("not a pruned text turn: text %v open %q", t0.text, t0.open)
	}
	b.Run("prepare", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			px.prepare(context.Background(), newTurn())
		}
	})
	b.Run("decisions", func(b *testing.B) {
		b.ReportAllocs()
		msgs := t0.view.Messages
		for i := 0; i < b.N; i++ {
			finalReply(msgs, px.toolTurn)
			cachepolicy.MidRunCutFunc(msgs, 0, func(i int) bool { return px.toolTurn(msgs, i) })
		}
	})
	b.Run("ToolTurns", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			pruner.ToolTurns(t0.view, pol)
		}
	})
	b.Run("HasObservations", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			t0.state.HasObservations()
		}
	})
}
