// Package poll waits in tests for a condition another goroutine or process brings about.
package poll

import (
	"testing"
	"time"
)

// Until polls cond every 100ms until it returns true, or fails t once timeout has passed,
// quoting the last non-empty detail cond gave.
func Until(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if detail != "" {
			last = detail
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last: %s", timeout, what, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
