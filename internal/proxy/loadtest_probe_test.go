//go:build loadtest

package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// stallProbe is a running hack/stallprobe process: it measures, next to the proxy, when the
// machine stops running a process that wants a CPU (CONDENSE_LOAD_PROBE=1).
type stallProbe struct {
	cmd *exec.Cmd
	out bytes.Buffer
}

// probeStall is one stall the probe saw.
type probeStall struct {
	at   time.Time
	late time.Duration
	work bool // a work slice ran late (else a sleep woke late)
}

// startStallProbe builds and starts hack/stallprobe when CONDENSE_LOAD_PROBE=1 (nil
// otherwise). It costs about a tenth of one CPU.
func startStallProbe(t *testing.T) *stallProbe {
	if os.Getenv("CONDENSE_LOAD_PROBE") != "1" {
		return nil
	}
	p := &stallProbe{cmd: exec.Command(goBuild(t, "./hack/stallprobe", "stallprobe"), "-duration", "0")}
	p.cmd.Stdout = &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.cmd.Process.Kill() })
	return p
}

// stop ends the probe and returns its stalls and summary line.
func (p *stallProbe) stop() ([]probeStall, string) {
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	_ = p.cmd.Wait()
	var stalls []probeStall
	summary := ""
	sc := bufio.NewScanner(&p.out)
	for sc.Scan() {
		f := strings.Split(sc.Text(), ",")
		switch {
		case f[0] == "summary":
			summary = strings.Join(f[1:], ", ")
		case f[0] == "stall" && len(f) == 4:
			ns, err1 := strconv.ParseInt(f[1], 10, 64)
			us, err2 := strconv.ParseInt(f[3], 10, 64)
			if err1 == nil && err2 == nil {
				stalls = append(stalls, probeStall{time.Unix(0, ns), time.Duration(us) * time.Microsecond, f[2] == "work"})
			}
		}
	}
	return stalls, summary
}

// probeReport says how the probe's stalls line up with the requests the proxy added the
// most to: a request counts as overlapping a stall when a stall of at least 1 ms was under
// way in the window from sending it to sending it plus its end-to-end time minus the modeled
// provider time (an approximation of the time it spent outside the fake's modeled wait).
func probeReport(rs []pairResult, stalls []probeStall, summary string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nMachine stall probe (hack/stallprobe, run next to the proxy): %s.\n", summary)
	overlaps := func(r pairResult, work bool) bool {
		end := r.proxStart.Add(r.proxiedRm)
		for _, s := range stalls {
			if (!work || s.work) && s.late >= time.Millisecond && !s.at.Before(r.proxStart.Add(-s.late)) && s.at.Before(end) {
				return true
			}
		}
		return false
	}
	works := 0
	for _, s := range stalls {
		if s.work {
			works++
		}
	}
	fmt.Fprintf(&b, "Of its %d stalls, %d were work slices running late (the CPU taken away mid-computation), the rest sleeps waking late.\n\n", len(stalls), works)
	fmt.Fprintf(&b, "| paired requests | n | overlapping any stall ≥ 1 ms | a work stall ≥ 1 ms |\n|---|---:|---:|---:|\n")
	for _, limit := range []time.Duration{5 * time.Millisecond, 0} {
		n, hit, hitWork := 0, 0, 0
		for _, r := range rs {
			if r.added > limit || limit == 0 {
				n++
				if overlaps(r, false) {
					hit++
				}
				if overlaps(r, true) {
					hitWork++
				}
			}
		}
		what := fmt.Sprintf("added > %v", limit)
		if limit == 0 {
			what = "all"
		}
		pct := func(k int) float64 { return 100 * float64(k) / float64(max(1, n)) }
		fmt.Fprintf(&b, "| %s | %d | %.1f%% | %.1f%% |\n", what, n, pct(hit), pct(hitWork))
	}
	return b.String()
}
