package proxy

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// lockedBuffer is a log sink safe for the proxy's concurrent writers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func histogram(t *testing.T, o prometheus.Observer) *dto.Histogram {
	t.Helper()
	var m dto.Metric
	if err := o.(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram()
}

func TestRequestPhasesTimedAndSlowRequestsLogged(t *testing.T) {
	for _, tc := range []struct {
		name      string
		threshold time.Duration
		logged    bool
	}{
		{"every request is slow", time.Nanosecond, true},
		{"threshold not reached", time.Hour, false},
		{"slow log off", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs lockedBuffer
			r := newRig(t, nil, nil, func(o *Options) {
				o.SlowRequestLog = tc.threshold
				o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			})
			msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("list the files"))}
			aTurn(t, r.anthropic("phases"), msgs, false)

			met := r.px.met
			var phaseSum float64
			for p := range met.PhaseSeconds {
				h := histogram(t, met.PhaseSeconds[p])
				if h.GetSampleCount() != 1 {
					t.Fatalf("phase %s observed %d times, want once per request", phaseNames[p], h.GetSampleCount())
				}
				phaseSum += h.GetSampleSum()
			}
			added := histogram(t, met.AddedSeconds.WithLabelValues(string(epMessages)))
			if phaseSum <= 0 || phaseSum > added.GetSampleSum() {
				t.Fatalf("phases add up to %vs, the request's own time is %vs", phaseSum, added.GetSampleSum())
			}

			line := ""
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, `msg="slow request"`) {
					line = l
				}
			}
			if (line != "") != tc.logged {
				t.Fatalf("slow request logged = %v, want %v; logs:\n%s", line != "", tc.logged, logs.String())
			}
			if tc.logged {
				for _, want := range []string{"session=phases", "ownMs=", "bytes=", "readMs=", "parseMs=", "renderMs="} {
					if !strings.Contains(line, want) {
						t.Fatalf("slow request line lacks %q: %s", want, line)
					}
				}
			}
		})
	}
}
