package wire

import "bytes"

// member is one object member; offsets are relative to the owning object's raw bytes:
// raw[k:ke] is the quoted key, raw[v:e] the value.
type member struct {
	k, ke, v, e int
}

// object is a JSON object kept as its validated raw bytes; its members are found by walking
// them when asked for (the request keeps the index of its top-level object, Request.members).
type object struct {
	raw []byte
}

// walk calls fn with each member in order.
func (o *object) walk(fn func(m member)) {
	if len(o.raw) == 0 {
		return // a Responses run of no items
	}
	_, _ = scanObject(o.raw, 0, 0, func(ks, ke, vs int) (int, error) {
		ve, err := scanValue(o.raw, vs, 0)
		if err == nil {
			fn(member{k: ks, ke: ke, v: vs, e: ve})
		}
		return ve, err
	})
}

// members appends the members, in order, to dst.
func (o *object) members(dst []member) []member {
	o.walk(func(m member) { dst = append(dst, m) })
	return dst
}

// each calls fn with the raw key and value of every member, in order.
func (o *object) each(fn func(key, value []byte)) {
	o.walk(func(m member) { fn(o.raw[m.k:m.ke:m.ke], o.raw[m.v:m.e:m.e]) })
}

// duplicate returns the decoded name of the first member whose name an earlier member has
// ("" for none).
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

// lastNamed returns the index in ms, the members of o, of the last one named name, or -1.
func (o *object) lastNamed(ms []member, name string) int {
	for i := len(ms) - 1; i >= 0; i-- {
		if keyMatch(o.raw[ms[i].k:ms[i].ke], name) {
			return i
		}
	}
	return -1
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

// with returns a copy of the object with member name set to the raw JSON value val, replaced
// in place or appended at the end; all other bytes are kept.
func (o *object) with(name string, val []byte) *object {
	c, _ := o.withAt(name, val)
	return c
}

// withAt is with, also returning the member set in the copy.
func (o *object) withAt(name string, val []byte) (*object, member) {
	return o.withValueAt(name, nil, len(val), func(dst []byte) []byte { return append(dst, val...) })
}

// withValueAt is withAt for the value val appends (about n bytes). A known current value cur
// (a subslice of o.raw right after a colon) is replaced without walking o; the member
// returned then has its value offsets only.
func (o *object) withValueAt(name string, cur []byte, n int, val func(dst []byte) []byte) (*object, member) {
	lo, hi, ok := bodySpan(o.raw, cur)
	j := lo - 1
	for ok && j > 0 && isWS(o.raw[j]) {
		j--
	}
	if !ok || j <= 0 || o.raw[j] != ':' {
		var buf [8]member
		c, ms, i := o.put(o.members(buf[:0]), name, n, val)
		return c, ms[i]
	}
	return o.replace(member{v: lo, e: hi}, n, val)
}

// replace returns a copy of o with the value of member m replaced by what val appends (at
// most n bytes), and m in the copy.
func (o *object) replace(m member, n int, val func(dst []byte) []byte) (*object, member) {
	out := make([]byte, 0, len(o.raw)-(m.e-m.v)+n)
	out = val(append(out, o.raw[:m.v]...))
	end := m.e
	m.e = len(out)
	return &object{raw: append(out, o.raw[end:]...)}, m
}

// put is withValueAt for the object with members ms, which it turns into the copy's
// members: it returns the copy, its members and the index of the member set.
func (o *object) put(ms []member, name string, n int, val func(dst []byte) []byte) (*object, []member, int) {
	if i := o.lastNamed(ms, name); i >= 0 {
		c, m := o.replace(ms[i], n, val)
		delta := m.e - ms[i].e
		ms[i] = m
		for j := i + 1; j < len(ms); j++ {
			ms[j].k, ms[j].ke, ms[j].v, ms[j].e = ms[j].k+delta, ms[j].ke+delta, ms[j].v+delta, ms[j].e+delta
		}
		return c, ms, i
	}
	// Append before the closing brace.
	var pos int
	var prefix []byte
	if len(ms) > 0 {
		pos = ms[len(ms)-1].e
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
	return &object{raw: out}, append(ms, nm), len(ms)
}

// without returns a copy of the object without any member named name (the object itself
// when there is none).
func (o *object) without(name string) *object {
	cur := o
	var buf [8]member
	for {
		ms := cur.members(buf[:0])
		i := cur.lastNamed(ms, name)
		if i < 0 {
			return cur
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
}

// span is the position of one array element inside the array's raw bytes.
type span struct{ s, e int }

// array is a JSON array kept as its raw bytes plus element positions, so a re-emitted array
// can reuse the original separators and whitespace.
type array struct {
	raw   []byte
	spans []span
}
