//go:build !linux

package flush

import "errors"

// LowersThreadPriority reports whether InProcess.Nice takes effect on this platform.
const LowersThreadPriority = false

// lowerThreadPriority is only implemented on Linux, where scheduling priority is per thread.
func lowerThreadPriority(int) error { return errors.ErrUnsupported }
