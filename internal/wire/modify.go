package wire

import (
	"fmt"
	"slices"
	"sync/atomic"
	"unsafe"
)

// NewTextBlock returns a text block {"type":"text","text":…} (the same shape is a text
// content part in OpenAI format; for Responses it is an input_text part).
func NewTextBlock(f Format, text string) *Block {
	typ := "text"
	if f == Responses {
		typ = "input_text"
	}
	raw := append(make([]byte, 0, quotedCap(len(text))+len(typ)+20), `{"type":"`...)
	b, _ := partBlock(f, append(append(raw, typ...), `","text":`...), typ, text)
	return b
}

// NewTextMessage returns a message {"role":…,"content":"text"} with string content; for
// Responses the item {"type":"message","role":…,"content":[part]} with one input_text part
// (output_text for an assistant). Its Raw is nil; Bytes returns its encoding.
func NewTextMessage(f Format, role Role, text string) *Message {
	if f == Responses {
		return newItemMessage(role, text)
	}
	raw := make([]byte, 0, quotedCap(len(text))+quotedCap(len(role))+22)
	raw = append(appendQuoted(append(raw, `{"role":`...), string(role)), `,"content":`...)
	result := ""
	if f == OpenAI && role == RoleTool {
		result = "tool"
	}
	return stringMessage(f, role, raw, text, result)
}

// stringMessage is the constructed message raw+<text as a string>+"}": its one block is that
// string-form text, or with result set a tool result of type result holding it.
func stringMessage(f Format, role Role, raw []byte, text, result string) *Message {
	v := len(raw)
	raw, replaced := appendQuotedCheck(raw, text)
	e := len(raw)
	obj := &object{raw: append(raw, '}')}
	b := textStringBlock(f, obj.raw[v:e:e], text, replaced)
	if result != "" {
		b = &Block{f: f, Kind: KindToolResult, Type: result, obj: obj, Content: []*Block{b}, ContentString: true}
	}
	return &Message{Role: role, Blocks: []*Block{b}, StringContent: true, f: f, obj: obj, constructed: true, hasContent: true}
}

// NewTool parses one tools-array entry. raw must be a JSON object; the name is read from
// "name" (or OpenAI "function.name").
func NewTool(f Format, raw []byte) (*Tool, error) {
	if err := validJSON(raw); err != nil {
		return nil, err
	}
	i := skipWS(raw, 0)
	if raw[i] != '{' {
		return nil, &SchemaError{Offset: int64(i), Path: "tool", Msg: "expected object, found " + jsonType(raw[i])}
	}
	p := parser{d: raw, f: f}
	t, _, err := p.tool(i, 1, root("tool"))
	return t, err
}

// WithBlocks returns a copy of the message with content b, every other member keeping its bytes
// (docs/design/wire.md, "The model", says where each block goes). The last result is remembered:
// the same blocks again (same pointers) return the same message without re-encoding.
func (m *Message) WithBlocks(b []*Block) *Message {
	if p := (*blocksMemo)(atomic.LoadPointer(&m.blocksMemo)); p != nil && slices.Equal(p.in, b) {
		return p.out
	}
	// The result owns a copy of b: it outlives this call in the memo, so it must not alias
	// a slice the caller may reuse.
	in := slices.Clone(b)
	nm := m.withBlocks(in)
	atomic.StorePointer(&m.blocksMemo, unsafe.Pointer(&blocksMemo{in: in, out: nm}))
	return nm
}

// withBlocks is WithBlocks without the memo. A tool message is its result block's message or
// item; a Responses assistant message (a run of items) or item without role is one item per
// block; an OpenAI message splits calls from parts; any other gets the blocks as its content.
func (m *Message) withBlocks(b []*Block) *Message {
	nm := &Message{Role: m.Role, Blocks: b, f: m.f, contentArr: m.contentArr, callsArr: m.callsArr, itemsArr: m.itemsArr, hasContent: true}
	result := m.Role == RoleTool && len(b) == 1 && b[0].Kind == KindToolResult
	switch {
	case result && m.f == OpenAI:
		m.withResult(nm, b[0], "role", "content", "tool_call_id")
	case result && m.f == Responses:
		m.withResult(nm, b[0], "type", "output", "call_id")
	case m.f == OpenAI:
		m.openAIWithBlocks(nm, b)
	case m.isItem() && len(b) == 1 && b[0].obj != nil:
		nm.obj, nm.itemsArr = b[0].obj, nil
	case m.itemsArr != nil || m.isItem():
		nm.obj, nm.itemsArr = itemRun(m.itemsArr, b)
	default:
		nm.obj, nm.StringContent = m.obj.withContent("content", m.contentRaw(), m.contentArr, b)
	}
	return nm
}

// contentRaw returns the raw value of the message's content member as parsed (its list,
// or the string of string content), nil when unknown.
func (m *Message) contentRaw() []byte {
	switch {
	case m.contentArr != nil:
		return m.contentArr.raw
	case !m.StringContent || len(m.Blocks) != 1:
		return nil
	case m.Blocks[0].Kind == KindToolResult:
		return m.Blocks[0].contentRaw()
	}
	return m.Blocks[0].str
}

// contentRaw returns the raw value of a tool result's content as parsed, nil when unknown.
func (b *Block) contentRaw() []byte {
	switch {
	case b.contentArr != nil:
		return b.contentArr.raw
	case b.ContentString && len(b.Content) == 1:
		return b.Content[0].str
	}
	return nil
}

// withContent returns o with member key, whose value is cur when known (see withAt),
// set to the blocks b as a content value: a lone string-form text block as its string
// (isString), else a list reusing arr's separators.
func (o *object) withContent(key string, cur []byte, arr *array, b []*Block) (obj *object, isString bool) {
	if len(b) == 1 && b[0].obj == nil && b[0].str != nil && b[0].str[0] == '"' {
		obj, _ = o.withAt(key, cur, b[0].str)
		return obj, true
	}
	n := 2
	for _, x := range b {
		n += len(x.Raw()) + 24
	}
	obj, _ = o.withValueAt(key, cur, n, func(dst []byte) []byte {
		e := encoder{buf: dst}
		encodeList(&e, arr, len(b), '[', ']', func(i int) { b[i].encodeElem(&e) })
		return e.buf
	})
	return obj, false
}

// openAIWithBlocks is withBlocks for an OpenAI message other than a tool message's result:
// its tool calls go to "tool_calls", the other blocks to "content" of nm.
func (m *Message) openAIWithBlocks(nm *Message, b []*Block) {
	var parts, calls []*Block
	for _, x := range b {
		if x.Kind == KindToolUse {
			calls = append(calls, x)
		} else {
			parts = append(parts, x)
		}
	}
	obj := m.obj
	switch {
	case len(parts) > 0:
		obj, nm.StringContent = obj.withContent("content", m.contentRaw(), m.contentArr, parts)
	case len(calls) > 0:
		obj = obj.with("content", []byte("null"))
	case m.hasContent:
		obj = obj.with("content", []byte(`""`))
		nm.StringContent = true
	}
	if len(calls) > 0 {
		n := 2
		for _, c := range calls {
			n += len(c.Raw()) + 1
		}
		var cur []byte
		if m.callsArr != nil {
			cur = m.callsArr.raw
		}
		obj, _ = obj.withValueAt("tool_calls", cur, n, func(dst []byte) []byte {
			e := encoder{buf: dst}
			encodeList(&e, m.callsArr, len(calls), '[', ']', func(i int) { e.raw(calls[i].Raw()) })
			return e.buf
		})
	} else {
		obj = obj.without("tool_calls")
	}
	nm.obj = obj
}

// withResult makes nm the tool message of result r: r's own object when it is a whole
// message (it has the member whole), else m's object with the result's content and id
// written to contentKey and idKey.
func (m *Message) withResult(nm *Message, r *Block, whole, contentKey, idKey string) {
	if r.obj != nil && r.obj.has(whole) {
		nm.obj = r.obj
	} else {
		nm.obj, _ = m.obj.withContent(contentKey, m.contentRaw(), r.contentArr, r.Content)
		if r.ID != "" {
			nm.obj = nm.obj.with(idKey, quote(r.ID))
		}
	}
	nm.StringContent = r.ContentString
}

// clone returns a shallow copy of b with obj replaced.
func (b *Block) clone(obj *object) *Block {
	// Field by field, not *b: the cached identity sum and the WithResultText and pair memos
	// are written atomically by other goroutines sharing b, and belong to b's content anyway.
	// TestBlockCloneCopiesEveryField fails when a field is added and not copied here.
	return &Block{Kind: b.Kind, Type: b.Type, text: b.text, textEsc: b.textEsc, Signature: b.Signature, ID: b.ID, Name: b.Name,
		Input: b.Input, IsError: b.IsError, Content: b.Content, ContentString: b.ContentString,
		CacheControl: b.CacheControl, f: b.f, obj: obj, fn: b.fn, contentArr: b.contentArr}
}

// objectForm returns the block object (building one for a string-form text block).
func (b *Block) objectForm() *object {
	if b.obj != nil {
		return b.obj
	}
	raw := append(make([]byte, 0, len(b.str)+24), `{"type":"text","text":`...)
	return &object{raw: append(append(raw, b.str...), '}')}
}

// WithResultText returns a copy of a tool result block whose content is the string text, every
// other member keeping its bytes and position (b itself for other blocks). The last result is
// remembered, so the same stub on every request is encoded once.
func (b *Block) WithResultText(text string) *Block {
	if b.Kind != KindToolResult || b.obj == nil {
		return b
	}
	if p := (*textMemo)(atomic.LoadPointer(&b.resultMemo)); p != nil && p.text == text {
		return p.out
	}
	nb := b.withResultText(text)
	atomic.StorePointer(&b.resultMemo, unsafe.Pointer(&textMemo{text: text, out: nb}))
	return nb
}

func (b *Block) withResultText(text string) *Block {
	key := "content"
	if b.f == Responses {
		key = "output"
	}
	var replaced bool
	obj, v := b.obj.withValueAt(key, b.contentRaw(), quotedCap(len(text)), func(dst []byte) []byte {
		dst, replaced = appendQuotedCheck(dst, text)
		return dst
	})
	nb := b.clone(obj)
	nb.Content = []*Block{textStringBlock(b.f, nb.obj.raw[v.v:v.e:v.e], text, replaced)}
	nb.ContentString = true
	nb.contentArr = nil
	return nb
}

// WithInput returns a copy of a tool call with new input (Anthropic "input" as JSON; OpenAI and
// Responses the arguments or custom input text, written as a string), or b itself for other
// blocks or an unusable input (setInput reports that error).
func (b *Block) WithInput(input []byte) *Block {
	if nb, err := b.setInput(input); err == nil {
		return nb
	}
	return b
}

// setInput is WithInput returning an error instead of ignoring an unusable input.
func (b *Block) setInput(input []byte) (*Block, error) {
	if (b.Kind != KindToolUse && b.Kind != KindServerToolUse) || b.obj == nil {
		return nil, fmt.Errorf("wire: setInput on a %s block", b.Kind)
	}
	var nb *Block
	switch b.f {
	case Responses:
		key, ok := responsesInputKeys[b.Type]
		if !ok {
			return nil, fmt.Errorf("wire: setInput on a %s item", b.Type)
		}
		nb = b.clone(b.obj.with(key, quote(string(input))))
	case OpenAI:
		fn := b.fn
		if fn == nil {
			fn = &object{raw: []byte("{}")}
		}
		nfn := fn.with("arguments", quote(string(input)))
		nb = b.clone(b.obj.with("function", nfn.raw))
		nb.fn = nfn
	default:
		if err := validJSON(input); err != nil {
			return nil, err
		}
		obj, v := b.obj.withAt("input", nil, input)
		nb = b.clone(obj)
		nb.Input = obj.raw[v.v:v.e]
		return nb, nil
	}
	nb.Input = append([]byte(nil), input...)
	return nb, nil
}

// responsesInputKeys are the members holding the input of the Responses calls setInput sets.
var responsesInputKeys = map[string]string{"function_call": "arguments", "custom_tool_call": "input"}

// WithCacheControl returns a copy of the block with cache_control set to raw (a JSON
// value), or removed when raw is nil. A string-form text block becomes a text block object.
func (b *Block) WithCacheControl(raw []byte) *Block {
	if raw == nil {
		nb := b.clone(b.objectForm().without("cache_control"))
		nb.CacheControl = nil
		return nb
	}
	obj, v := b.objectForm().withAt("cache_control", nil, raw)
	nb := b.clone(obj)
	nb.CacheControl = obj.raw[v.v:v.e]
	return nb
}

// textStringBlock is the string-form text block of the literal lit just encoded from text:
// its Text is text itself unless invalid UTF-8 was replaced while encoding (then it is
// what lit decodes to).
func textStringBlock(f Format, lit []byte, text string, replaced bool) *Block {
	if replaced {
		return stringBlock(f, lit)
	}
	return &Block{f: f, Kind: KindText, Type: "text", text: text, str: lit}
}
