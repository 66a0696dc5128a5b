package wire

import "bytes"

// member is one object member; offsets are relative to the owning object's raw bytes:
// raw[k:ke] is the quoted key, raw[v:e] the value.
type member struct {
	k, ke, v, e int
}

// object is a JSON object kept as its validated raw bytes. members indexes them for the
// objects the parse indexes (the top-level object, tools); it is nil for the others
// (messages, blocks, items), whose members are found by walking raw when asked for.
type object struct {
	raw     []byte
	members []member
}

// walk calls fn with each member in order.
func (o *object) walk(fn func(m member)) {
	if o.members != nil {
		for _, m := range o.members {
			fn(m)
		}
		return
	}
	d := o.raw
	i, err := objectOpen(d, 0, 0)
	for err == nil && d[i-1] != '}' {
		var ks, ke, vs, ve int
		if ks, ke, vs, err = memberKey(d, i); err == nil {
			if ve, err = scanValue(d, vs, 0); err == nil {
				fn(member{k: ks, ke: ke, v: vs, e: ve})
				i, err = memberNext(d, ve)
			}
		}
	}
}

// index returns the members in order (a fresh slice for an object without an index).
func (o *object) index() []member {
	if o.members != nil {
		return o.members
	}
	var ms []member
	o.walk(func(m member) { ms = append(ms, m) })
	return ms
}

// each calls fn with the raw key and value of every member, in order.
func (o *object) each(fn func(key, value []byte)) {
	o.walk(func(m member) { fn(o.raw[m.k:m.ke:m.ke], o.raw[m.v:m.e:m.e]) })
}

// duplicate returns the decoded name of the first member whose name an earlier member has
// ("" for none). Objects have few members: the pairs are compared in place.
func (o *object) duplicate() string {
	if o == nil {
		return ""
	}
	var keys [][]byte
	dup := ""
	o.walk(func(m member) {
		if dup != "" {
			return
		}
		ki := o.raw[m.k:m.ke]
		for _, kj := range keys {
			if bytes.Equal(ki, kj) || (hasBackslash(ki) || hasBackslash(kj)) && unquote(ki) == unquote(kj) {
				dup = unquote(ki)
				return
			}
		}
		keys = append(keys, ki)
	})
	return dup
}

// lookup returns the last member named name (keys compared by their decoded text).
func (o *object) lookup(name string) (found member, ok bool) {
	o.walk(func(m member) {
		if keyMatch(o.raw[m.k:m.ke], name) {
			found, ok = m, true
		}
	})
	return found, ok
}

// has reports whether the object has a member named name.
func (o *object) has(name string) bool {
	_, ok := o.lookup(name)
	return ok
}

// get returns the raw value of the last member named name.
func (o *object) get(name string) ([]byte, bool) {
	m, ok := o.lookup(name)
	if !ok {
		return nil, false
	}
	return o.raw[m.v:m.e], true
}

// with returns a copy of the object with member name set to the raw JSON value val
// (replaced in place, keeping its key bytes and position, or appended at the end). All
// other bytes are kept; the copy is indexed when o is.
func (o *object) with(name string, val []byte) *object {
	c, _ := o.withAt(name, val)
	return c
}

// withAt is with, also returning the member set in the copy.
func (o *object) withAt(name string, val []byte) (*object, member) {
	return o.withValue(name, len(val), func(dst []byte) []byte { return append(dst, val...) })
}

// withValue is withAt for the value that val appends to dst, of at most n bytes (an
// estimate only sizes the copy).
func (o *object) withValue(name string, n int, val func(dst []byte) []byte) (*object, member) {
	if m, ok := o.lookup(name); ok {
		out := make([]byte, 0, len(o.raw)-(m.e-m.v)+n)
		out = val(append(out, o.raw[:m.v]...))
		delta := len(out) - m.e
		out = append(out, o.raw[m.e:]...)
		nm := member{k: m.k, ke: m.ke, v: m.v, e: m.e + delta}
		var ms []member
		if o.members != nil {
			ms = make([]member, len(o.members))
			for j, x := range o.members {
				switch {
				case x.k == m.k:
					x = nm
				case x.k > m.k:
					x.k, x.ke, x.v, x.e = x.k+delta, x.ke+delta, x.v+delta, x.e+delta
				}
				ms[j] = x
			}
		}
		return &object{raw: out, members: ms}, nm
	}
	// Append before the closing brace.
	var pos int
	var prefix []byte
	last, nonEmpty := member{}, false
	o.walk(func(m member) { last, nonEmpty = m, true })
	if nonEmpty {
		pos = last.e
		prefix = []byte{','}
	} else {
		pos = bytes.LastIndexByte(o.raw, '}')
	}
	out := make([]byte, 0, len(o.raw)+len(prefix)+quotedCap(len(name))+1+n)
	out = append(out, o.raw[:pos]...)
	out = append(out, prefix...)
	k := len(out)
	out = append(appendQuoted(out, name), ':')
	nm := member{k: k, ke: len(out) - 1, v: len(out)}
	out = val(out)
	nm.e = len(out)
	out = append(out, o.raw[pos:]...)
	var ms []member
	if o.members != nil {
		ms = make([]member, len(o.members), len(o.members)+1)
		copy(ms, o.members)
		ms = append(ms, nm)
	}
	return &object{raw: out, members: ms}, nm
}

// without returns a copy of the object without any member named name (the object itself
// when there is none); the copy has no index.
func (o *object) without(name string) *object {
	cur := o
	for cur.has(name) {
		ms := cur.index()
		i := len(ms) - 1
		for !keyMatch(cur.raw[ms[i].k:ms[i].ke], name) {
			i--
		}
		var from, to int
		switch {
		case i > 0: // drop ",<ws>key:value" after the previous member
			from, to = ms[i-1].e, ms[i].e
		case len(ms) > 1: // first member: drop "key:value,<ws>"
			from, to = ms[0].k, ms[1].k
		default:
			from, to = ms[0].k, ms[0].e
		}
		out := make([]byte, 0, len(cur.raw)-(to-from))
		out = append(out, cur.raw[:from]...)
		out = append(out, cur.raw[to:]...)
		cur = &object{raw: out}
	}
	return cur
}

// span is the position of one array element inside the array's raw bytes.
type span struct{ s, e int }

// array is a JSON array kept as its raw bytes plus element positions, so a re-emitted array
// can reuse the original separators and whitespace.
type array struct {
	raw   []byte
	spans []span
}

// parseObjectAt indexes the object at d[i] == '{', validating its values.
func parseObjectAt(d []byte, i, depth int) (*object, int, error) {
	p := parser{d: d}
	return p.objectAt(i, depth, true, nil)
}
