package wire

import "fmt"

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
	return r, err
}

type parser struct {
	d    []byte
	f    Format
	prev *Request // ParseReusing: the previous request whose identical values are shared
	at   int      // offset of the object or array the parse last started
	home *backing // the memory this parse's values keep alive (retained.go)

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
