package pruner

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/condense-dev/condense/internal/wire"
)

// summaryMemoMaxBytes bounds the summary text the summary block memo holds; past it the memo
// starts over.
const summaryMemoMaxBytes = 16 << 20

// summaryMemo maps a summary's or observation stub's text, format and form to its immutable
// text block, shared across requests and goroutines (docs/design/engine.md).
var summaryMemo = struct {
	mu    sync.Mutex
	m     map[summaryMemoKey]*wire.Block
	bytes int
}{m: map[summaryMemoKey]*wire.Block{}}

type summaryMemoKey struct {
	f    wire.Format
	str  bool
	text string
}

// summaryBlock returns wire.NewTextBlock(f, text), memoised.
func summaryBlock(f wire.Format, text string) *wire.Block { return textBlock(f, false, text) }

// textBlock returns a text block of format f holding text, memoised: in string form (content
// that is a JSON string, except in Responses, where it is a part) when str is set, else
// wire.NewTextBlock(f, text).
func textBlock(f wire.Format, str bool, text string) *wire.Block {
	k := summaryMemoKey{f, str && f != wire.Responses, text}
	summaryMemo.mu.Lock()
	b, ok := summaryMemo.m[k]
	summaryMemo.mu.Unlock()
	if ok {
		return b
	}
	if k.str {
		b = wire.NewTextMessage(f, wire.RoleUser, text).Blocks[0]
	} else {
		b = wire.NewTextBlock(f, text)
	}
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

// shownSummary is how a summary text is shown in one format: a text block (Anthropic) or a
// user message (OpenAI, Responses).
type shownSummary struct {
	f    wire.Format
	text string
	b    *wire.Block
	m    *wire.Message
}

// shownIn returns how the summary is shown in format f, cached on the summary together with
// the text it was made from, so a copy with another text builds its own.
func (s *Summary) shownIn(f wire.Format) *shownSummary {
	if p := (*shownSummary)(atomic.LoadPointer(&s.shown)); p != nil && p.f == f && p.text == s.Text {
		return p
	}
	p := &shownSummary{f: f, text: s.Text}
	if f == wire.Anthropic {
		p.b = summaryBlock(f, s.Text)
	} else {
		p.m = wire.NewTextMessage(f, wire.RoleUser, s.Text)
	}
	atomic.StorePointer(&s.shown, unsafe.Pointer(p))
	return p
}
