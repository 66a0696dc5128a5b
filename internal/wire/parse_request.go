package wire

import "bytes"

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
	r.obj, r.objEnd = obj, end
	fillResultNames(r.Messages, r.reused)
	if p.prev != nil {
		p.keep(r.detach(p.prev))
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
	case keyMatch(d[ks:ke], "model"):
		m, e, err := p.stringAt(vs, 1, root("model"))
		r.Model = m
		return e, err
	case keyMatch(d[ks:ke], "stream"):
		// OpenAI documents stream as "boolean or null" (null: the default, false);
		// Anthropic as a boolean.
		if c := d[vs]; c == 't' || c == 'f' || c == 'n' && p.f != Anthropic {
			r.Stream = c == 't'
			return scanValue(d, vs, 1)
		}
		if p.f != Anthropic {
			return 0, p.wrongType(vs, 1, root("stream"), "boolean or null")
		}
		return 0, p.wrongType(vs, 1, root("stream"), "boolean")
	case p.f == Responses && keyMatch(d[ks:ke], "input"):
		return p.responsesInput(r, vs)
	case p.f != Responses && keyMatch(d[ks:ke], "messages"):
		var prev []*Message
		if p.prev != nil {
			prev = p.prev.origMessages
		}
		base := len(p.msgStack)
		r.reused = 0
		arr, end, err := p.topList(vs, "messages", func(idx, es int, path jpath) (int, error) {
			// Longest identical prefix: a JSON object ends where its bytes end, so
			// identical bytes at es are the same message.
			if idx == r.reused && idx < len(prev) && bytes.HasPrefix(d[es:], prev[idx].obj.raw) {
				p.msgStack = append(p.msgStack, prev[idx])
				r.reused++
				return es + len(prev[idx].obj.raw), nil
			}
			m, e, err := p.message(es, 3, path)
			p.msgStack = append(p.msgStack, m)
			return e, err
		})
		if r.Messages = p.messageList(base); err != nil {
			return 0, err
		}
		r.msgsArr, r.msgHomes = arr, p.messageHomes(r.reused, len(r.Messages))
		return end, nil
	case keyMatch(d[ks:ke], "tools"):
		var prev []*Tool
		if p.prev != nil {
			prev = p.prev.origTools
		}
		r.Tools = nil
		arr, end, err := p.topList(vs, "tools", func(idx, es int, path jpath) (int, error) {
			if idx < len(prev) && bytes.HasPrefix(d[es:], prev[idx].raw) {
				r.Tools = append(r.Tools, prev[idx])
				return es + len(prev[idx].raw), nil
			}
			t, e, err := p.tool(es, 3, path)
			r.Tools = append(r.Tools, t)
			return e, err
		})
		if err != nil {
			return 0, err
		}
		r.toolsArr, r.toolHomes = arr, p.toolHomes(r.Tools, prev)
		return end, nil
	case p.f == Anthropic && keyMatch(d[ks:ke], "system"):
		if pr := p.prev; pr != nil && len(pr.origSystem) > 0 {
			if raw, ok := pr.systemRaw(); ok && len(d)-vs >= len(raw) && bytes.Equal(d[vs:vs+len(raw)], raw) {
				r.System, r.sysArr, r.sysStr, r.sysHome = pr.origSystem, pr.sysArr, pr.sysStr, pr.sysHome
				return vs + len(raw), nil
			}
		}
		var e int
		var err error
		r.System, r.sysArr, r.sysStr, e, err = p.content(vs, 1, root("system"), false)
		r.sysHome = p.home
		return e, err
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
		for mi := reused; mi < len(msgs); mi++ {
			for bi, b := range msgs[mi].Blocks {
				if (b.Kind == KindToolResult || b.Kind == KindWebSearchToolResult) && b.Name == "" {
					b.Name = nearestCallName(msgs[:mi+1], bi, b.ID)
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

// nearestCallName returns the name of the last tool call with this id before block bi of the
// last message of msgs ("" when there is none), as fillResultNames' index would.
func nearestCallName(msgs []*Message, bi int, id string) string {
	if id == "" {
		return ""
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		bs := msgs[i].Blocks
		if i == len(msgs)-1 {
			bs = bs[:bi]
		}
		for j := len(bs) - 1; j >= 0; j-- {
			if b := bs[j]; (b.Kind == KindToolUse || b.Kind == KindServerToolUse) && b.ID == id {
				return b.Name
			}
		}
	}
	return ""
}
