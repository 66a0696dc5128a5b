// Package pruner is the pruning engine: session state, flush planning, the four-phase render
// and recovery. It is pure: no I/O, no network, no clock (time is passed in).
//
// The engine works on wire transcripts (internal/wire). A session's State is persisted by the
// store (MarshalBinary/UnmarshalBinary; schema in docs/state.md). The proxy calls Render on
// every request; the flush orchestrator calls PlanFlush, runs every planned Batch through a
// summarizer, stores Plan.Blobs, and calls Plan.Apply with the outputs to get the next State
// (repeating while Plan.Followup is set). The recovery tool is answered by Query / QueryAll.
//
// Identity: tool results are keyed by occurrence key (identity.OccurrenceKey: the provider id
// plus a short hash over tool name, canonical input and result text), so reused provider ids
// never conflate. Chain boundaries and summary anchors are message fingerprints (content hash
// plus ordinal among messages of the same role class) that must resolve to exactly one
// message, or nothing is applied (fail closed). See docs/engine.md.
package pruner
