//go:build linux

package flush

import (
	"runtime"
	"syscall"
)

// LowersThreadPriority reports whether InProcess.Nice takes effect on this platform.
const LowersThreadPriority = true

// lowerThreadPriority locks the calling goroutine to its OS thread for good and raises that
// thread's nice value by nice; on failure the priority is unchanged and the error returned.
func lowerThreadPriority(nice int) error {
	runtime.LockOSThread()
	return syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), nice)
}
