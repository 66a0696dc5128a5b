package wire

import "unsafe"

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
