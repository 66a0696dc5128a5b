package flush

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/condense-dev/condense/internal/summarize"
)

// Metrics are the flush and summarizer Prometheus metrics (condense_ prefix). A nil *Metrics
// records nothing.
type Metrics struct {
	Flushes          *prometheus.CounterVec   // condense_flushes_total{outcome}
	FlushSeconds     *prometheus.HistogramVec // condense_flush_duration_seconds{outcome}
	Conflicts        prometheus.Counter       // condense_flush_conflicts_total
	SummarizerTokens *prometheus.CounterVec   // condense_summarizer_tokens_total{model,kind}
	SummarizerCost   *prometheus.CounterVec   // condense_summarizer_cost_usd_total{model}
	SummarizerCalls  *prometheus.CounterVec   // condense_summarizer_calls_total{model,result}
	SummarizerErrors *prometheus.CounterVec   // condense_summarizer_errors_total{kind}
	FallbackActive   prometheus.Gauge         // condense_summarizer_fallback_active
	Jobs             *prometheus.CounterVec   // condense_flush_jobs_total{event}
	DeadLetters      prometheus.Counter       // condense_flush_jobs_dead_letter_total
}

// NewMetrics creates the metrics and registers them with reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Flushes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "condense_flushes_total",
			Help: "Flushes by outcome."}, []string{"outcome"}),
		FlushSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "condense_flush_duration_seconds",
			Help: "Flush duration by outcome.", Buckets: prometheus.ExponentialBuckets(0.01, 2.5, 12)}, []string{"outcome"}),
		Conflicts: prometheus.NewCounter(prometheus.CounterOpts{Name: "condense_flush_conflicts_total",
			Help: "Commits that lost the compare-and-set and were re-planned."}),
		SummarizerTokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "condense_summarizer_tokens_total",
			Help: "Summarizer tokens by model and kind (input, output, cache_read, cache_write)."}, []string{"model", "kind"}),
		SummarizerCost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "condense_summarizer_cost_usd_total",
			Help: "Summarizer cost in USD by model."}, []string{"model"}),
		SummarizerCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "condense_summarizer_calls_total",
			Help: "Successful summarizer calls by model and whether the fallback model answered."}, []string{"model", "fallback"}),
		SummarizerErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "condense_summarizer_errors_total",
			Help: "Failed summarizer calls by error kind."}, []string{"kind"}),
		FallbackActive: prometheus.NewGauge(prometheus.GaugeOpts{Name: "condense_summarizer_fallback_active",
			Help: "1 while summaries go to the session's own model because the summarizer model fails."}),
		Jobs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "condense_flush_jobs_total",
			Help: "Queued flush job events (enqueued, duplicate, done, retried, busy, reclaimed, requeued, dead, panicked)."}, []string{"event"}),
		DeadLetters: prometheus.NewCounter(prometheus.CounterOpts{Name: "condense_flush_jobs_dead_letter_total",
			Help: "Flush jobs moved to the dead-letter stream."}),
	}
	if reg != nil {
		reg.MustRegister(m.Flushes, m.FlushSeconds, m.Conflicts, m.SummarizerTokens, m.SummarizerCost,
			m.SummarizerCalls, m.SummarizerErrors, m.FallbackActive, m.Jobs, m.DeadLetters)
	}
	return m
}

// FallbackEvent updates the fallback gauge; pass it as summarize OnEvent.
func (m *Metrics) FallbackEvent(e summarize.Event) {
	if m == nil {
		return
	}
	if e.Kind == summarize.EventEnter {
		m.FallbackActive.Set(1)
	} else {
		m.FallbackActive.Set(0)
	}
}

func (m *Metrics) flush(r *Result, d time.Duration) {
	if m == nil {
		return
	}
	m.Flushes.WithLabelValues(string(r.Outcome)).Inc()
	m.FlushSeconds.WithLabelValues(string(r.Outcome)).Observe(d.Seconds())
}

func (m *Metrics) conflict() {
	if m != nil {
		m.Conflicts.Inc()
	}
}

func (m *Metrics) summarizerUsage(r *summarize.Result) {
	if m == nil {
		return
	}
	fb := "false"
	if r.Fallback {
		fb = "true"
	}
	m.SummarizerCalls.WithLabelValues(r.Model, fb).Inc()
	u := r.Usage
	m.SummarizerTokens.WithLabelValues(r.Model, "input").Add(float64(u.InputTokens))
	m.SummarizerTokens.WithLabelValues(r.Model, "output").Add(float64(u.OutputTokens))
	m.SummarizerTokens.WithLabelValues(r.Model, "cache_read").Add(float64(u.CacheReadTokens))
	m.SummarizerTokens.WithLabelValues(r.Model, "cache_write").Add(float64(u.CacheCreationTokens))
	m.SummarizerCost.WithLabelValues(r.Model).Add(u.CostUSD)
}

func (m *Metrics) summarizerError(err error) {
	if m == nil {
		return
	}
	k := summarize.KindOf(err).String()
	m.SummarizerErrors.WithLabelValues(k).Inc()
}

func (m *Metrics) job(event string) {
	if m != nil {
		m.Jobs.WithLabelValues(event).Inc()
	}
}

func (m *Metrics) dead() {
	if m != nil {
		m.DeadLetters.Inc()
	}
}
