package pruner

// BatchKind says which prompt shape a Batch carries.
type BatchKind string

const (
	// KindBatch is a per-batch prompt over serialized tool calls with [[N:tool]] labels.
	KindBatch BatchKind = "batch"
	// KindRangeFusion is a range-fusion prompt over a chain's per-batch summaries.
	KindRangeFusion BatchKind = "range-fusion"
)

// BatchCall is one tool call of a batch in structured form (for summarizers that do not want
// to parse Prompt). Label is its 1-based [[N:tool]] number.
type BatchCall struct {
	// Label is the 1-based label number.
	Label int
	// Key is the call's occurrence key.
	Key string
	// Tool is the tool name.
	Tool string
	// Args is the call's input JSON as sent.
	Args []byte
	// Result is the full result text.
	Result string
	// IsError is the result's error flag.
	IsError bool
}

// Batch is one summarizer call a flush needs. Outputs are passed back to Plan.Apply keyed by ID.
type Batch struct {
	// ID identifies the batch within its plan ("s<N>" for batches, "r:<N>" for range fusion).
	ID string
	// Kind is the prompt shape.
	Kind BatchKind
	// System is the instruction text (also embedded at the start of Prompt).
	System string
	// Prompt is the complete user message for an LLM summarizer.
	Prompt string
	// Keys are the occurrence keys the batch covers (range fusion: the chain's dropped keys).
	Keys []string
	// Calls carries a per-batch prompt's calls in label order (nil for range fusion).
	Calls []BatchCall
	// Parts carries a range-fusion prompt's per-batch summaries (nil for batches).
	Parts []string
	// RawChars is the UTF-16 size of the batch's results (the oversized post-check bound).
	RawChars int
}

// Blob is content the store must hold before a committed state that references it is
// persisted (see Plan.Blobs).
type Blob struct {
	// Key is the blob key within the session.
	Key string
	// Data is the content.
	Data []byte
}

// BlobKeyResult is the blob key of a record's full result text.
func BlobKeyResult(key string) string { return "result/" + key }

// BlobKeyArgs is the blob key of a record's full argument JSON.
func BlobKeyArgs(key string) string { return "args/" + key }

// BlobLookup fetches a blob by key; ok is false when it is missing.
type BlobLookup func(key string) (data []byte, ok bool)
