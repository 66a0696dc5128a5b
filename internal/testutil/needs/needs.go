// Package needs lets a test report that something it depends on (a tool such as
// redis-server or kube-apiserver, the agent-session corpus) is missing: the test is skipped
// on a developer's machine, and fails where $CONDENSE_REQUIRE_TOOLS is 1. hack/test.sh (so
// `make test` and CI) installs every tool and sets it, so a broken install or a renamed
// corpus file fails the suite instead of passing it with tests silently skipped.
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
