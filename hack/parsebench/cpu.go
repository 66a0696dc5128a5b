package parsebench

import "syscall"

// cpuNanos is the process's user+system CPU time: on a shared machine it is inflated less
// by other jobs than wall time.
func cpuNanos() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
