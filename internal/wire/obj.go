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
	_, ok := o.get(name)
	return ok
}

// get returns the raw value of the last member named name (keys compared by their decoded
// text).
func (o *object) get(name string) (val []byte, ok bool) {
	o.walk(func(m member) {
		if keyMatch(o.raw[m.k:m.ke], name) {
			val, ok = o.raw[m.v:m.e], true
		}
	})
	return val, ok
}

// with returns a copy of the object with member name set to the raw JSON value val, replaced
// in place or appended at the end; all other bytes are kept.
func (o *object) with(name string, val []byte) *object {
	c, _ := o.withAt(name, nil, val)
	return c
}

// withAt is with, also returning the member set in the copy. A known current value cur (a
// subslice of o.raw right after a colon) is replaced without walking o; the member returned
// then has its value offsets only.
func (o *object) withAt(name string, cur, val []byte) (*object, member) {
	return o.withValueAt(name, cur, len(val), func(dst []byte) []byte { return append(dst, val...) })
}

// withValueAt is withAt for the value val appends (about n bytes).
func (o *object) withValueAt(name string, cur []byte, n int, val func(dst []byte) []byte) (*object, member) {
	lo, hi, ok := bodySpan(o.raw, cur)
	m, ins := member{v: lo, e: hi}, val
	if !ok || !bytes.HasSuffix(bytes.TrimRight(o.raw[:lo], " \t\r\n"), []byte(":")) {
		var buf [8]member
		ms := o.members(buf[:0])
		if i := o.lastNamed(ms, name); i >= 0 {
			m = ms[i]
		} else {
			// Append before the closing brace, after a comma when there are members.
			pos, comma := bytes.LastIndexByte(o.raw, '}'), 0
			if len(ms) > 0 {
				pos, comma = ms[len(ms)-1].e, 1
			}
			m, n = member{k: pos + comma, v: pos, e: pos}, comma+quotedCap(len(name))+1+n
			ins = func(dst []byte) []byte {
				if comma > 0 {
					dst = append(dst, ',')
				}
				dst = append(appendQuoted(dst, name), ':')
				m.ke, m.v = len(dst)-1, len(dst)
				return val(dst)
			}
		}
	}
	// raw[m.v:m.e] is replaced (empty when appending; ins then writes the key first).
	c, e := o.splice(m.v, m.e, n, ins)
	m.e = e
	return c, m
}

// splice returns a copy of o with raw[from:to] replaced by what ins appends (about n bytes;
// nil: nothing), and the offset in the copy where that ends.
func (o *object) splice(from, to, n int, ins func(dst []byte) []byte) (*object, int) {
	out := append(make([]byte, 0, len(o.raw)-(to-from)+n), o.raw[:from]...)
	if ins != nil {
		out = ins(out)
	}
	e := len(out)
	return &object{raw: append(out, o.raw[to:]...)}, e
}

// without returns a copy of the object without any member named name (the object itself
// when there is none).
func (o *object) without(name string) *object {
	var buf [8]member
	for {
		ms := o.members(buf[:0])
		i := o.lastNamed(ms, name)
		switch {
		case i < 0:
			return o
		case i > 0: // drop ",<ws>key:value" after the previous member
			o, _ = o.splice(ms[i-1].e, ms[i].e, 0, nil)
		case len(ms) > 1: // first member: drop "key:value,<ws>"
			o, _ = o.splice(ms[0].k, ms[1].k, 0, nil)
		default:
			o, _ = o.splice(ms[0].k, ms[0].e, 0, nil)
		}
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
