// Package logs holds the conventions of condense's structured logs that more than one
// package writes (docs/operations.md, "Logs").
package logs

import "time"

// Ms is d in milliseconds, to the microsecond: every duration in a log line is a number of
// milliseconds under a key ending in "ms" or "Ms" (never nanoseconds, never a duration string).
func Ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
