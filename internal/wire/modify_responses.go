package wire

// objectBuilder writes a JSON object member by member, indexing the members.
type objectBuilder struct {
	raw []byte
	ms  []member
}

func newObjectBuilder(size int) *objectBuilder {
	return &objectBuilder{raw: append(make([]byte, 0, size+2), '{')}
}

// add appends the member key with the raw JSON value val and returns the value's offset.
func (o *objectBuilder) add(key string, val []byte) int {
	if len(o.ms) > 0 {
		o.raw = append(o.raw, ',')
	}
	k := len(o.raw)
	o.raw = appendQuoted(o.raw, key)
	ke := len(o.raw)
	o.raw = append(o.raw, ':')
	v := len(o.raw)
	o.raw = append(o.raw, val...)
	o.ms = append(o.ms, member{k: k, ke: ke, v: v, e: len(o.raw)})
	return v
}

func (o *objectBuilder) done() *object {
	o.raw = append(o.raw, '}')
	return &object{raw: o.raw, members: o.ms}
}

// newPart returns the Responses content part {"type":typ,"text":text}.
func newPart(typ, text string) *Block {
	lit, replaced := appendQuotedCheck(make([]byte, 0, quotedCap(len(text))), text)
	ob := newObjectBuilder(len(lit) + len(typ) + 20)
	ob.add("type", quote(typ))
	ob.add("text", lit)
	if replaced {
		text = unquote(lit)
	}
	return &Block{f: Responses, Kind: KindText, Type: typ, text: text, obj: ob.done()}
}

// newItemMessage is NewTextMessage for Responses: a message item with one text part, or for
// RoleTool a function_call_output item with string output.
func newItemMessage(role Role, text string) *Message {
	if role == RoleTool {
		lit, replaced := appendQuotedCheck(make([]byte, 0, quotedCap(len(text))), text)
		ob := newObjectBuilder(len(lit) + 40)
		ob.add("type", []byte(`"function_call_output"`))
		v := ob.add("output", lit)
		obj := ob.done()
		c := textStringBlock(Responses, obj.raw[v:v+len(lit):v+len(lit)], text, replaced)
		b := &Block{f: Responses, Kind: KindToolResult, Type: "function_call_output", obj: obj, Content: []*Block{c}, ContentString: true}
		return &Message{Role: role, Blocks: []*Block{b}, StringContent: true, f: Responses, obj: obj, constructed: true, hasContent: true}
	}
	typ := "input_text"
	if role == RoleAssistant {
		typ = "output_text"
	}
	part := newPart(typ, text)
	content := make([]byte, 0, len(part.obj.raw)+2)
	content = append(append(append(content, '['), part.obj.raw...), ']')
	ob := newObjectBuilder(len(content) + len(role) + 40)
	ob.add("type", []byte(`"message"`))
	ob.add("role", quote(string(role)))
	v := ob.add("content", content)
	obj := ob.done()
	pe := v + 1 + len(part.obj.raw)
	part.obj.raw = obj.raw[v+1 : pe : pe] // the part's bytes inside the item
	arr := &array{raw: obj.raw[v : v+len(content) : v+len(content)], spans: []span{{s: 1, e: 1 + len(part.obj.raw)}}}
	if role == RoleAssistant {
		b := &Block{f: Responses, Kind: KindText, Type: "message", text: part.text, obj: obj}
		return &Message{Role: role, Blocks: []*Block{b}, f: Responses, obj: &object{raw: obj.raw}, constructed: true, hasContent: true,
			itemsArr: &array{raw: obj.raw, spans: []span{{s: 0, e: len(obj.raw)}}}}
	}
	return &Message{Role: role, Blocks: []*Block{part}, f: Responses, obj: obj, constructed: true, hasContent: true, contentArr: arr}
}

// responsesWithBlocks is withBlocks for Responses: a tool message is its result block's
// item, an assistant message (a run of items) or an item without role is one item per
// block, any other message gets the blocks as its content.
func (m *Message) responsesWithBlocks(nm *Message, b []*Block) *Message {
	switch {
	case m.Role == RoleTool && len(b) == 1 && b[0].Kind == KindToolResult:
		return m.withResult(nm, b[0], "type", "output", "call_id")
	case m.isItem() && len(b) == 1 && b[0].obj != nil:
		nm.obj, nm.itemsArr = b[0].obj, nil
		return nm
	case m.itemsArr != nil || m.isItem():
		nm.obj, nm.itemsArr = itemRun(m.itemsArr, b)
		return nm
	}
	nm.obj, nm.StringContent = m.obj.withContent("content", m.contentArr, b)
	return nm
}

// isItem reports a Responses message that stands for an input item other than a message (a
// message without role whose one block is the item).
func (m *Message) isItem() bool {
	return m.f == Responses && m.Role == "" && len(m.Blocks) == 1 && m.Blocks[0].obj == m.obj
}

// itemRun writes blocks as a run of items, reusing the separators of layout (when non-nil)
// by position. A text part (not an item) is written as an assistant message item holding it.
func itemRun(layout *array, b []*Block) (*object, *array) {
	n := 0
	for _, x := range b {
		n += len(x.Raw()) + 1
	}
	buf := make([]byte, 0, n)
	spans := make([]span, 0, len(b))
	for i, x := range b {
		if i > 0 {
			if layout != nil && i < len(layout.spans) {
				buf = append(buf, layout.raw[layout.spans[i-1].e:layout.spans[i].s]...)
			} else {
				buf = append(buf, ',')
			}
		}
		s := len(buf)
		if x.Kind == KindText && (x.obj == nil || !x.obj.has("role")) { // a part, not a message item
			buf = append(buf, `{"type":"message","role":"assistant","content":[{"type":"output_text","text":`...)
			buf = appendQuoted(buf, x.Text())
			buf = append(buf, `}]}`...)
		} else {
			buf = append(buf, x.Raw()...)
		}
		spans = append(spans, span{s: s, e: len(buf)})
	}
	return &object{raw: buf}, &array{raw: buf, spans: spans}
}
