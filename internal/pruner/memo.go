package pruner

import (
	"sync"

	"github.com/condense-dev/condense/internal/wire"
)

// summaryMemoMaxBytes bounds the summary text the summary block memo holds; past it the memo
// starts over.
const summaryMemoMaxBytes = 16 << 20

// summaryMemo maps a summary's text (and format) to its text block. A committed summary is
// shown on every request until the next flush, and JSON-quoting its text anew each time was
// a tenth of a steady render; blocks are immutable, so requests and goroutines share them.
var summaryMemo = struct {
	mu    sync.Mutex
	m     map[summaryMemoKey]*wire.Block
	bytes int
}{m: map[summaryMemoKey]*wire.Block{}}

type summaryMemoKey struct {
	f    wire.Format
	text string
}

// summaryBlock returns wire.NewTextBlock(f, text), memoised.
func summaryBlock(f wire.Format, text string) *wire.Block {
	k := summaryMemoKey{f, text}
	summaryMemo.mu.Lock()
	b, ok := summaryMemo.m[k]
	summaryMemo.mu.Unlock()
	if ok {
		return b
	}
	b = wire.NewTextBlock(f, text)
	summaryMemo.mu.Lock()
	defer summaryMemo.mu.Unlock()
	if summaryMemo.bytes+len(text) > summaryMemoMaxBytes {
		clear(summaryMemo.m)
		summaryMemo.bytes = 0
	}
	if _, dup := summaryMemo.m[k]; !dup {
		summaryMemo.m[k] = b
		summaryMemo.bytes += len(text)
	}
	return b
}
