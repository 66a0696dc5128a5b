package proxy

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/condense-dev/condense/internal/flush"
	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/summarize"
	"github.com/condense-dev/condense/internal/upstreamfake"
)

// BenchmarkProxyRoundTripFlushing is BenchmarkProxyRoundTrip with in-process flushes: every
// response is a final answer, so every request also hands an agent-message flush of the
// session (its view plus the answer, serialized and hashed) to the flusher. The difference to
// BenchmarkProxyRoundTrip is what starting flushes costs a request.
func BenchmarkProxyRoundTripFlushing(b *testing.B) {
	body := benchBody(20, 100)
	up := upstreamfake.Start()
	defer up.Close()
	up.SetRecording(false)
	st := store.NewMemory(0)
	defer st.Close()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	inproc := &flush.InProcess{MaxConcurrent: 1, Orch: &flush.Orchestrator{Store: st, Planner: flush.EnginePlanner{Policy: testPolicy()},
		Summarizer: summarize.Extractive{}, Log: quiet}}
	defer inproc.Close(context.Background())
	px, err := New(Options{AnthropicBaseURL: up.URL, OpenAIBaseURL: up.URL + "/v1", Store: st, Policy: testPolicy(), Flusher: inproc, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(px)
	roundTrip(b, srv.URL, body)
	b.StopTimer()
	srv.Close()
	_ = px.Close() // waits for flush submissions still under way
	if testutil.ToFloat64(px.Metrics().FlushTriggers.WithLabelValues("agent-message")) == 0 {
		b.Fatal("no agent-message flush was started")
	}
}
