package wire

import (
	"bytes"
	"unsafe"
)

// A reusing parse moves the values it parsed anew onto private copies of their bytes, so
// that a session's requests do not pin every body it sent (docs/design/wire.md, "Memory").

// rebaser re-points slices and strings inside src (a range of a body) at the same bytes of
// c, its copy.
type rebaser struct{ src, c []byte }

func (rb *rebaser) bytes(b []byte) []byte {
	if lo, hi, ok := bodySpan(rb.src, b); ok {
		return rb.c[lo:hi:hi]
	}
	return b
}

func (rb *rebaser) str(s string) string { return bodyString(rb.bytes(strBytes(s))) }

// strBytes returns the bytes of s, which must not be modified.
func strBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

func (rb *rebaser) object(o *object) {
	if o != nil {
		o.raw = rb.bytes(o.raw)
	}
}

func (rb *rebaser) array(a *array) {
	if a != nil {
		a.raw = rb.bytes(a.raw)
	}
}

func (rb *rebaser) block(b *Block) {
	b.Type = rb.str(b.Type)
	b.text = rb.str(b.text)
	b.Signature = rb.str(b.Signature)
	b.ID = rb.str(b.ID)
	b.Name = rb.str(b.Name)
	b.Input = rb.bytes(b.Input)
	b.CacheControl = rb.bytes(b.CacheControl)
	for _, c := range b.Content {
		rb.block(c)
	}
	rb.object(b.obj)
	b.str = rb.bytes(b.str)
	rb.object(b.fn)
	rb.array(b.contentArr)
}

func (rb *rebaser) message(m *Message) {
	m.Role = Role(rb.str(string(m.Role)))
	for _, b := range m.Blocks {
		rb.block(b)
	}
	rb.object(m.obj)
	rb.array(m.contentArr)
	rb.array(m.callsArr)
	rb.array(m.itemsArr)
}

// bodySpan returns the body offsets of raw (a subslice of body), or ok false.
func bodySpan(body, raw []byte) (lo, hi int, ok bool) {
	if len(raw) == 0 || len(body) == 0 {
		return 0, 0, false
	}
	o := int(uintptr(unsafe.Pointer(unsafe.SliceData(raw))) - uintptr(unsafe.Pointer(unsafe.SliceData(body))))
	if o < 0 || o+len(raw) > len(body) {
		return 0, 0, false
	}
	return o, o + len(raw), true
}

// detach moves the values of r that a reusing parse parsed anew (those not shared with
// prev) onto private copies of their bytes, returning how many bytes it copied.
func (r *Request) detach(prev *Request) (copied int) {
	body := r.body
	rebase := func(lo, hi int) *rebaser {
		copied += hi - lo
		return &rebaser{src: body[lo:hi], c: bytes.Clone(body[lo:hi])}
	}
	// The messages parsed anew follow the shared prefix: one copy covers them; so for tools.
	if msgs, lo, hi := freshRange(body, r.Messages, prev.origMessages, func(m *Message) []byte { return m.obj.raw }); len(msgs) > 0 {
		rb := rebase(lo, hi)
		for _, m := range msgs {
			rb.message(m)
		}
	}
	if tools, lo, hi := freshRange(body, r.Tools, prev.origTools, func(t *Tool) []byte { return t.raw }); len(tools) > 0 {
		rb := rebase(lo, hi)
		for _, t := range tools {
			t.Name = rb.str(t.Name)
			t.CacheControl = rb.bytes(t.CacheControl)
			t.raw = rb.bytes(t.raw)
		}
	}
	if len(r.System) > 0 && (len(prev.origSystem) == 0 || r.System[0] != prev.origSystem[0]) {
		raw := r.System[0].str // string form
		if !r.sysStr && r.sysArr != nil {
			raw = r.sysArr.raw
		}
		if l, h, ok := bodySpan(body, raw); ok {
			rb := rebase(l, h)
			for _, b := range r.System {
				rb.block(b)
			}
			rb.array(r.sysArr)
		}
	}
	return copied
}

// freshRange returns the elements of cur not shared with orig (by position) whose raw bytes
// are in body, and the range of body that covers them.
func freshRange[T any](body []byte, cur, orig []*T, raw func(*T) []byte) (fresh []*T, lo, hi int) {
	lo = len(body)
	for i, x := range cur {
		if i < len(orig) && x == orig[i] {
			continue
		}
		if l, h, ok := bodySpan(body, raw(x)); ok {
			lo, hi = min(lo, l), max(hi, h)
			fresh = append(fresh, x)
		}
	}
	return fresh, lo, hi
}
