package wire

import "slices"

// objectAt parses the object at d[i] == '{' into slab memory, calling fn (nil: scanValue)
// to parse each member's value.
func (p *parser) objectAt(i, depth int, fn memberFunc) (*object, int, error) {
	p.at = i
	o := take(p, &p.objs, 128)
	end, err := scanObject(p.d, i, depth, fn)
	if err != nil {
		return nil, 0, err
	}
	o.raw = p.d[i:end:end]
	return o, end, nil
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

// topList is list for the top-level array of objects of member key (fn also gets each path).
// Only its request keeps it (later requests share the elements, not the array): its spans get
// an allocation of their own, which the request counts (countRetained).
func (p *parser) topList(vs int, key string, fn func(idx, es int, path jpath) (int, error)) (*array, int, error) {
	if p.d[vs] != '[' {
		return nil, 0, p.wrongType(vs, 1, root(key), "array")
	}
	return p.listOf(vs, 2, func(idx, es int) (int, error) {
		path := root(key).at(idx)
		if p.d[es] != '{' {
			return 0, p.wrongType(es, 2, path, "object")
		}
		return fn(idx, es, path)
	}, true)
}

func (p *parser) listOf(i, depth int, fn elemFunc, own bool) (*array, int, error) {
	p.at = i
	a := take(p, &p.arrs, 64)
	base := len(p.spanStack)
	end, err := scanArray(p.d, i, depth, func(idx, es int) (int, error) {
		e, err := fn(idx, es)
		p.spanStack = append(p.spanStack, span{s: es - i, e: e - i})
		return e, err
	})
	sp := p.spanStack[base:] // still there until the next push
	p.spanStack = p.spanStack[:base]
	switch {
	case err != nil:
		return nil, 0, err
	case own && len(sp) > 0:
		a.spans = slices.Clone(sp)
	case len(sp) > 0:
		a.spans = slabCopy(p, &p.spanSlab, sp, 1024)
	}
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
		var b *Block
		var e int
		var err error
		if p.d[es] == '{' {
			b, e, err = p.block(es, depth+1, &path, idx)
		} else if e, err = scanValue(p.d, es, depth); err == nil {
			b = &Block{f: p.f, str: p.d[es:e:e], Kind: KindUnknown}
			if deferred == nil {
				err = p.schemaErr(es, path.at(idx), "content block must be an object, found %s", jsonType(p.d[es]))
			}
		}
		if err != nil && (strict || !isSchema(err)) {
			return 0, err
		}
		if deferred == nil {
			deferred = err
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
