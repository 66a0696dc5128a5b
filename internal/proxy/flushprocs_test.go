package proxy

import (
	"testing"

	"github.com/condense-dev/condense/internal/flush"
)

func TestFlushProcsAddsSlotsOnlyToAnUnlimitedDefault(t *testing.T) {
	for _, tc := range []struct {
		name        string
		env         string
		procs, cpus int
		want        int // 0: GOMAXPROCS left alone
	}{
		{"default on 2 CPUs", "", 2, 2, 3},
		{"default on 8 CPUs", "", 8, 8, 9},
		{"GOMAXPROCS set by the user", "2", 2, 2, 0},
		{"a container CPU limit below the machine's CPUs", "", 1, 8, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			if !flush.LowersThreadPriority {
				want = 0 // nice has no effect here: nothing to make room for
			}
			got, ok := flushProcsFor(1, tc.env, tc.procs, tc.cpus)
			if !ok {
				got = 0
			}
			if got != want {
				t.Fatalf("GOMAXPROCS = %d (ok %v), want %d", got, ok, want)
			}
		})
	}
}
