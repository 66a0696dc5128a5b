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
)

// BenchmarkProxyRoundTripFlushing is BenchmarkProxyRoundTrip with in-process flushes: every
// response is a final answer, so every request also hands an agent-message flush of the
// session (its view plus the answer, serialized and hashed) to the flusher. The difference to
// BenchmarkProxyRoundTrip is what starting flushes costs a request.
func BenchmarkProxyRoundTripFlushing(b *testing.B) {
	body := benchBody(20, 100)
	up := quietUpstream(b)
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
	reportFinish(b, px)
	srv.Close()
	_ = px.Close() // waits for flush submissions still under way
	if testutil.ToFloat64(px.met.FlushTriggers.WithLabelValues("agent-message")) == 0 {
		b.Fatal("no agent-message flush was started")
	}
}

// reportFinish reports the mean of condense_response_finish_seconds (the relay's own time
// after the provider's last byte) as finish-µs.
func reportFinish(b *testing.B, px *Server) {
	if n, sum := histogramStats(b, px, "condense_response_finish_seconds"); n > 0 {
		b.ReportMetric(1e6*sum/float64(n), "finish-µs")
	}
}
