// Package wire parses Anthropic Messages, OpenAI Chat Completions and OpenAI Responses request
// bodies into one immutable transcript model and serializes it byte-faithfully: untouched
// messages, blocks and members keep their bytes (docs/design/wire.md, "The model").
package wire

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cespare/xxhash/v2"
)

// Role is a message role: "user", "assistant", "system", "developer", "tool", or any other
// raw value found in the request.
type Role string

// Well-known roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleSystem    Role = "system"
	RoleDeveloper Role = "developer"
	RoleTool      Role = "tool"
)

// Kind classifies a content block.
type Kind uint8

// Block kinds. Anything the model does not know is KindUnknown and is kept raw.
const (
	KindUnknown             Kind = iota // any other block or part, kept raw
	KindText                            // text block / OpenAI text part / string content
	KindImage                           // image block / OpenAI image_url part
	KindDocument                        // document block / OpenAI file part
	KindThinking                        // thinking block (Text, Signature)
	KindRedactedThinking                // redacted_thinking block
	KindToolUse                         // tool_use block / OpenAI tool_calls entry
	KindToolResult                      // tool_result block / OpenAI tool message
	KindServerToolUse                   // server_tool_use block
	KindWebSearchToolResult             // web_search_tool_result block (ID = tool_use_id)
	KindReasoning                       // Responses reasoning item (Text = summary, Signature = encrypted_content), kept raw
)

var kindNames = [...]string{"unknown", "text", "image", "document", "thinking", "redacted_thinking",
	"tool_use", "tool_result", "server_tool_use", "web_search_tool_result", "reasoning"}

// String returns the kind's name in Anthropic spelling ("tool_use", ...).
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Request is a parsed provider request body.
type Request struct {
	Format   Format
	Model    string     // the "model" member ("" when absent)
	Stream   bool       // the "stream" member
	System   []*Block   // Anthropic top-level system (string form = one text block); OpenAI, Responses: nil ("instructions" stays a plain member)
	Tools    []*Tool    // the "tools" array
	Messages []*Message // the "messages" array (Responses: the "input" items, see Message)

	body     []byte
	objEnd   int      // offset just past the top-level object in body
	obj      *object  // top-level object (differs from body after SetField)
	members  []member // obj's members
	fieldMod bool     // obj was changed by a test's SetField
	msgsArr  *array
	sysArr   *array
	toolsArr *array
	sysStr   bool // system was a JSON string
	inputStr bool // Responses: input was a JSON string (Messages[0] stands for it)
	reused   int  // leading messages shared from ParseReusing's previous request
	// Where the parsed values live (retained.go): the messages by runs, each tool, the system.
	msgHomes  []homeRun
	toolHomes []*backing
	sysHome   *backing
	retained  int // RetainedBytes

	origModel    string
	origStream   bool
	origSystem   []*Block
	origTools    []*Tool
	origMessages []*Message
}

// Message is one entry of the messages array.
type Message struct {
	// shapeSum caches ShapeSum (0: not computed yet; the sum is never 0), read and written
	// atomically; first, so 64-bit aligned on 32-bit platforms.
	shapeSum uint64

	Role Role
	// Blocks is the content, one block per content block, part, tool call or Responses item
	// (docs/design/wire.md, "The model", says how each format maps).
	Blocks []*Block
	// StringContent is true when content was a JSON string (then Blocks holds one KindText
	// block, or for an OpenAI tool message the result block has ContentString).
	StringContent bool

	f           Format
	constructed bool
	hasContent  bool
	obj         *object
	contentArr  *array
	callsArr    *array // OpenAI tool_calls
	itemsArr    *array // Responses assistant message: the spans of its items in obj.raw
	// blocksMemo is the *blocksMemo of the last WithBlocks call (nil before one), read and
	// written atomically.
	blocksMemo unsafe.Pointer
	// hashMemo is the *string SetHashMemo remembered (nil before one), read and written
	// atomically.
	hashMemo unsafe.Pointer
}

// Block is one content block (Anthropic) or content part / tool call / tool message
// (OpenAI).
type Block struct {
	// idSum caches IdentitySum (0: not computed yet), read and written atomically (a parsed
	// block is shared by the requests that reuse it and their flushes); first, so 64-bit
	// aligned on 32-bit platforms.
	idSum uint64
	f     Format
	// textEsc is set when text is the body of a JSON string literal with escapes (between its
	// quotes) that Text decodes on first use, into textDec.
	textEsc bool

	Kind    Kind
	IsError bool
	// ContentString is set when the tool_result content was a JSON string (see Content).
	ContentString bool
	Type          string // the raw "type" value
	text          string // Text, or the literal body it decodes from (textEsc)
	Signature     string // thinking signature
	// ID is the tool_use / server_tool_use / OpenAI tool_call id; for results, the id they
	// answer (tool_use_id, tool_call_id).
	ID string
	// Name is the tool name. For tool results it is filled at parse time from the nearest
	// preceding tool call with the same id in the same request ("" when there is none).
	Name string
	// Input is the tool_use input JSON as sent (OpenAI: the decoded arguments string).
	Input []byte
	// Content is the tool_result content (string form = one text block, ContentString).
	Content      []*Block
	CacheControl []byte // raw cache_control JSON, nil when absent

	obj        *object // nil for string-form blocks
	str        []byte  // JSON string literal of a string-form text block
	fn         *object // OpenAI tool call: the "function" object
	contentArr *array  // tool_result content array separators
	// resultMemo is the *textMemo of the last WithResultText call (nil before one), read and
	// written atomically.
	resultMemo unsafe.Pointer
	// pairMemo is the *pairMemo of the last SetPairMemo call (nil before one), read and
	// written atomically.
	pairMemo unsafe.Pointer
	// textDec is the *string Text decoded (textEsc; nil before), read and written atomically.
	textDec unsafe.Pointer
}

// Text returns the text of a text block or part, the thinking text of a thinking block, the
// summary of a Responses reasoning item ("" for other blocks). Texts with escapes are decoded
// on first use (docs/design/wire.md, "Lazy texts").
func (b *Block) Text() string {
	if !b.textEsc {
		return b.text
	}
	if p := (*string)(atomic.LoadPointer(&b.textDec)); p != nil {
		return *p
	}
	s := bodyString(appendDecoded(nil, b.text))
	atomic.StorePointer(&b.textDec, unsafe.Pointer(&s)) // racing callers store equal strings
	return s
}

// setText sets the text: s itself, or with escaped set the body of a string literal that
// Text decodes.
func (b *Block) setText(s string, escaped bool) { b.text, b.textEsc = s, escaped }

// peekText returns b's text: Text when it is at hand, else the text decoded into *scratch,
// valid until *scratch is written again.
func (b *Block) peekText(scratch *[]byte) string {
	if !b.textEsc || atomic.LoadPointer(&b.textDec) != nil {
		return b.Text()
	}
	*scratch = appendDecoded((*scratch)[:0], b.text)
	return bodyString(*scratch)
}

// scratch holds buffers for peekText (getScratch, putScratch).
var scratch = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

func getScratch() *[]byte { return scratch.Get().(*[]byte) }

// putScratch returns p to the pool unless it grew past 1 MiB.
func putScratch(p *[]byte) {
	if cap(*p) <= 1<<20 {
		scratch.Put(p)
	}
}

// pairMemo remembers one value derived from a block together with another block.
type pairMemo struct {
	with *Block
	val  string
}

// textMemo remembers one WithResultText result.
type textMemo struct {
	text string
	out  *Block
}

// blocksMemo remembers one WithBlocks result.
type blocksMemo struct {
	in  []*Block // a copy of the argument (also the result's Blocks)
	out *Message
}

// Tool is one entry of the tools array.
type Tool struct {
	Name         string // tool name ("name", or OpenAI "function.name"; "" when absent)
	CacheControl []byte // raw cache_control JSON, nil when absent

	f   Format
	raw []byte
}

// Raw returns the tool's JSON bytes.
func (t *Tool) Raw() []byte { return t.raw }

// Raw returns the original body.
func (r *Request) Raw() []byte { return r.body }

// Raw returns the message's JSON bytes; nil for messages made by NewTextMessage. For a
// Responses assistant message they are its run of input items (not one JSON value).
func (m *Message) Raw() []byte {
	if m.constructed {
		return nil
	}
	return m.obj.raw
}

// Bytes returns the JSON bytes this message serializes to (for every message, including
// constructed ones).
func (m *Message) Bytes() []byte { return m.obj.raw }

// Format returns the wire format the message belongs to.
func (m *Message) Format() Format { return m.f }

// Raw returns the block's JSON bytes: the block object, the JSON string of a string-form
// text block, the tool_calls entry of an OpenAI tool call, the whole message object of an
// OpenAI tool result, or the input item of a Responses assistant or tool message block.
func (b *Block) Raw() []byte {
	if b.obj != nil {
		return b.obj.raw
	}
	return b.str
}

// EachMember calls fn with the raw key (quoted, as sent) and raw value of each member of the
// block's JSON object, in order. A string-form text block has no members.
func (b *Block) EachMember(fn func(key, value []byte)) {
	if b.obj != nil {
		b.obj.each(fn)
	}
}

// EachMember calls fn with the raw key (quoted, as sent) and raw value of each member of the
// message's JSON object, in order. A Responses assistant message (a run of items) has none.
func (m *Message) EachMember(fn func(key, value []byte)) {
	if m.itemsArr == nil {
		m.obj.each(fn)
	}
}

// Format returns the wire format the block belongs to.
func (b *Block) Format() Format { return b.f }

// IsStringForm reports whether the block is the JSON-string form of text content (a string
// message content or string tool_result content) rather than a block object.
func (b *Block) IsStringForm() bool { return b.obj == nil }

// IdentitySum returns xxhash.Sum64String(b.ResultText()) for a tool result, else
// xxhash.Sum64(b.Input), computed once per block and cached (a memo key, not a cryptographic hash).
func (b *Block) IdentitySum() uint64 {
	if sum := atomic.LoadUint64(&b.idSum); sum != 0 {
		return sum
	}
	var sum uint64
	if b.Kind == KindToolResult {
		d := xxhash.New()
		b.eachResultPart(func(part string) { _, _ = d.WriteString(part) })
		sum = d.Sum64()
	} else {
		sum = xxhash.Sum64(b.Input)
	}
	atomic.StoreUint64(&b.idSum, sum) // racing callers store the same value; a sum of 0 is not kept
	return sum
}

// PairMemo returns the value SetPairMemo last remembered on b for the pair (b, with); a modified
// copy of b starts without one.
func (b *Block) PairMemo(with *Block) (string, bool) {
	if m := (*pairMemo)(atomic.LoadPointer(&b.pairMemo)); m != nil && m.with == with {
		return m.val, true
	}
	return "", false
}

// SetPairMemo remembers val for the pair (b, with) in place of any earlier value. Callers
// racing on a shared block must store the same value for the same pair.
func (b *Block) SetPairMemo(with *Block, val string) {
	atomic.StorePointer(&b.pairMemo, unsafe.Pointer(&pairMemo{with: with, val: val}))
}

// HashMemo returns the value SetHashMemo remembered on m (identity.MessageHash's); a modified copy
// starts without one.
func (m *Message) HashMemo() (string, bool) {
	if p := (*string)(atomic.LoadPointer(&m.hashMemo)); p != nil {
		return *p, true
	}
	return "", false
}

// SetHashMemo remembers val on m in place of any earlier value; only identity.MessageHash sets it,
// and racing callers must store the same value.
func (m *Message) SetHashMemo(val string) {
	atomic.StorePointer(&m.hashMemo, unsafe.Pointer(&val))
}

// ShapeSum is a structural fingerprint of the message from its decoded fields, O(blocks) and
// cached. Session states store it (docs/state.md): its definition must not change.
func (m *Message) ShapeSum() uint64 {
	if h := atomic.LoadUint64(&m.shapeSum); h != 0 {
		return h
	}
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	num := func(n int) {
		for i := 0; i < 8; i++ {
			h ^= uint64(byte(n >> (8 * i)))
			h *= prime
		}
	}
	bytes := func(s string) {
		for i := 0; i < len(s); i++ {
			h ^= uint64(s[i])
			h *= prime
		}
	}
	str := func(s string) {
		num(len(s))
		if len(s) > 64 {
			bytes(s[:32])
			bytes(s[len(s)-32:])
			return
		}
		bytes(s)
	}
	sp := getScratch()
	defer putScratch(sp)
	str(string(m.Role))
	num(len(m.Blocks))
	for _, b := range m.Blocks {
		num(int(b.Kind))
		str(b.Type)
		str(b.peekText(sp))
		str(b.Signature)
		str(b.ID)
		str(b.Name)
		if b.IsError {
			num(1)
		}
		num(len(b.Content))
		for _, c := range b.Content {
			num(int(c.Kind))
			str(c.peekText(sp))
		}
	}
	if h == 0 {
		h = 1
	}
	atomic.StoreUint64(&m.shapeSum, h) // racing callers store the same value
	return h
}

// ResultTextLen returns len(b.ResultText()) without building the text.
func (b *Block) ResultTextLen() int {
	n := 0
	b.eachResultPart(func(part string) { n += len(part) })
	return n
}

// eachResultPart calls fn with the pieces of ResultText in order: each text part of the
// content, with a "\n" piece between two of them (which fn must not keep).
func (b *Block) eachResultPart(fn func(part string)) {
	sp := getScratch()
	defer putScratch(sp)
	first := true
	for _, c := range b.Content {
		if c.Kind != KindText {
			continue
		}
		if !first {
			fn("\n")
		}
		first = false
		fn(c.peekText(sp))
	}
}

// ResultText returns the text parts of a tool result's content joined with "\n".
func (b *Block) ResultText() string {
	if len(b.Content) == 1 && b.Content[0].Kind == KindText {
		return b.Content[0].Text()
	}
	return bodyString(b.AppendResultText(nil))
}

// AppendResultText appends ResultText to dst.
func (b *Block) AppendResultText(dst []byte) []byte {
	b.eachResultPart(func(part string) { dst = append(dst, part...) })
	return dst
}

// encodeElem writes the block as an array element (a string-form block becomes a text
// block object, for Responses an input_text part).
func (b *Block) encodeElem(e *encoder) {
	if b.obj != nil {
		e.raw(b.obj.raw)
		return
	}
	prefix := `{"type":"text","text":`
	if b.f == Responses {
		prefix = `{"type":"input_text","text":`
	}
	e.buf = append(e.buf, prefix...)
	e.raw(b.str)
	e.byte('}')
}
