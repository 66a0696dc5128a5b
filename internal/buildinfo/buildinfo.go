// Package buildinfo carries the version stamped into the condense binary at link time.
package buildinfo

import "runtime/debug"

// Version is the release version, set with -ldflags "-X github.com/condense-dev/condense/internal/buildinfo.Version=v…".
var Version = "dev"

// Commit is the source commit, set at link time; when empty the VCS data the Go toolchain
// recorded (if any) is used.
var Commit = ""

// String renders the version and commit as one line.
func String() string {
	c := Commit
	if c == "" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					c = s.Value
				}
			}
		}
	}
	if c == "" {
		c = "unknown"
	}
	return "condense " + Version + " (commit " + c + ")"
}
