package needs

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMissingSkipsOrFails runs itself as a child process that calls Missing: the child test
// is skipped without $CONDENSE_REQUIRE_TOOLS and fails with it set to 1.
func TestMissingSkipsOrFails(t *testing.T) {
	if os.Getenv("NEEDS_TEST_CHILD") == "1" {
		Missing(t, "the %s is missing", "frobnicator")
		return
	}
	for _, tc := range []struct {
		require  string
		wantFail bool
		want     string
	}{
		{"", false, "--- SKIP: TestMissingSkipsOrFails"},
		{"0", false, "--- SKIP: TestMissingSkipsOrFails"},
		{"1", true, "--- FAIL: TestMissingSkipsOrFails"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestMissingSkipsOrFails$", "-test.v")
		cmd.Env = append(os.Environ(), "NEEDS_TEST_CHILD=1", EnvRequire+"="+tc.require)
		out, err := cmd.CombinedOutput()
		if (err != nil) != tc.wantFail || !strings.Contains(string(out), tc.want) || !strings.Contains(string(out), "the frobnicator is missing") {
			t.Errorf("%s=%q: err %v, output:\n%s", EnvRequire, tc.require, err, out)
		}
	}
}
