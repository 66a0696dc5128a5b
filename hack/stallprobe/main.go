// Command stallprobe reports how often this machine stalls a process that wants the CPU: it
// alternates fixed work and sleep, and prints "stall,<unix ns>,<work|sleep>,<excess µs>" for each
// late slice and a final "summary,..." line (`go run ./hack/stallprobe -duration 60s`).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"sort"
	"syscall"
	"time"
)

func main() {
	duration := flag.Duration("duration", time.Minute, "how long to probe (0: until interrupted)")
	threshold := flag.Duration("threshold", time.Millisecond, "report slices and sleeps late by at least this")
	slice := flag.Duration("slice", 100*time.Microsecond, "work per slice on an idle CPU")
	pause := flag.Duration("pause", 900*time.Microsecond, "sleep between slices")
	flag.Parse()
	runtime.LockOSThread()

	iters := calibrate(*slice)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	var end <-chan time.Time
	if *duration > 0 {
		end = time.After(*duration)
	}
	var excess []time.Duration // every slice's and sleep's lateness, for the summary
	var stalled time.Duration
	stalls := 0
	report := func(start time.Time, kind string, late time.Duration) {
		excess = append(excess, late)
		if late >= *threshold {
			stalls++
			stalled += late
			fmt.Printf("stall,%d,%s,%d\n", start.UnixNano(), kind, late.Microseconds())
		}
	}
	t0 := time.Now()
	for {
		select {
		case <-stop:
			summary(t0, excess, stalls, stalled)
			return
		case <-end:
			summary(t0, excess, stalls, stalled)
			return
		default:
		}
		start := time.Now()
		spin(iters)
		report(start, "work", time.Since(start)-*slice)
		start = time.Now()
		time.Sleep(*pause)
		report(start, "sleep", time.Since(start)-*pause)
	}
}

var sink uint64

// spin does n rounds of integer work the compiler cannot remove.
func spin(n int) {
	x := sink | 1
	for i := 0; i < n; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	sink = x
}

// calibrate returns the rounds of spin that take d on this CPU: the fastest of several
// measurements, so a stall during calibration does not shrink the slices.
func calibrate(d time.Duration) int {
	const n = 1 << 16
	best := time.Duration(1 << 62)
	for i := 0; i < 20; i++ {
		start := time.Now()
		spin(n)
		best = min(best, time.Since(start))
	}
	return max(1, int(float64(n)*float64(d)/float64(best)))
}

func summary(t0 time.Time, excess []time.Duration, stalls int, stalled time.Duration) {
	sort.Slice(excess, func(i, j int) bool { return excess[i] < excess[j] })
	q := func(p float64) int64 {
		if len(excess) == 0 {
			return 0
		}
		return excess[min(len(excess)-1, int(p*float64(len(excess))))].Microseconds()
	}
	fmt.Printf("summary,%.1f s,%d samples,lateness p50 %d µs p99 %d µs p99.9 %d µs max %d µs,%d stalls,%.1f ms stalled\n",
		time.Since(t0).Seconds(), len(excess), q(.5), q(.99), q(.999), q(1), stalls, float64(stalled.Microseconds())/1000)
}
