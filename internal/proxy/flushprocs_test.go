package proxy

import (
	"os"
	"runtime"
	"testing"

	"github.com/condense-dev/condense/internal/flush"
)

func TestFlushProcsAddsSlotsUnlessGOMAXPROCSIsSet(t *testing.T) {
	t.Setenv("GOMAXPROCS", "") // restored after the test
	os.Unsetenv("GOMAXPROCS")
	procs, ok := flushProcs(2)
	if ok != flush.LowersThreadPriority {
		t.Fatalf("ok = %v on a platform where lowering thread priority is %v", ok, flush.LowersThreadPriority)
	}
	if ok && procs != runtime.GOMAXPROCS(0)+2 {
		t.Fatalf("procs = %d, want GOMAXPROCS %d + 2 flush slots", procs, runtime.GOMAXPROCS(0))
	}

	t.Setenv("GOMAXPROCS", "3")
	if procs, ok := flushProcs(2); ok {
		t.Fatalf("a GOMAXPROCS the user set must be kept, got %d", procs)
	}
}
