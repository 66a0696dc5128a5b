package wire

import "unsafe"

// A reusing parse moves the values it parsed anew onto private copies of their bytes, so
// that a session's requests do not pin every body it sent (docs/design/wire.md, "Memory").

// rebaser re-points slices and strings inside body[lo:lo+len(c)] at the same bytes of c.
type rebaser struct {
	base uintptr // address of body[lo]
	c    []byte
}

func newRebaser(body []byte, lo, hi int) *rebaser {
	c := make([]byte, hi-lo)
	copy(c, body[lo:hi])
	return &rebaser{base: uintptr(unsafe.Pointer(unsafe.SliceData(body))) + uintptr(lo), c: c}
}

// off returns the offset of the n bytes at p inside the copied range, or -1.
func (rb *rebaser) off(p unsafe.Pointer, n int) int {
	a := uintptr(p)
	if a < rb.base || a-rb.base+uintptr(n) > uintptr(len(rb.c)) {
		return -1
	}
	return int(a - rb.base)
}

func (rb *rebaser) bytes(b []byte) []byte {
	if len(b) == 0 {
		return b
	}
	o := rb.off(unsafe.Pointer(unsafe.SliceData(b)), len(b))
	if o < 0 {
		return b
	}
	return rb.c[o : o+len(b) : o+len(b)]
}

func (rb *rebaser) str(s string) string {
	if len(s) == 0 {
		return s
	}
	o := rb.off(unsafe.Pointer(unsafe.StringData(s)), len(s))
	if o < 0 {
		return s
	}
	return bodyString(rb.c[o : o+len(s)])
}

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
// prev) onto private copies of their bytes.
func (r *Request) detach(prev *Request) freshValues {
	body := r.body
	var fv freshValues
	// Messages: the ones parsed anew follow the shared prefix; one copy covers them.
	lo, hi := len(body), 0
	for i, m := range r.Messages {
		if i < len(prev.origMessages) && m == prev.origMessages[i] {
			continue
		}
		if l, h, ok := bodySpan(body, m.obj.raw); ok {
			lo, hi = min(lo, l), max(hi, h)
			fv.msgs = append(fv.msgs, m)
		}
	}
	if len(fv.msgs) > 0 {
		fv.rebaseMessages(newRebaser(body, lo, hi))
		fv.copied += hi - lo
	}
	// Tools parsed anew.
	lo, hi = len(body), 0
	for i, t := range r.Tools {
		if i < len(prev.origTools) && t == prev.origTools[i] {
			continue
		}
		if l, h, ok := bodySpan(body, t.raw); ok {
			lo, hi = min(lo, l), max(hi, h)
			fv.tools = append(fv.tools, t)
		}
	}
	if len(fv.tools) > 0 {
		fv.rebaseTools(newRebaser(body, lo, hi))
		fv.copied += hi - lo
	}
	// The system value, unless shared.
	if len(r.System) > 0 && (len(prev.origSystem) == 0 || r.System[0] != prev.origSystem[0]) {
		raw := r.System[0].str // string form
		if !r.sysStr && r.sysArr != nil {
			raw = r.sysArr.raw
		}
		if l, h, ok := bodySpan(body, raw); ok {
			fv.system, fv.sysArr = r.System, r.sysArr
			fv.rebaseSystem(newRebaser(body, l, h))
			fv.copied += h - l
		}
	}
	return fv
}

// freshValues are the values a reusing parse parsed anew (not shared with prev).
type freshValues struct {
	msgs   []*Message
	tools  []*Tool
	system []*Block // nil when shared
	sysArr *array
	copied int // bytes of the private copies
}

func (fv *freshValues) rebaseMessages(rb *rebaser) {
	for _, m := range fv.msgs {
		rb.message(m)
	}
}

func (fv *freshValues) rebaseTools(rb *rebaser) {
	for _, t := range fv.tools {
		t.Name = rb.str(t.Name)
		t.CacheControl = rb.bytes(t.CacheControl)
		t.raw = rb.bytes(t.raw)
	}
}

func (fv *freshValues) rebaseSystem(rb *rebaser) {
	for _, b := range fv.system {
		rb.block(b)
	}
	rb.array(fv.sysArr)
}

// unslab moves the request's own top-level object, its messages and tools arrays and the
// system array this parse made (which point into its body and only r references) out of
// the parser's slab chunks and clears their slots there.
func (r *Request) unslab(prev *Request) {
	if o := r.obj; o != nil {
		c := *o
		*o = object{}
		r.obj = &c
	}
	r.msgsArr = unslabArray(r.msgsArr)
	r.toolsArr = unslabArray(r.toolsArr)
	if r.sysArr != prev.sysArr {
		r.sysArr = unslabArray(r.sysArr)
	}
}

// unslabArray returns a copy of *a outside the slab and clears a's slot (nil for nil).
func unslabArray(a *array) *array {
	if a == nil {
		return nil
	}
	c := *a
	*a = array{}
	return &c
}

// sweep clears, after detach and unslab, every slot of a reusing parse's slab chunks that
// still points into the body: a value the parse read and dropped, which would pin it
// (docs/design/wire.md, "Memory").
func (p *parser) sweep() {
	in := func(b []byte) bool {
		_, _, ok := bodySpan(p.d, b)
		return ok
	}
	str := func(s string) bool { return len(s) > 0 && in(unsafe.Slice(unsafe.StringData(s), len(s))) }
	for _, c := range p.objs.chunks {
		for i := range c {
			if in(c[i].raw) {
				c[i] = object{}
			}
		}
	}
	for _, c := range p.arrs.chunks {
		for i := range c {
			if in(c[i].raw) {
				c[i] = array{}
			}
		}
	}
	for _, c := range p.blocks.chunks {
		for i := range c {
			b := &c[i]
			if str(b.Type) || str(b.text) || str(b.Signature) || str(b.ID) || str(b.Name) || in(b.Input) || in(b.CacheControl) || in(b.str) {
				*b = Block{}
			}
		}
	}
	for _, c := range p.msgs.chunks {
		for i := range c {
			if str(string(c[i].Role)) {
				c[i] = Message{}
			}
		}
	}
}
