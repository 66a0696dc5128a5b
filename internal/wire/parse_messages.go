package wire

import "unsafe"

// message parses the Anthropic or Chat Completions message object at d[i] == '{'.
func (p *parser) message(i, depth int, path jpath) (*Message, int, error) {
	d := p.d
	m := p.newMessage()
	openAI := p.f == OpenAI
	var roleSeen bool
	var parts []*Block
	var toolCallID string
	var cc []byte           // the last "cache_control" value
	base := len(p.blkStack) // the tool calls are collected on blkStack
	defer func() { p.blkStack = p.blkStack[:base] }()
	obj, end, err := p.objectAt(i, depth, func(ks, ke, vs int) (int, error) {
		switch {
		case keyMatch(d[ks:ke], "role"):
			r, e, err := p.stringAt(vs, depth, path.key("role"))
			m.Role, roleSeen = Role(r), true
			return e, err
		case keyMatch(d[ks:ke], "content"):
			m.hasContent = true
			var e int
			var err error
			parts, m.contentArr, m.StringContent, e, err = p.content(vs, depth, path.key("content"), openAI)
			return e, err
		case !openAI:
		case keyMatch(d[ks:ke], "tool_calls"):
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
				m.callsArr = arr
				return e, err
			case 'n':
				return scanLiteral(d, vs, "null")
			}
			return 0, p.wrongType(vs, depth, path.key("tool_calls"), "array or null")
		case keyMatch(d[ks:ke], "tool_call_id"):
			id, e, err := p.stringAt(vs, depth, path.key("tool_call_id"))
			toolCallID = id
			return e, err
		case keyMatch(d[ks:ke], "cache_control"):
			e, err := scanValue(d, vs, depth)
			if err == nil {
				cc = d[vs:e:e]
			}
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
	if openAI && m.Role == RoleTool {
		b := p.newBlock()
		b.Kind, b.Type, b.ID, b.obj, b.Content, b.ContentString, b.contentArr = KindToolResult, "tool", toolCallID, obj, parts, m.StringContent, m.contentArr
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
	fnPath := path.key("function")
	call := fields{path: &path, idx: -1}
	var fn fields // the last function object's
	obj, end, err := p.objectAt(i, depth, func(ks, ke, vs int) (int, error) {
		if f := fieldOf(d[ks:ke]); f != mfFunction || d[vs] != '{' {
			return p.note(&call, f, depth, vs)
		}
		fn = fields{path: &fnPath, idx: -1}
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
	b.ID, b.Type = p.must(&call, mfID, &err), p.must(&call, mfType, &err)
	if f, off := p.value(&call, mfFunction); f != nil && err == nil {
		if f[0] != '{' {
			return nil, 0, p.schemaErr(off, fnPath, "expected object, found %s", jsonType(f[0]))
		}
		b.Name = p.must(&fn, mfName, &err)
		if a, _ := p.value(&fn, mfArguments); a != nil {
			b.Input = p.input(a)
		}
	}
	b.CacheControl, _ = p.value(&call, mfCacheControl)
	return b, end, err
}

// input is a tool call's input value v: a string's decoded bytes, any other value's raw bytes.
func (p *parser) input(v []byte) []byte {
	if v[0] != '"' {
		return v
	}
	return strBytes(p.text(v))
}

func (p *parser) tool(i, depth int, path jpath) (*Tool, int, error) {
	d := p.d
	fs := fields{path: &path, idx: -1}
	obj, end, err := p.objectAt(i, depth, func(ks, ke, vs int) (int, error) {
		return p.note(&fs, fieldOf(d[ks:ke]), depth, vs)
	})
	if err != nil {
		return nil, 0, err
	}
	t := &Tool{f: p.f, raw: obj.raw}
	p.keep(int(unsafe.Sizeof(*t)))
	t.CacheControl, _ = p.value(&fs, mfCacheControl)
	// The name is "name", or for OpenAI "function.name".
	var hasName bool
	if t.Name, hasName, err = p.str(&fs, mfName, true); err != nil || hasName {
		return t, end, err
	}
	if fn, off := p.value(&fs, mfFunction); p.f == OpenAI && fn != nil && fn[0] == '{' {
		if n, ok := (&object{raw: fn}).get("name"); ok {
			if n[0] != '"' {
				return nil, 0, p.schemaErr(off, path.key("function").key("name"), "expected string, found %s", jsonType(n[0]))
			}
			t.Name = unquote(n)
		}
	}
	return t, end, nil
}

// content parses the content member at d[vs] of the message at path: a string is one
// string-form text block (str), an array its blocks, null (when nullable) none.
func (p *parser) content(vs, depth int, path jpath, nullable bool) (blocks []*Block, arr *array, str bool, end int, err error) {
	d := p.d
	switch {
	case d[vs] == '"':
		e, esc, err := scanString(d, vs)
		if err != nil {
			return nil, nil, false, 0, err
		}
		return p.blockSlice([]*Block{p.textBlock(d[vs:e:e], esc)}), nil, true, e, nil
	case d[vs] == '[':
		blocks, arr, e, err := p.blockList(vs, depth+1, path, true)
		return blocks, arr, false, e, err
	case d[vs] == 'n' && nullable:
		e, err := scanLiteral(d, vs, "null")
		return nil, nil, false, e, err
	case nullable:
		return nil, nil, false, 0, p.wrongType(vs, depth, path, "string, array or null")
	}
	return nil, nil, false, 0, p.wrongType(vs, depth, path, "string or array")
}
