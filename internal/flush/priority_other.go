//go:build !linux

package flush

import "errors"

// lowerThreadPriority is only implemented on Linux, where scheduling priority is per thread.
func lowerThreadPriority(int) error { return errors.ErrUnsupported }
