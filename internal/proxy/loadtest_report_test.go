//go:build loadtest

package proxy

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"
)

// loadReport renders a run as markdown.
func loadReport(m loadModel, rs []pairResult, errs int, wall time.Duration, before, after promSample) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Model: %s.\n\n", m)
	fmt.Fprintf(&b, "%d paired requests (each sent direct and through the proxy), %d errors, wall %v, %.1f proxied requests/s.\n\n",
		len(rs), errs, wall.Round(time.Second), float64(len(rs))/wall.Seconds())
	col := func(f func(pairResult) time.Duration, keep func(pairResult) bool) []time.Duration {
		var l []time.Duration
		for _, r := range rs {
			if keep == nil || keep(r) {
				l = append(l, f(r))
			}
		}
		sort.Slice(l, func(a, b int) bool { return l[a] < l[b] })
		return l
	}
	big := func(r pairResult) bool { return r.size > 256<<10 }
	first := func(r pairResult) bool { return r.first }
	warm := func(r pairResult) bool { return !r.first }
	fmt.Fprintf(&b, "| ms | n | p50 | p90 | p99 | p99.9 | max |\n|---|---:|---:|---:|---:|---:|---:|\n")
	row := func(name string, l []time.Duration) {
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s |\n", name, len(l), msq(l, .5), msq(l, .9), msq(l, .99), msq(l, .999), msq(l, 1))
	}
	if m.mode != "saturate" {
		row("direct, end to end", col(func(r pairResult) time.Duration { return r.direct }, nil))
	}
	row("direct, minus modeled provider time", col(func(r pairResult) time.Duration { return r.directRm }, nil))
	row("proxied, minus modeled provider time", col(func(r pairResult) time.Duration { return r.proxiedRm }, nil))
	row("**added** (paired difference)", col(func(r pairResult) time.Duration { return r.added }, nil))
	row("added, bodies > 256 KiB", col(func(r pairResult) time.Duration { return r.added }, big))
	row("added, a session's later requests", col(func(r pairResult) time.Duration { return r.added }, warm))
	row("added, a session's first measured request", col(func(r pairResult) time.Duration { return r.added }, first))
	row("added before the fake had the request", col(func(r pairResult) time.Duration { rq, _ := r.addedSides(); return rq }, nil))
	row("added after the fake answered", col(func(r pairResult) time.Duration { _, rp := r.addedSides(); return rp }, nil))
	if len(rs) > 0 && rs[0].hasFloor {
		row("floor (forwarding only): added", col(func(r pairResult) time.Duration { return r.floorRm - r.directRm }, nil))
		row("floor: added before the fake had the request", col(func(r pairResult) time.Duration { return r.floorReq - r.directReq }, nil))
		row("floor: added after the fake answered", col(func(r pairResult) time.Duration { return r.floorResp - r.directResp }, nil))
		row("**condense over the floor** (proxied − floor)", col(func(r pairResult) time.Duration { return r.proxiedRm - r.floorRm }, nil))
		row("condense over the floor, bodies > 256 KiB", col(func(r pairResult) time.Duration { return r.proxiedRm - r.floorRm }, big))
		row("condense over the floor, before the fake had the request", col(func(r pairResult) time.Duration { return r.proxiedReq - r.floorReq }, nil))
		row("condense over the floor, after the fake answered", col(func(r pairResult) time.Duration { return r.proxiedResp - r.floorResp }, nil))
	}
	fmt.Fprintf(&b, "\n%s\n", tailSides(rs))
	fmt.Fprintf(&b, "\n%s", byTimeInRun(rs, 30*time.Second))
	fmt.Fprintf(&b, "\n%s\n", promSummary(before, after, len(rs)))
	return b.String()
}

// tailSides says where the added time of the slowest 1 % of pairs was: before the fake had
// the request (the proxy's read, own time and send, and the fake's read of the forwarded body)
// or after it answered (the relay back).
func tailSides(rs []pairResult) string {
	if len(rs) == 0 {
		return ""
	}
	top := append([]pairResult(nil), rs...)
	sort.Slice(top, func(a, b int) bool { return top[a].added > top[b].added })
	top = top[:max(1, len(top)/100)]
	var added, req, resp time.Duration
	big, first := 0, 0
	for _, r := range top {
		rq, rp := r.addedSides()
		added, req, resp = added+r.added, req+rq, resp+rp
		if r.size > 256<<10 {
			big++
		}
		if r.first {
			first++
		}
	}
	n := time.Duration(len(top))
	ms := func(d time.Duration) float64 { return float64((d / n).Microseconds()) / 1000 }
	return fmt.Sprintf("The %d pairs with the most added time (the top 1 %%): mean added %.2f ms, of which %.2f ms before the fake had the request and %.2f ms after it answered; %d with bodies > 256 KiB, %d a session's first measured request.",
		len(top), ms(added), ms(req), ms(resp), big, first)
}

// byTimeInRun tabulates the pairs by when their proxied copy was sent, in windows of width
// since the run began: how many, their median body, the direct path's own time, the added
// time and the share of pairs with more than 5 ms added. Sessions send larger bodies as they
// go, fewer of them remain active towards the end of a run, and after its last start the
// proxied copies of the last pairs run on an almost idle machine; the windows show whether
// the tail is spread over the run or comes from part of it. (In a window of under 100 pairs
// the p99 is its slowest pair.)
func byTimeInRun(rs []pairResult, width time.Duration) string {
	if len(rs) == 0 || width <= 0 {
		return ""
	}
	windows := map[int][]pairResult{}
	last := 0
	for _, r := range rs {
		w := int(r.proxAt / width)
		windows[w] = append(windows[w], r)
		last = max(last, w)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "The pairs by when their proxied copy was sent:\n\n")
	fmt.Fprintf(&b, "| proxied copy sent (s) | n | median body KiB | direct own p90 / p99 | added p50 / p90 / p99 | added > 5 ms |\n|---|---:|---:|---:|---:|---:|\n")
	for w := 0; w <= last; w++ {
		in := windows[w]
		if len(in) == 0 {
			continue
		}
		var direct, added []time.Duration
		sizes := make([]int, 0, len(in))
		slow := 0
		for _, r := range in {
			direct, added = append(direct, r.directRm), append(added, r.added)
			sizes = append(sizes, r.size)
			if r.added > 5*time.Millisecond {
				slow++
			}
		}
		slices.Sort(direct)
		slices.Sort(added)
		slices.Sort(sizes)
		from, to := (time.Duration(w) * width).Seconds(), (time.Duration(w+1) * width).Seconds()
		fmt.Fprintf(&b, "| %g–%g | %d | %d | %s / %s | %s / %s / %s | %.1f %% |\n", from, to,
			len(in), sizes[len(sizes)/2]>>10, msq(direct, .9), msq(direct, .99), msq(added, .5), msq(added, .9), msq(added, .99),
			100*float64(slow)/float64(len(in)))
	}
	return b.String()
}

// selfCPU returns the CPU time (user + system) this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// msq formats the q-quantile of a sorted list in milliseconds.
func msq(l []time.Duration, q float64) string {
	if len(l) == 0 {
		return "–"
	}
	d := l[min(len(l)-1, int(q*float64(len(l))))]
	return fmt.Sprintf("%.2f", float64(d.Microseconds())/1000)
}
