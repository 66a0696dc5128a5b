// Package pruner is the pure pruning engine (no I/O, no clock): state, flush planning
// (PlanFlush, Plan.Apply), the four-phase Render and recovery (Query). Results are keyed by
// occurrence key, boundaries by fingerprint, failing closed. See docs/engine.md.
package pruner
