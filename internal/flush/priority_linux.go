//go:build linux

package flush

import (
	"runtime"
	"syscall"
)

// LowersThreadPriority reports whether InProcess.Nice takes effect on this platform.
const LowersThreadPriority = true

// lowerThreadPriority locks the calling goroutine to its OS thread and raises that thread's
// nice value to nice (Linux scheduling priority is per thread). The thread is never unlocked,
// so it is discarded when the goroutine exits and the lowered priority never leaks into the
// runtime's thread pool. A failure (say, a sandbox forbidding setpriority) leaves the priority
// as it was and is reported.
func lowerThreadPriority(nice int) error {
	runtime.LockOSThread()
	return syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), nice)
}
