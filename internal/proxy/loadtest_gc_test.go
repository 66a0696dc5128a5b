//go:build loadtest

package proxy

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// gcCycle is one garbage collection cycle of the proxy, from a GODEBUG=gctrace=1 line.
type gcCycle struct {
	start time.Time
	dur   time.Duration // wall clock: the two stop-the-world phases and the concurrent mark
}

// gctraceLine matches "gc 12 @45.123s 1%: 0.021+12+0.034 ms clock, …".
var gctraceLine = regexp.MustCompile(`^gc \d+ @([0-9.]+)s \d+%: ([0-9.]+)\+([0-9.]+)\+([0-9.]+) ms clock`)

// readGCCycles reads the gctrace lines of the proxy's log; started is when the process was
// started, which the runtime's "@…s" times count from (to within the exec's few milliseconds).
func readGCCycles(logPath string, started time.Time) []gcCycle {
	f, err := os.Open(logPath)
	if err != nil {
		return nil
	}
	defer f.Close()
	var cycles []gcCycle
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		m := gctraceLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		at, _ := strconv.ParseFloat(m[1], 64)
		var ms float64
		for _, s := range m[2:] {
			v, _ := strconv.ParseFloat(s, 64)
			ms += v
		}
		cycles = append(cycles, gcCycle{
			start: started.Add(time.Duration(at * float64(time.Second))),
			dur:   time.Duration(ms * float64(time.Millisecond)),
		})
	}
	return cycles
}

// gcReport says how the proxy's garbage collection cycles line up with the pairs it added
// the most to (CONDENSE_LOAD_PROXY_ENV=GODEBUG=gctrace=1): a proxied request overlaps a
// cycle when one was under way between sending it and its end-to-end time minus the modeled
// provider time after that, as in probeReport.
func gcReport(rs []pairResult, cycles []gcCycle, wall time.Duration) string {
	if len(cycles) == 0 || len(rs) == 0 {
		return ""
	}
	var in time.Duration
	for _, c := range cycles {
		in += c.dur
	}
	overlaps := func(r pairResult) bool {
		end := r.proxStart.Add(r.proxiedRm)
		for _, c := range cycles {
			if c.start.Before(end) && r.proxStart.Before(c.start.Add(c.dur)) {
				return true
			}
		}
		return false
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nProxy garbage collection (gctrace): %d cycles, %.2f s in a cycle (%.1f %% of the run's wall time).\n\n",
		len(cycles), in.Seconds(), 100*in.Seconds()/wall.Seconds())
	fmt.Fprintf(&b, "| paired requests | n | overlapping a GC cycle |\n|---|---:|---:|\n")
	for _, limit := range []time.Duration{5 * time.Millisecond, 0} {
		n, hit := 0, 0
		for _, r := range rs {
			if limit == 0 || r.added > limit {
				n++
				if overlaps(r) {
					hit++
				}
			}
		}
		what := fmt.Sprintf("added > %v", limit)
		if limit == 0 {
			what = "all"
		}
		fmt.Fprintf(&b, "| %s | %d | %.1f%% |\n", what, n, 100*float64(hit)/float64(max(1, n)))
	}
	return b.String()
}
