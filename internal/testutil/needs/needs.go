// Package needs reports a test's missing dependency (a tool such as redis-server, the corpus):
// the test skips, or fails where $CONDENSE_REQUIRE_TOOLS is 1, as hack/test.sh (make test, CI)
// sets it so that a broken install fails the suite instead of silently skipping tests.
package needs

import (
	"os"
	"testing"
)

// EnvRequire is the environment variable that turns a missing dependency into a failure.
const EnvRequire = "CONDENSE_REQUIRE_TOOLS"

// Required reports whether $CONDENSE_REQUIRE_TOOLS asks for every dependency to be present.
func Required() bool { return os.Getenv(EnvRequire) == "1" }

// Missing skips tb with the formatted reason, or fails it when Required.
func Missing(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if Required() {
		tb.Fatalf(format+" (and "+EnvRequire+"=1 requires it)", args...)
	}
	tb.Skipf(format, args...)
}
