package wire

// partBlock appends the literal of text and the closing brace to raw, the start of a part
// of type typ up to its "text" member's value, and returns the part and raw.
func partBlock(f Format, raw []byte, typ, text string) (*Block, []byte) {
	v := len(raw)
	raw, replaced := appendQuotedCheck(raw, text)
	if replaced {
		text = unquote(raw[v:])
	}
	raw = append(raw, '}')
	return &Block{f: f, Kind: KindText, Type: typ, text: text, obj: &object{raw: raw[:len(raw):len(raw)]}}, raw
}

// newItemMessage is NewTextMessage for Responses: a message item with one text part, or for
// RoleTool a function_call_output item with string output.
func newItemMessage(role Role, text string) *Message {
	n := quotedCap(len(text)) + quotedCap(len(role)) + 64
	if role == RoleTool {
		raw := append(make([]byte, 0, n), `{"type":"function_call_output","output":`...)
		return stringMessage(Responses, role, raw, text, "function_call_output")
	}
	typ := "input_text"
	if role == RoleAssistant {
		typ = "output_text"
	}
	raw := appendQuoted(append(make([]byte, 0, n), `{"type":"message","role":`...), string(role))
	cs := len(raw) + len(`,"content":`)
	raw = append(append(raw, `,"content":[{"type":"`...), typ...)
	part, raw := partBlock(Responses, append(raw, `","text":`...), typ, text)
	pe := len(raw)
	raw = append(raw, `]}`...)
	part.obj.raw = raw[cs+1 : pe : pe] // the part's bytes inside the item
	obj := &object{raw: raw}
	if role == RoleAssistant {
		b := &Block{f: Responses, Kind: KindText, Type: "message", text: part.text, obj: obj}
		return &Message{Role: role, Blocks: []*Block{b}, f: Responses, obj: &object{raw: raw}, constructed: true, hasContent: true,
			itemsArr: &array{raw: raw, spans: []span{{s: 0, e: len(raw)}}}}
	}
	arr := &array{raw: raw[cs : pe+1 : pe+1], spans: []span{{s: 1, e: 1 + len(part.obj.raw)}}}
	return &Message{Role: role, Blocks: []*Block{part}, f: Responses, obj: obj, constructed: true, hasContent: true, contentArr: arr}
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
