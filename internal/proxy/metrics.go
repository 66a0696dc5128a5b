package proxy

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the proxy's Prometheus metrics (condense_ prefix). Flush and summarizer
// metrics are registered by package flush on the same registry.
type Metrics struct {
	// Requests is condense_requests_total{endpoint,format,code}.
	Requests *prometheus.CounterVec
	// RenderSeconds is condense_render_duration_seconds.
	RenderSeconds prometheus.Histogram
	// AddedSeconds is condense_added_latency_seconds{endpoint}.
	AddedSeconds *prometheus.HistogramVec
	// PhaseSeconds is condense_request_phase_seconds{phase}, indexed by phase.
	PhaseSeconds [nPhases]prometheus.Observer
	// FinishSeconds is condense_response_finish_seconds: the proxy's own time after the
	// provider's last byte (see Server.finished).
	FinishSeconds prometheus.Histogram
	// UpstreamSecs is condense_upstream_duration_seconds{endpoint}.
	UpstreamSecs *prometheus.HistogramVec
	// UpstreamBroken is condense_upstream_broken_total{endpoint}.
	UpstreamBroken *prometheus.CounterVec
	// UpstreamLimits is condense_upstream_limits_total{endpoint,limit}.
	UpstreamLimits *prometheus.CounterVec
	// Bytes is condense_request_bytes_total{stage}.
	Bytes *prometheus.CounterVec
	// Tokens is condense_request_tokens_estimated_total{stage}.
	Tokens *prometheus.CounterVec
	// UsageTokens is condense_upstream_usage_tokens_total{kind}.
	UsageTokens *prometheus.CounterVec
	// Diagnostics is condense_diagnostics_total{kind}.
	Diagnostics *prometheus.CounterVec
	// StoreSeconds is condense_store_duration_seconds{op}.
	StoreSeconds *prometheus.HistogramVec
	// StoreErrors is condense_store_errors_total{op}.
	StoreErrors *prometheus.CounterVec
	// FailOpen is condense_fail_open_total{reason}.
	FailOpen *prometheus.CounterVec
	// Recoveries is condense_recovery_total{mode}.
	Recoveries *prometheus.CounterVec
	// FlushTriggers is condense_flush_triggers_total{trigger}.
	FlushTriggers *prometheus.CounterVec
	// FlushWaits is condense_flush_waits_total{result}.
	FlushWaits *prometheus.CounterVec
	// RequestsPruned is condense_requests_pruned_total.
	RequestsPruned prometheus.Counter
	// Warmups is condense_state_warmups_total.
	Warmups prometheus.Counter
	// ResponsesPassThrough is condense_responses_passthrough_total{reason}.
	ResponsesPassThrough *prometheus.CounterVec
}

var latencyBuckets = []float64{.0001, .00025, .0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1}

// NewMetrics creates the proxy metrics and registers them with reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "condense_requests_total",
			Help: "Requests handled by the proxy, by endpoint, wire format and response status."}, []string{"endpoint", "format", "code"}),
		RenderSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "condense_render_duration_seconds",
			Help: "Time the pruning engine takes to render and serialize a request.", Buckets: latencyBuckets}),
		AddedSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "condense_added_latency_seconds",
			Help: "Latency the proxy adds before a request is sent upstream (read, parse, load, render).", Buckets: latencyBuckets}, []string{"endpoint"}),
		FinishSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "condense_response_finish_seconds",
			Help: "Latency the proxy adds after the provider's last byte, until the client has the response's last byte (the relay's own work).", Buckets: latencyBuckets}),
		UpstreamSecs: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "condense_upstream_duration_seconds",
			Help: "Time from sending a request upstream to its response headers.", Buckets: prometheus.DefBuckets}, []string{"endpoint"}),
		UpstreamBroken: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "condense_upstream_broken_total",
			Help: "Provider responses whose body broke off (a read error before its end): a JSON answer becomes a 502, a relayed response is aborted."}, []string{"endpoint"}),
		UpstreamLimits: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "condense_upstream_limits_total",
			Help: "Provider responses cut short by one of the proxy's bounds on them: header_timeout (no response headers in time: 502), idle_timeout (nothing more of the body in time), response_too_large (a JSON answer past the limit: 502), event_too_large (one server-sent event past the limit)."}, []string{"endpoint", "limit"}),
		Bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "condense_request_bytes_total",
			Help: "Request body bytes before and after pruning."}, []string{"stage"}),
		Tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "condense_request_tokens_estimated_total",
			Help: "Estimated request tokens (bytes/4) before and after pruning."}, []string{"stage"}),
		UsageTokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "condense_upstream_usage_tokens_total",
			Help: "Token usage reported by the provider, by kind (input, output, cache_read, cache_creation)."}, []string{"kind"}),
		Diagnostics: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "condense_diagnostics_total",
			Help: "Render diagnostics by kind."}, []string{"kind"}),
		StoreSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "condense_store_duration_seconds",
			Help: "Session store call latency by operation.", Buckets: latencyBuckets}, []string{"op"}),
		StoreErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "condense_store_errors_total",
			Help: "Session store errors by operation."}, []string{"op"}),
		FailOpen: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "condense_fail_open_total",
			Help: "Requests forwarded unpruned because something failed, by reason."}, []string{"reason"}),
		Recoveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "condense_recovery_total",
			Help: "context_tree_query handling: rounds answered in the proxy, deferred calls (mixed, rounds exhausted), dropped calls (an answer cut off), failed continuations (the provider's error relayed to the client)."}, []string{"mode"}),
		FlushTriggers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "condense_flush_triggers_total",
			Help: "Flushes started by the proxy, by trigger."}, []string{"trigger"}),
		FlushWaits: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "condense_flush_waits_total",
			Help: "Requests that found an unfinished flush, by result (done, timeout)."}, []string{"result"}),
		RequestsPruned: prometheus.NewCounter(prometheus.CounterOpts{Name: "condense_requests_pruned_total",
			Help: "Requests whose forwarded body differs from what the client sent."}),
		Warmups: prometheus.NewCounter(prometheus.CounterOpts{Name: "condense_state_warmups_total",
			Help: "Committed states the proxy decoded and rendered a session's remembered request with in the background, after its own flushes and on the store's commit notifications."}),
		ResponsesPassThrough: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "condense_responses_passthrough_total",
			Help: "OpenAI Responses API requests forwarded unchanged, by reason: previous_response_id and conversation (history the provider holds), compact, retrieve, delete, cancel, input_items, other (the API's other paths)."}, []string{"reason"}),
	}
	phases := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "condense_request_phase_seconds",
		Help: "The proxy's own time before a request goes upstream, by phase (read, parse, load, decode, view, render, flush).", Buckets: latencyBuckets}, []string{"phase"})
	for p := range m.PhaseSeconds {
		m.PhaseSeconds[p] = phases.WithLabelValues(phaseNames[p])
	}
	if reg != nil {
		reg.MustRegister(phases)
		reg.MustRegister(m.Requests, m.RenderSeconds, m.AddedSeconds, m.FinishSeconds, m.UpstreamSecs, m.UpstreamBroken, m.UpstreamLimits, m.Bytes, m.Tokens, m.UsageTokens,
			m.Diagnostics, m.StoreSeconds, m.StoreErrors, m.FailOpen, m.Recoveries, m.FlushTriggers, m.FlushWaits, m.RequestsPruned, m.Warmups, m.ResponsesPassThrough)
	}
	return m
}
