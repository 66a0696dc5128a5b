package wire

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// Parse parses a request body of format f; malformed input yields an error matching ErrInvalid
// (*SyntaxError with the offset, or *SchemaError). It never panics or modifies body, and the
// request refers to body (docs/design/wire.md, "Memory"): the caller must not modify it afterwards.
func Parse(f Format, body []byte) (*Request, error) {
	return parse(f, body, nil)
}

// ParseReusing is Parse for the next request of a conversation parsed as prev (nil or another
// format: none): prev's unchanged leading messages, tools and system are shared, not parsed; the
// result equals Parse's (docs/design/wire.md, "Reusing parses").
func ParseReusing(f Format, body []byte, prev *Request) (*Request, error) {
	if prev != nil && prev.Format != f {
		prev = nil
	}
	return parse(f, body, prev)
}

// ReusedMessages returns how many leading messages ParseReusing took from the previous
// request instead of parsing them (0 for Parse).
func (r *Request) ReusedMessages() int { return r.reused }

func parse(f Format, body []byte, prev *Request) (*Request, error) {
	if f != Anthropic && f != OpenAI && f != Responses {
		return nil, fmt.Errorf("wire: unknown format %d", uint8(f))
	}
	p := &parser{d: body, f: f, prev: prev, home: &backing{}}
	s := stackPool.Get().(*stacks)
	p.blkStack, p.spanStack, p.msgStack = s.blk, s.span, s.msg
	r, err := p.request()
	s.put(p)
	if err != nil && isSchema(err) {
		// A shape problem was found before the end of the body: report bytes that are
		// not JSON first, so the error class does not depend on scan order.
		if serr := validJSON(body); serr != nil {
			return nil, serr
		}
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

type parser struct {
	d      []byte
	f      Format
	prev   *Request // ParseReusing: the previous request whose identical values are shared
	chunks int      // slab chunks allocated so far (reusing parse)
	at     int      // offset of the object or array the parse last started
	home   *backing // the memory this parse's values keep alive (retained.go)

	// Slabs: thousands of small values per request come from a few chunk allocations.
	blocks     slab[Block]
	objs       slab[object]
	arrs       slab[array]
	msgs       slab[Message]
	blocksSlab []*Block
	blkStack   []*Block // blocks of the lists being parsed
	spanSlab   []span
	spanStack  []span     // element spans of the arrays being parsed
	msgStack   []*Message // the messages of the list being parsed
}

// stacks are the working stacks of a parser, which later parses reuse (stackPool).
type stacks struct {
	blk  []*Block
	span []span
	msg  []*Message
}

var stackPool = sync.Pool{New: func() any { return new(stacks) }}

// put returns p's stacks to the pool, emptied (their values no longer pinned), unless they
// grew past 64Ki entries.
func (s *stacks) put(p *parser) {
	const most = 1 << 16
	if cap(p.blkStack) > most || cap(p.spanStack) > most || cap(p.msgStack) > most {
		return
	}
	clear(p.blkStack[:cap(p.blkStack)])
	clear(p.msgStack[:cap(p.msgStack)])
	s.blk, s.span, s.msg = p.blkStack[:0], p.spanStack[:0], p.msgStack[:0]
	stackPool.Put(s)
}

// slab hands out values of T from chunks allocated for many at a time.
type slab[T any] struct {
	free   []T
	n      int   // values in the chunks allocated so far
	chunks [][]T // a reusing parse's chunks, for sweep
}

// take returns the next value of s, allocating a chunk (see parser.chunk; n is the first
// chunk's size in a large body) when s is used up.
func take[T any](p *parser, s *slab[T], n int) *T {
	if len(s.free) == 0 {
		c := newSlab[T](p, p.chunk(n, s.n))
		s.n += len(c)
		if p.prev != nil {
			s.chunks = append(s.chunks, c)
		}
		s.free = c
	}
	v := &s.free[0]
	s.free = s.free[1:]
	return v
}

// chunk is the size of the next slab chunk after taken values, n values for the first chunk
// (docs/design/wire.md, "Parse memory").
func (p *parser) chunk(n, taken int) int {
	if p.prev == nil {
		rest := len(p.d) - p.at
		if taken == 0 || p.at <= 0 {
			return max(8, min(n, len(p.d)/8))
		}
		want := taken * rest / p.at
		return max(8, min(want+want/16+8, taken, rest/8))
	}
	p.chunks++
	return max(4, n>>4<<min(p.chunks/8, 4))
}

// newSlab allocates a slab of n values, counted in the parse's memory.
func newSlab[T any](p *parser, n int) []T {
	var zero T
	p.keep(n * int(unsafe.Sizeof(zero)))
	return make([]T, n)
}

func (p *parser) newMessage() *Message {
	m := take(p, &p.msgs, 64)
	m.f = p.f
	return m
}

func (p *parser) newBlock() *Block {
	b := take(p, &p.blocks, 128)
	b.f = p.f
	return b
}

// blockSlice copies bs into slab memory (nil when empty).
func (p *parser) blockSlice(bs []*Block) []*Block {
	if len(bs) == 0 {
		return nil
	}
	return slabCopy(p, &p.blocksSlab, bs, 512)
}

// slabCopy copies s into the slab memory *free, first refilled with a chunk (n values for the
// first) when short; capacity == length, so appends by callers copy.
func slabCopy[T any](p *parser, free *[]T, s []T, n int) []T {
	if len(*free) < len(s) {
		*free = newSlab[T](p, max(p.chunk(n, 0), len(s)))
	}
	out := (*free)[:len(s):len(s)]
	copy(out, s)
	*free = (*free)[len(s):]
	return out
}

// objectAt parses the object at d[i] == '{' into slab memory, calling fn (nil: scanValue)
// to parse each member's value.
func (p *parser) objectAt(i, depth int, fn func(keyStart, keyEnd, valStart int) (int, error)) (*object, int, error) {
	p.at = i
	o := take(p, &p.objs, 128)
	d := p.d
	// scanObject's walk, with the member calls direct rather than through a closure.
	end, err := objectOpen(d, i, depth)
	for err == nil && d[end-1] != '}' {
		var ks, ke, vs, ve int
		if ks, ke, vs, err = memberKey(d, end); err != nil {
			break
		}
		if fn != nil {
			ve, err = fn(ks, ke, vs)
		} else {
			ve, err = scanValue(d, vs, depth)
		}
		if err != nil {
			break
		}
		end, err = memberNext(d, ve)
	}
	if err != nil {
		return nil, 0, err
	}
	o.raw = d[i:end:end]
	return o, end, nil
}

// text decodes a validated JSON string literal: the body's own bytes without escapes (Parse
// never copies them), else a string of its own.
func (p *parser) text(lit []byte) string {
	s := lit[1 : len(lit)-1]
	if !hasBackslash(s) {
		return bodyString(s)
	}
	p.keep(len(s))
	return decoded(bodyString(s))
}

// noZeroBytes returns an empty slice with room for at least n bytes whose memory is not
// cleared (strings.Builder.Grow's allocation): for buffers of which only the bytes written
// are read.
func noZeroBytes(n int) []byte {
	var b strings.Builder
	b.Grow(n)
	b.WriteByte(0) // so that String has the buffer's address
	return unsafe.Slice(unsafe.StringData(b.String()), b.Cap())[:0]
}

// decodeU decodes the \uXXXX escape (or surrogate pair) at the start of s, returning the
// UTF-8 bytes appended to dst and the number of input bytes used.
func decodeU(s, dst []byte) ([]byte, int) {
	r := rune(hex4(s[2:6]))
	if utf16.IsSurrogate(r) {
		if len(s) >= 12 && s[6] == '\\' && s[7] == 'u' {
			if r2 := utf16.DecodeRune(r, rune(hex4(s[8:12]))); r2 != utf8.RuneError {
				return utf8.AppendRune(dst, r2), 12
			}
		}
		r = utf8.RuneError
	}
	return utf8.AppendRune(dst, r), 6
}

// lazyText returns the body of the validated string literal lit and whether it has escapes,
// for setText.
func lazyText(lit []byte) (string, bool) {
	body := lit[1 : len(lit)-1]
	return bodyString(body), hasBackslash(body)
}

// appendText appends the text s stands for: s itself, or when escaped the decoding of the
// string literal body s.
func appendText(dst []byte, s string, escaped bool) []byte {
	if escaped {
		return appendDecoded(dst, s)
	}
	return append(dst, s...)
}

// textBlock returns the string-form text block of the string literal lit (esc: it has
// escapes).
func (p *parser) textBlock(lit []byte, esc bool) *Block {
	c := p.newBlock()
	c.Kind, c.Type, c.str = KindText, "text", lit
	c.setText(bodyString(lit[1:len(lit)-1]), esc)
	return c
}

func (p *parser) schemaErr(off int, path jpath, format string, args ...any) error {
	return &SchemaError{Offset: int64(off), Path: path.String(), Msg: fmt.Sprintf(format, args...)}
}

func keyIs(d []byte, ks, ke int, name string) bool {
	return keyMatch(d[ks:ke], name)
}

// keyMatch reports whether the validated string literal lit decodes to name (without
// decoding it unless it holds an escape).
func keyMatch(lit []byte, name string) bool {
	body := lit[1 : len(lit)-1]
	if len(body) <= len(name) {
		return len(body) == len(name) && string(body) == name
	}
	if len(name) > 0 && body[0] != '\\' && body[0] != name[0] {
		return false // the first byte decodes to itself
	}
	return hasBackslash(body) && unquote(lit) == name
}

func isSchema(err error) bool {
	var se *SchemaError
	return errors.As(err, &se)
}

// wrongType validates the value at vs and returns a SchemaError naming the expected type
// (or the syntax error when the value is not even JSON).
func (p *parser) wrongType(vs, depth int, path jpath, want string) error {
	if _, err := scanValue(p.d, vs, depth); err != nil {
		return err
	}
	return p.schemaErr(vs, path, "expected %s, found %s", want, jsonType(p.d[vs]))
}

func jsonType(c byte) string {
	switch c {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

func (p *parser) request() (*Request, error) {
	d := p.d
	i := skipWS(d, 0)
	if i >= len(d) {
		return nil, synErr(i, "empty body")
	}
	if d[i] != '{' {
		if err := validJSON(d); err != nil {
			return nil, err
		}
		return nil, p.schemaErr(i, jpath{}, "request body must be a JSON object, found %s", jsonType(d[i]))
	}
	r := &Request{Format: p.f, body: d}
	var err error
	obj, end, err := p.objectAt(i, 1, func(ks, ke, vs int) (int, error) {
		ve, err := p.topMember(r, ks, ke, vs)
		r.members = append(r.members, member{k: ks - i, ke: ke - i, v: vs - i, e: ve - i})
		return ve, err
	})
	if err != nil {
		return nil, err
	}
	if j := skipWS(d, end); j != len(d) {
		return nil, synErr(j, "unexpected data after top-level value")
	}
	r.obj = obj
	r.objEnd = end
	fillResultNames(r.Messages, r.reused)
	if p.prev != nil {
		fv := r.detach(p.prev)
		p.keep(fv.copied)
		r.unslab(p.prev)
		p.sweep()
	} else {
		p.keep(cap(d)) // the values of a whole parse live in the body (all of its array)
	}
	r.origModel, r.origStream = r.Model, r.Stream
	// Private copies, so that even an in-place element assignment (r.Messages[i] = m) is
	// seen by modified.
	r.origSystem = append([]*Block(nil), r.System...)
	r.origTools = append([]*Tool(nil), r.Tools...)
	r.origMessages = append([]*Message(nil), r.Messages...)
	r.retained = r.countRetained(p.home, p.prev == nil)
	return r, nil
}

// topMember parses the value at d[vs] of the request's top-level member with the key at
// d[ks:ke] into r.
func (p *parser) topMember(r *Request, ks, ke, vs int) (int, error) {
	d := p.d
	switch {
	case keyIs(d, ks, ke, "model"):
		m, e, err := p.stringAt(vs, 1, root("model"))
		r.Model = m
		return e, err
	case keyIs(d, ks, ke, "stream"):
		// OpenAI documents stream as "boolean or null" (null: the default, false);
		// Anthropic as a boolean.
		if vs < len(d) && (d[vs] == 't' || d[vs] == 'f' || d[vs] == 'n' && p.f != Anthropic) {
			e, err := scanValue(d, vs, 1)
			if err != nil {
				return 0, err
			}
			r.Stream = d[vs] == 't'
			return e, nil
		}
		if p.f != Anthropic {
			return 0, p.wrongType(vs, 1, root("stream"), "boolean or null")
		}
		return 0, p.wrongType(vs, 1, root("stream"), "boolean")
	case p.f == Responses && keyIs(d, ks, ke, "input"):
		return p.responsesInput(r, vs)
	case p.f != Responses && keyIs(d, ks, ke, "messages"):
		if vs >= len(d) || d[vs] != '[' {
			return 0, p.wrongType(vs, 1, root("messages"), "array")
		}
		var prevMsgs []*Message
		if p.prev != nil {
			prevMsgs = p.prev.origMessages
		}
		base := len(p.msgStack)
		r.reused = 0
		arr, end, err := p.ownList(vs, func(idx, es int) (int, error) {
			if idx == r.reused && idx < len(prevMsgs) {
				// Longest identical prefix: a JSON object ends where its bytes end, so
				// identical bytes at es are the same message.
				if raw := prevMsgs[idx].obj.raw; bytes.HasPrefix(d[es:], raw) {
					p.msgStack = append(p.msgStack, prevMsgs[idx])
					r.reused++
					return es + len(raw), nil
				}
			}
			path := root("messages").at(idx)
			if d[es] != '{' {
				return 0, p.wrongType(es, 2, path, "object")
			}
			var m *Message
			var e int
			var err error
			if p.f == Anthropic {
				m, e, err = p.anthropicMessage(es, 3, path)
			} else {
				m, e, err = p.openAIMessage(es, 3, path)
			}
			if err != nil {
				return 0, err
			}
			p.msgStack = append(p.msgStack, m)
			return e, nil
		})
		r.Messages = p.messageList(base)
		if err != nil {
			return 0, err
		}
		r.msgsArr = arr
		r.msgHomes = p.messageHomes(r.reused, len(r.Messages))
		return end, nil
	case keyIs(d, ks, ke, "tools"):
		if vs >= len(d) || d[vs] != '[' {
			return 0, p.wrongType(vs, 1, root("tools"), "array")
		}
		r.Tools = nil
		var prevTools []*Tool
		if p.prev != nil {
			prevTools = p.prev.origTools
		}
		arr, end, err := p.ownList(vs, func(idx, es int) (int, error) {
			if idx < len(prevTools) {
				if raw := prevTools[idx].raw; bytes.HasPrefix(d[es:], raw) {
					r.Tools = append(r.Tools, prevTools[idx])
					return es + len(raw), nil
				}
			}
			path := root("tools").at(idx)
			if d[es] != '{' {
				return 0, p.wrongType(es, 2, path, "object")
			}
			t, e, err := p.tool(es, 3, path)
			if err != nil {
				return 0, err
			}
			r.Tools = append(r.Tools, t)
			return e, nil
		})
		if err != nil {
			return 0, err
		}
		r.toolsArr = arr
		r.toolHomes = p.toolHomes(r.Tools, prevTools)
		return end, nil
	case p.f == Anthropic && keyIs(d, ks, ke, "system"):
		if pr := p.prev; pr != nil && len(pr.origSystem) > 0 {
			if raw, ok := pr.systemRaw(); ok && len(d)-vs >= len(raw) && bytes.Equal(d[vs:vs+len(raw)], raw) {
				r.System, r.sysArr, r.sysStr, r.sysHome = pr.origSystem, pr.sysArr, pr.sysStr, pr.sysHome
				return vs + len(raw), nil
			}
		}
		switch {
		case vs < len(d) && d[vs] == '"':
			e, esc, err := scanString(d, vs)
			if err != nil {
				return 0, err
			}
			r.System = p.blockSlice([]*Block{p.textBlock(d[vs:e:e], esc)})
			r.sysStr, r.sysArr, r.sysHome = true, nil, p.home
			return e, nil
		case vs < len(d) && d[vs] == '[':
			blocks, arr, end, err := p.blockList(vs, 2, root("system"), true)
			if err != nil {
				return 0, err
			}
			r.System, r.sysArr, r.sysStr, r.sysHome = blocks, arr, false, p.home
			return end, nil
		}
		return 0, p.wrongType(vs, 1, root("system"), "string or array")
	}
	return scanValue(d, vs, 1)
}

// fillResultNames sets Name on tool result blocks from the nearest preceding tool call
// with the same id. The first reused messages were shared from a previous request with the
// same leading messages, where their names were already filled: they are only read.
func fillResultNames(msgs []*Message, reused int) {
	if reused > 0 && (len(msgs)-reused)*8 < len(msgs) {
		// Few new messages after a shared prefix: look each result's call up backwards
		// (usually in the message just before) instead of indexing every call.
		for _, m := range msgs[reused:] {
			for _, b := range m.Blocks {
				if (b.Kind == KindToolResult || b.Kind == KindWebSearchToolResult) && b.Name == "" {
					b.Name = nearestCallName(msgs, b)
				}
			}
		}
		return
	}
	ix := callIndex{calls: make([]*Block, 0, len(msgs)/2)} // about one call per assistant message
	for mi, m := range msgs {
		for _, b := range m.Blocks {
			switch b.Kind {
			case KindToolUse, KindServerToolUse:
				if b.ID != "" {
					ix.add(b)
				}
			case KindToolResult, KindWebSearchToolResult:
				if mi >= reused && b.Name == "" && b.ID != "" {
					b.Name = ix.name(b.ID)
				}
			}
		}
	}
}

// callIndex finds the name of the last tool call added with a given id: a backward search of
// the latest calls, then a map of every call built when a search had to look further back.
type callIndex struct {
	calls []*Block
	byID  map[string]string
}

// callWindow is how many of the latest calls name searches without the map.
const callWindow = 16

func (x *callIndex) add(c *Block) {
	x.calls = append(x.calls, c)
	if x.byID != nil {
		x.byID[c.ID] = c.Name
	}
}

// name returns the name of the last call added with this id ("" when there is none).
func (x *callIndex) name(id string) string {
	n := len(x.calls)
	for k := n - 1; k >= 0 && k >= n-callWindow; k-- {
		if c := x.calls[k]; c.ID == id {
			return c.Name
		}
	}
	if n <= callWindow {
		return ""
	}
	if x.byID == nil {
		x.byID = make(map[string]string, n)
		for _, c := range x.calls {
			x.byID[c.ID] = c.Name
		}
	}
	return x.byID[id]
}

// nearestCallName returns the name of the last tool call with the id of result b before
// it in msgs ("" when there is none), as fillResultNames' index would.
func nearestCallName(msgs []*Message, res *Block) string {
	if res.ID == "" {
		return ""
	}
	seen := false
	for i := len(msgs) - 1; i >= 0; i-- {
		bs := msgs[i].Blocks
		for j := len(bs) - 1; j >= 0; j-- {
			b := bs[j]
			if b == res {
				seen = true
				continue
			}
			if seen && (b.Kind == KindToolUse || b.Kind == KindServerToolUse) && b.ID == res.ID {
				return b.Name
			}
		}
	}
	return ""
}

// messageList returns the messages on msgStack from base (nil for none, as Parse leaves an
// empty array) in memory of their own, and pops them.
func (p *parser) messageList(base int) []*Message {
	var ms []*Message
	if len(p.msgStack) > base {
		ms = slices.Clone(p.msgStack[base:])
	}
	clear(p.msgStack[base:])
	p.msgStack = p.msgStack[:base]
	return ms
}

// list parses the array at d[i] == '[' calling fn per element and records element spans.
func (p *parser) list(i, depth int, fn elemFunc) (*array, int, error) {
	return p.listOf(i, depth, fn, false)
}

// ownList is list for the top-level messages and tools arrays, which only their request
// keeps (later requests share the elements, not the array): their spans get an allocation
// of their own, which the request counts (countRetained), not the parse's shared memory.
func (p *parser) ownList(i int, fn elemFunc) (*array, int, error) {
	return p.listOf(i, 2, fn, true)
}

func (p *parser) listOf(i, depth int, fn elemFunc, own bool) (*array, int, error) {
	p.at = i
	a := take(p, &p.arrs, 64)
	base := len(p.spanStack)
	end, err := scanArray(p.d, i, depth, func(idx, es int) (int, error) {
		e, err := fn(idx, es)
		if err != nil {
			return 0, err
		}
		p.spanStack = append(p.spanStack, span{s: es - i, e: e - i})
		return e, nil
	})
	if err != nil {
		p.spanStack = p.spanStack[:base]
		return nil, 0, err
	}
	sp := p.spanStack[base:]
	if own && len(sp) > 0 {
		a.spans = slices.Clone(sp)
	} else if len(sp) > 0 {
		a.spans = slabCopy(p, &p.spanSlab, sp, 1024)
	}
	p.spanStack = p.spanStack[:base]
	a.raw = p.d[i:end:end]
	return a, end, nil
}

// blockList parses an array of content blocks. In strict mode a non-object element or a
// block with a schema error fails; otherwise such elements become KindUnknown blocks and
// the first schema error is returned together with a valid result.
func (p *parser) blockList(i, depth int, path jpath, strict bool) ([]*Block, *array, int, error) {
	base := len(p.blkStack)
	var deferred error
	arr, end, err := p.list(i, depth, func(idx, es int) (int, error) {
		if p.d[es] != '{' {
			e, err := scanValue(p.d, es, depth)
			if err != nil {
				return 0, err
			}
			if deferred == nil {
				deferred = p.schemaErr(es, path.at(idx), "content block must be an object, found %s", jsonType(p.d[es]))
			}
			if strict {
				return 0, deferred
			}
			p.blkStack = append(p.blkStack, &Block{f: p.f, str: p.d[es:e:e], Kind: KindUnknown})
			return e, nil
		}
		b, e, err := p.block(es, depth+1, &path, idx)
		if err != nil {
			if !isSchema(err) {
				return 0, err
			}
			if deferred == nil {
				deferred = err
			}
			if strict {
				return 0, err
			}
		}
		p.blkStack = append(p.blkStack, b)
		return e, nil
	})
	blocks := p.blockSlice(p.blkStack[base:])
	p.blkStack = p.blkStack[:base]
	if err != nil {
		return nil, nil, 0, err
	}
	return blocks, arr, end, deferred
}

func stringBlock(f Format, lit []byte) *Block {
	b := &Block{f: f, Kind: KindText, Type: "text", str: lit}
	b.setText(lazyText(lit))
	return b
}

// kindOf returns the Kind of a block whose "type" is typ in format f (KindUnknown for
// types the format does not define).
func kindOf(f Format, typ string) Kind {
	if f == Responses {
		return responsesPartKind(typ)
	}
	if f != Anthropic {
		switch typ {
		case "text":
			return KindText
		case "image_url":
			return KindImage
		case "file":
			return KindDocument
		}
		return KindUnknown
	}
	switch typ {
	case "text":
		return KindText
	case "image":
		return KindImage
	case "document":
		return KindDocument
	case "thinking":
		return KindThinking
	case "redacted_thinking":
		return KindRedactedThinking
	case "tool_use":
		return KindToolUse
	case "tool_result":
		return KindToolResult
	case "server_tool_use":
		return KindServerToolUse
	case "web_search_tool_result":
		return KindWebSearchToolResult
	}
	return KindUnknown
}

// A member the parser reads from a block or an input item, by key (fieldOf); mfNone for
// any other key.
const (
	mfNone = iota
	mfType
	mfText
	mfContent
	mfThinking
	mfSignature
	mfID
	mfName
	mfInput
	mfCacheControl
	mfToolUseID
	mfIsError
	mfRole
	mfOutput
	mfSummary
	mfCallID
	mfArguments
	mfAction
	mfEncrypted
	mfFunction
	mfCount
)

// fieldNames are the keys of the member fields, indexed by field.
var fieldNames = [mfCount]string{"", "type", "text", "content", "thinking", "signature", "id", "name",
	"input", "cache_control", "tool_use_id", "is_error", "role", "output", "summary", "call_id",
	"arguments", "action", "encrypted_content", "function"}

// fieldOf classifies the validated key literal lit (quotes included) by the string it
// decodes to: one switch on the key's own bytes, decoding it only when it has escapes.
func fieldOf(lit []byte) int {
	body := lit[1 : len(lit)-1]
	var k string
	if hasBackslash(body) {
		k = unquote(lit)
	} else {
		k = bodyString(body)
	}
	switch k {
	case "type":
		return mfType
	case "text":
		return mfText
	case "content":
		return mfContent
	case "thinking":
		return mfThinking
	case "signature":
		return mfSignature
	case "id":
		return mfID
	case "name":
		return mfName
	case "input":
		return mfInput
	case "cache_control":
		return mfCacheControl
	case "tool_use_id":
		return mfToolUseID
	case "is_error":
		return mfIsError
	case "role":
		return mfRole
	case "output":
		return mfOutput
	case "summary":
		return mfSummary
	case "call_id":
		return mfCallID
	case "arguments":
		return mfArguments
	case "action":
		return mfAction
	case "encrypted_content":
		return mfEncrypted
	case "function":
		return mfFunction
	}
	return mfNone
}

// fields is where the members of an object that the parser reads are, by field: val[f] spans
// the value of the last member of field f (e == 0: none; as object.lookup finds it), bit f of
// esc is set when that is a string with escapes. Errors name (*path)[idx] (idx < 0: *path).
type fields struct {
	val  [mfCount]span
	esc  uint32
	path *jpath
	idx  int
}

// note validates the value at d[vs] of a member of field f and notes in fs where it is.
func (p *parser) note(fs *fields, f, depth, vs int) (int, error) {
	e, err := 0, error(nil)
	fs.esc &^= 1 << f
	if f != mfNone && p.d[vs] == '"' {
		var x bool
		if e, x, err = scanString(p.d, vs); x {
			fs.esc |= 1 << f
		}
	} else {
		e, err = scanValue(p.d, vs, depth)
	}
	fs.val[f] = span{s: vs, e: e}
	return e, err
}

// value returns the raw value of field f and its offset in the body (nil when absent).
func (p *parser) value(fs *fields, f int) ([]byte, int) {
	v := fs.val[f]
	if v.e == 0 {
		return nil, 0
	}
	return p.d[v.s:v.e:v.e], v.s
}

// lit returns the body of the string field f and whether it has escapes; ok is false when it
// is absent or not a string (a schema error when strict).
func (p *parser) lit(fs *fields, f int, strict bool) (body string, escaped, ok bool, err error) {
	v, off := p.value(fs, f)
	if v == nil || v[0] != '"' && !strict {
		return "", false, false, nil
	}
	if v[0] != '"' {
		path := *fs.path
		if fs.idx >= 0 {
			path = path.at(fs.idx)
		}
		return "", false, false, p.schemaErr(off, path.key(fieldNames[f]), "expected string, found %s", jsonType(v[0]))
	}
	return bodyString(v[1 : len(v)-1]), fs.esc&(1<<f) != 0, true, nil
}

// str is lit's string decoded.
func (p *parser) str(fs *fields, f int, strict bool) (string, bool, error) {
	s, escaped, ok, err := p.lit(fs, f, strict)
	if escaped {
		p.keep(len(s))
		s = decoded(s)
	}
	return s, ok, err
}

// block parses the block object at d[i] == '{', element bi of the list at path list (the
// block's own path is built only for errors and nested content). On a *SchemaError the
// returned end offset is valid and the block is a KindUnknown block holding the raw bytes.
func (p *parser) block(i, depth int, list *jpath, bi int) (*Block, int, error) {
	d := p.d
	b := p.newBlock()
	var contentBlocks []*Block
	var contentArr *array
	var contentErr error
	fs := fields{path: list, idx: bi}
	obj, end, err := p.objectAt(i, depth, func(ks, ke, vs int) (int, error) {
		f := fieldOf(d[ks:ke])
		if f != mfContent || p.f != Anthropic || d[vs] != '[' {
			return p.note(&fs, f, depth, vs)
		}
		blocks, arr, e, err := p.blockList(vs, depth+1, list.at(bi).key("content"), false)
		if err != nil && !isSchema(err) {
			return 0, err
		}
		contentBlocks, contentArr, contentErr = blocks, arr, err
		fs.val[f] = span{s: vs, e: e}
		return e, nil
	})
	if err != nil {
		return nil, 0, err
	}
	b.obj = obj
	fail := func(err error) (*Block, int, error) {
		return &Block{f: p.f, obj: obj, Kind: KindUnknown}, end, err
	}
	typ, ok, err := p.str(&fs, mfType, true)
	if err != nil {
		return fail(err)
	}
	if !ok {
		return fail(p.schemaErr(i, list.at(bi), "content block has no \"type\""))
	}
	b.Type = typ
	b.Kind = kindOf(p.f, typ)
	if cc, _ := p.value(&fs, mfCacheControl); cc != nil {
		b.CacheControl = cc
	}
	switch b.Kind {
	case KindText:
		s, escaped, _, err := p.lit(&fs, mfText, true)
		if b.setText(s, escaped); err != nil {
			return fail(err)
		}
	case KindThinking:
		s, escaped, _, err := p.lit(&fs, mfThinking, true)
		if b.setText(s, escaped); err != nil {
			return fail(err)
		}
		if b.Signature, _, err = p.str(&fs, mfSignature, true); err != nil {
			return fail(err)
		}
	case KindToolUse, KindServerToolUse:
		if b.ID, _, err = p.str(&fs, mfID, true); err != nil {
			return fail(err)
		}
		if b.Name, _, err = p.str(&fs, mfName, true); err != nil {
			return fail(err)
		}
		if in, _ := p.value(&fs, mfInput); in != nil {
			b.Input = in
		}
	case KindToolResult, KindWebSearchToolResult:
		if b.ID, _, err = p.str(&fs, mfToolUseID, true); err != nil {
			return fail(err)
		}
		if b.Kind == KindWebSearchToolResult {
			break
		}
		if v, off := p.value(&fs, mfIsError); v != nil {
			switch v[0] {
			case 't':
				b.IsError = true
			case 'f':
			default:
				return fail(p.schemaErr(off, list.at(bi).key("is_error"), "expected boolean, found %s", jsonType(v[0])))
			}
		}
		if v, off := p.value(&fs, mfContent); v != nil {
			switch v[0] {
			case '"':
				b.Content = p.blockSlice([]*Block{p.textBlock(v, fs.esc&(1<<mfContent) != 0)})
				b.ContentString = true
			case '[':
				if contentErr != nil {
					return fail(contentErr)
				}
				b.Content, b.contentArr = contentBlocks, contentArr
			case 'n':
			default:
				return fail(p.schemaErr(off, list.at(bi).key("content"), "expected string or array, found %s", jsonType(v[0])))
			}
		}
	}
	return b, end, nil
}

// stringAt returns the decoded string value at d[vs] of the member at path and its end (a
// schema error when it is not a string).
func (p *parser) stringAt(vs, depth int, path jpath) (string, int, error) {
	if vs >= len(p.d) || p.d[vs] != '"' {
		return "", 0, p.wrongType(vs, depth, path, "string")
	}
	e, _, err := scanString(p.d, vs)
	if err != nil {
		return "", 0, err
	}
	return p.text(p.d[vs:e]), e, nil
}

// role reads a message's "role" member at vs into m.Role and returns the offset after it.
func (p *parser) role(m *Message, vs, depth int, path jpath) (int, error) {
	r, e, err := p.stringAt(vs, depth, path.key("role"))
	m.Role = Role(r)
	return e, err
}

func (p *parser) anthropicMessage(i, depth int, path jpath) (*Message, int, error) {
	d := p.d
	m := p.newMessage()
	var roleSeen bool
	obj, end, err := p.objectAt(i, depth, func(ks, ke, vs int) (int, error) {
		switch {
		case keyIs(d, ks, ke, "role"):
			roleSeen = true
			return p.role(m, vs, depth, path)
		case keyIs(d, ks, ke, "content"):
			m.hasContent = true
			switch d[vs] {
			case '"':
				e, esc, err := scanString(d, vs)
				if err != nil {
					return 0, err
				}
				m.Blocks = p.blockSlice([]*Block{p.textBlock(d[vs:e:e], esc)})
				m.StringContent = true
				m.contentArr = nil
				return e, nil
			case '[':
				blocks, arr, e, err := p.blockList(vs, depth+1, path.key("content"), true)
				if err != nil {
					return 0, err
				}
				m.Blocks, m.contentArr, m.StringContent = blocks, arr, false
				return e, nil
			}
			return 0, p.wrongType(vs, depth, path.key("content"), "string or array")
		}
		return scanValue(d, vs, depth)
	})
	if err != nil {
		return nil, 0, err
	}
	if !roleSeen {
		return nil, 0, p.schemaErr(i, path, "message has no \"role\"")
	}
	m.obj = obj
	return m, end, nil
}

func (p *parser) openAIMessage(i, depth int, path jpath) (*Message, int, error) {
	d := p.d
	m := p.newMessage()
	var roleSeen bool
	var parts []*Block
	var content *Block // string content
	var toolCallID string
	var cc []byte           // the last "cache_control" value
	base := len(p.blkStack) // the tool calls are collected on blkStack
	defer func() { p.blkStack = p.blkStack[:base] }()
	obj, end, err := p.objectAt(i, depth, func(ks, ke, vs int) (int, error) {
		switch {
		case keyIs(d, ks, ke, "role"):
			roleSeen = true
			return p.role(m, vs, depth, path)
		case keyIs(d, ks, ke, "content"):
			m.hasContent = true
			parts, content, m.StringContent, m.contentArr = nil, nil, false, nil
			switch d[vs] {
			case '"':
				e, esc, err := scanString(d, vs)
				if err != nil {
					return 0, err
				}
				content = p.textBlock(d[vs:e:e], esc)
				m.StringContent = true
				return e, nil
			case '[':
				blocks, arr, e, err := p.blockList(vs, depth+1, path.key("content"), true)
				if err != nil {
					return 0, err
				}
				parts, m.contentArr = blocks, arr
				return e, nil
			case 'n':
				return scanLiteral(d, vs, "null")
			}
			return 0, p.wrongType(vs, depth, path.key("content"), "string, array or null")
		case keyIs(d, ks, ke, "tool_calls"):
			p.blkStack = p.blkStack[:base]
			switch d[vs] {
			case '[':
				arr, e, err := p.list(vs, depth+1, func(idx, es int) (int, error) {
					cp := path.key("tool_calls").at(idx)
					if d[es] != '{' {
						return 0, p.wrongType(es, depth+1, cp, "object")
					}
					b, e, err := p.toolCall(es, depth+2, cp)
					if err != nil {
						return 0, err
					}
					p.blkStack = append(p.blkStack, b)
					return e, nil
				})
				if err != nil {
					return 0, err
				}
				m.callsArr = arr
				return e, nil
			case 'n':
				return scanLiteral(d, vs, "null")
			}
			return 0, p.wrongType(vs, depth, path.key("tool_calls"), "array or null")
		case keyIs(d, ks, ke, "tool_call_id"):
			id, e, err := p.stringAt(vs, depth, path.key("tool_call_id"))
			toolCallID = id
			return e, err
		case keyIs(d, ks, ke, "cache_control"):
			e, err := scanValue(d, vs, depth)
			cc = d[vs:e:e]
			return e, err
		}
		return scanValue(d, vs, depth)
	})
	if err != nil {
		return nil, 0, err
	}
	if !roleSeen {
		return nil, 0, p.schemaErr(i, path, "message has no \"role\"")
	}
	m.obj = obj
	if content != nil {
		parts = p.blockSlice([]*Block{content})
	}
	if m.Role == RoleTool {
		b := p.newBlock()
		b.Kind, b.Type, b.ID, b.obj, b.Content, b.ContentString, b.contentArr = KindToolResult, "tool", toolCallID, obj, parts, content != nil, m.contentArr
		b.CacheControl = cc
		m.Blocks = p.blockSlice([]*Block{b})
		return m, end, nil
	}
	m.Blocks = parts
	if calls := p.blkStack[base:]; len(calls) > 0 {
		m.Blocks = p.blockSlice(append(append(make([]*Block, 0, 8), parts...), calls...))
	}
	return m, end, nil
}

// toolCall parses one OpenAI tool_calls entry.
func (p *parser) toolCall(i, depth int, path jpath) (*Block, int, error) {
	d := p.d
	b := p.newBlock()
	b.Kind = KindToolUse
	var call, fn fields // the entry's fields and its last function object's
	obj, end, err := p.objectAt(i, depth, func(ks, ke, vs int) (int, error) {
		if f := fieldOf(d[ks:ke]); f != mfFunction || d[vs] != '{' {
			return p.note(&call, f, depth, vs)
		}
		fn = fields{}
		o, e, err := p.objectAt(vs, depth+1, func(ks, ke, vs int) (int, error) {
			return p.note(&fn, fieldOf(d[ks:ke]), depth+1, vs)
		})
		b.fn, call.val[mfFunction] = o, span{s: vs, e: e}
		return e, err
	})
	if err != nil {
		return nil, 0, err
	}
	b.obj = obj
	getStr := func(v span, p2 jpath) (string, error) {
		if v.e == 0 {
			return "", nil
		}
		if d[v.s] != '"' {
			return "", p.schemaErr(i, p2, "expected string, found %s", jsonType(d[v.s]))
		}
		return p.text(d[v.s:v.e]), nil
	}
	if b.ID, err = getStr(call.val[mfID], path.key("id")); err != nil {
		return nil, 0, err
	}
	if b.Type, err = getStr(call.val[mfType], path.key("type")); err != nil {
		return nil, 0, err
	}
	if f := call.val[mfFunction]; f.e != 0 {
		if d[f.s] != '{' {
			return nil, 0, p.schemaErr(f.s, path.key("function"), "expected object, found %s", jsonType(d[f.s]))
		}
		if b.Name, err = getStr(fn.val[mfName], path.key("function").key("name")); err != nil {
			return nil, 0, err
		}
		if a := fn.val[mfArguments]; a.e != 0 {
			b.Input = p.input(d[a.s:a.e])
		}
	}
	if cc := call.val[mfCacheControl]; cc.e != 0 {
		b.CacheControl = d[cc.s:cc.e]
	}
	return b, end, nil
}

// input is a tool call's input value v: a string's decoded bytes, any other value's raw bytes.
func (p *parser) input(v []byte) []byte {
	if v[0] != '"' {
		return v
	}
	s := p.text(v)
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

func (p *parser) tool(i, depth int, path jpath) (*Tool, int, error) {
	d := p.d
	var fs fields
	obj, end, err := p.objectAt(i, depth, func(ks, ke, vs int) (int, error) {
		return p.note(&fs, fieldOf(d[ks:ke]), depth, vs)
	})
	if err != nil {
		return nil, 0, err
	}
	t := &Tool{f: p.f, raw: obj.raw}
	p.keep(int(unsafe.Sizeof(*t)))
	if cc := fs.val[mfCacheControl]; cc.e != 0 {
		t.CacheControl = d[cc.s:cc.e]
	}
	// The name is "name", or for OpenAI "function.name".
	name, fn := fs.val[mfName], fs.val[mfFunction]
	switch {
	case name.e != 0:
		if d[name.s] != '"' {
			return nil, 0, p.schemaErr(name.s, path.key("name"), "expected string, found %s", jsonType(d[name.s]))
		}
		t.Name = unquote(d[name.s:name.e])
	case p.f == OpenAI && fn.e != 0 && d[fn.s] == '{':
		if n, ok := (&object{raw: d[fn.s:fn.e]}).get("name"); ok {
			if n[0] != '"' {
				return nil, 0, p.schemaErr(fn.s, path.key("function").key("name"), "expected string, found %s", jsonType(n[0]))
			}
			t.Name = unquote(n)
		}
	}
	return t, end, nil
}

// jpath is a JSON path built without allocating; it is rendered only for errors.
type jpath struct {
	parts [8]pathPart
	n     int
}

type pathPart struct {
	key string
	idx int
}

func root(key string) jpath { return jpath{}.key(key) }

func (p jpath) key(k string) jpath {
	if p.n < len(p.parts) {
		p.parts[p.n] = pathPart{key: k, idx: -1}
		p.n++
	}
	return p
}

func (p jpath) at(i int) jpath {
	if p.n < len(p.parts) {
		p.parts[p.n] = pathPart{idx: i}
		p.n++
	}
	return p
}

// String renders the path, e.g. "messages[3].content[0].type"; the root is "$".
func (p jpath) String() string {
	if p.n == 0 {
		return "$"
	}
	var b []byte
	for _, x := range p.parts[:p.n] {
		if x.idx >= 0 {
			b = append(b, '[')
			b = strconv.AppendInt(b, int64(x.idx), 10)
			b = append(b, ']')
			continue
		}
		if len(b) > 0 {
			b = append(b, '.')
		}
		b = append(b, x.key...)
	}
	return string(b)
}
