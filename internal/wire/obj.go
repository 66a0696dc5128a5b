package wire

import "bytes"

// member is one object member; offsets are relative to the owning object's raw bytes:
// raw[k:ke] is the quoted key, raw[v:e] the value.
type member struct {
	k, ke, v, e int
}

// object is a JSON object kept as its raw bytes plus an index of its members.
type object struct {
	raw     []byte
	members []member
}

// keyEq reports whether the member's key equals name (decoding escapes when present).
func (o *object) keyEq(m member, name string) bool {
	return keyMatch(o.raw[m.k:m.ke], name)
}

// each calls fn with the raw key and value of every member, in order.
func (o *object) each(fn func(key, value []byte)) {
	for _, m := range o.members {
		fn(o.raw[m.k:m.ke:m.ke], o.raw[m.v:m.e:m.e])
	}
}

// duplicate returns the decoded name of the first member whose name an earlier member has
// ("" for none). Objects have few members: the pairs are compared in place.
func (o *object) duplicate() string {
	if o == nil {
		return ""
	}
	for i := 1; i < len(o.members); i++ {
		ki := o.raw[o.members[i].k:o.members[i].ke]
		for _, m := range o.members[:i] {
			kj := o.raw[m.k:m.ke]
			if bytes.Equal(ki, kj) || (hasBackslash(ki) || hasBackslash(kj)) && unquote(ki) == unquote(kj) {
				return unquote(ki)
			}
		}
	}
	return ""
}

// find returns the index of the last member named name, or -1.
func (o *object) find(name string) int {
	for i := len(o.members) - 1; i >= 0; i-- {
		if o.keyEq(o.members[i], name) {
			return i
		}
	}
	return -1
}

// get returns the raw value of the last member named name.
func (o *object) get(name string) ([]byte, bool) {
	i := o.find(name)
	if i < 0 {
		return nil, false
	}
	m := o.members[i]
	return o.raw[m.v:m.e], true
}

// with returns a copy of the object with member name set to the raw JSON value val
// (replaced in place, keeping its key bytes and position, or appended at the end). All
// other bytes are kept.
func (o *object) with(name string, val []byte) *object {
	i := o.find(name)
	if i >= 0 {
		m := o.members[i]
		out := make([]byte, 0, len(o.raw)-(m.e-m.v)+len(val))
		out = append(out, o.raw[:m.v]...)
		out = append(out, val...)
		out = append(out, o.raw[m.e:]...)
		delta := len(val) - (m.e - m.v)
		ms := make([]member, len(o.members))
		copy(ms, o.members)
		ms[i].e += delta
		for j := i + 1; j < len(ms); j++ {
			ms[j].k += delta
			ms[j].ke += delta
			ms[j].v += delta
			ms[j].e += delta
		}
		return &object{raw: out, members: ms}
	}
	// Append before the closing brace.
	var pos int
	var prefix []byte
	if n := len(o.members); n > 0 {
		pos = o.members[n-1].e
		prefix = []byte{','}
	} else {
		pos = bytes.LastIndexByte(o.raw, '}')
	}
	key := quote(name)
	ins := make([]byte, 0, len(prefix)+len(key)+1+len(val))
	ins = append(ins, prefix...)
	ins = append(ins, key...)
	ins = append(ins, ':')
	ins = append(ins, val...)
	out := make([]byte, 0, len(o.raw)+len(ins))
	out = append(out, o.raw[:pos]...)
	out = append(out, ins...)
	out = append(out, o.raw[pos:]...)
	ms := make([]member, len(o.members), len(o.members)+1)
	copy(ms, o.members)
	k := pos + len(prefix)
	ms = append(ms, member{k: k, ke: k + len(key), v: k + len(key) + 1, e: k + len(ins) - len(prefix)})
	return &object{raw: out, members: ms}
}

// without returns a copy of the object without any member named name (the object itself
// when there is none).
func (o *object) without(name string) *object {
	cur := o
	for {
		i := cur.find(name)
		if i < 0 {
			return cur
		}
		ms := cur.members
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
		delta := to - from
		nm := make([]member, 0, len(ms)-1)
		nm = append(nm, ms[:i]...)
		for _, m := range ms[i+1:] {
			m.k -= delta
			m.ke -= delta
			m.v -= delta
			m.e -= delta
			nm = append(nm, m)
		}
		cur = &object{raw: out, members: nm}
	}
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
	return p.objectAt(i, depth, nil)
}
