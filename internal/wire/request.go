package wire

import (
	"bytes"
	"slices"
	"strconv"
)

// modified reports whether the request differs from the parsed body: a With… method was
// used or Model, Stream, System, Tools or Messages were reassigned.
func (r *Request) modified() bool {
	return r.fieldMod || r.Model != r.origModel || r.Stream != r.origStream ||
		!slices.Equal(r.System, r.origSystem) || !slices.Equal(r.Tools, r.origTools) || !slices.Equal(r.Messages, r.origMessages)
}

// Bytes returns the serialized request. For an unmodified request it is Raw() itself (no
// copy).
func (r *Request) Bytes() []byte {
	if !r.modified() {
		return r.body
	}
	e := &encoder{buf: noZeroBytes(r.sizeHint())} // every byte below len is written
	r.encode(e)
	return e.buf[:len(e.buf):len(e.buf)]
}

// Segments returns Bytes() as segments that reference the unchanged bytes (the parsed body's
// members and messages, re-encoded messages) instead of copying them; for an unmodified
// request it is the one segment Raw().
func (r *Request) Segments() Segments {
	if !r.modified() {
		return Segments{r.body}
	}
	// About two segments per message (its bytes, and the short pieces between messages), and
	// room for the messages short enough to be copied.
	small := 512
	for _, m := range r.Messages {
		if len(m.obj.raw) < minSegment {
			small += len(m.obj.raw) + 1
		}
	}
	e := &encoder{seg: true, buf: make([]byte, 0, small), segs: make(Segments, 0, 2*len(r.Messages)+8)}
	r.encode(e)
	return e.done()
}

// sizeHint returns at least the length of the serialized request: the parsed object with
// each re-encoded list's elements replaced (every new element counted with a separator of
// its own) and room for the members added.
func (r *Request) sizeHint() int {
	n := len(r.obj.raw) + 128 + len(r.Model)
	if !slices.Equal(r.Messages, r.origMessages) {
		n += growth(r.Messages, r.origMessages, func(m *Message) int { return len(m.obj.raw) })
	}
	if !slices.Equal(r.Tools, r.origTools) {
		n += growth(r.Tools, r.origTools, func(t *Tool) int { return len(t.raw) })
	}
	if r.Format == Anthropic && !slices.Equal(r.System, r.origSystem) {
		// A string-form block is written as a text block object (a lone one as the string,
		// shorter); the system string it replaces is at most one block, inside the slack.
		n += growth(r.System, r.origSystem, func(b *Block) int {
			if b.obj == nil {
				return len(b.Raw()) + len(`{"type":"text","text":}`)
			}
			return len(b.Raw())
		})
	}
	return max(n, 64) // never negative, whatever the lists did
}

// growth bounds how much longer (negative: shorter) a list becomes when its elements orig are
// replaced by cur; the separators of orig stay counted in the parsed object.
func growth[T any](cur, orig []*T, size func(*T) int) int {
	d := 0
	for _, x := range cur {
		d += size(x) + 1
	}
	for _, x := range orig {
		d -= size(x)
	}
	return d
}

// encode writes the serialized modified request.
func (r *Request) encode(e *encoder) {
	e.raw(r.body[:skipWS(r.body, 0)])
	o, ms := r.obj, r.members
	// The modelled members, re-encoded when changed: in place of the last member with their
	// key, else appended in this order; a changed empty system or tools list is removed.
	fields := [...]struct {
		key              string
		changed, removed bool
		val              func(*encoder)
	}{
		{key: messagesKey(r.Format), changed: !slices.Equal(r.Messages, r.origMessages), val: r.encodeMessages},
		{key: "model", changed: r.Model != r.origModel, val: func(e *encoder) { e.buf = appendQuoted(e.buf, r.Model) }},
		{key: "stream", changed: r.Stream != r.origStream, val: func(e *encoder) { e.buf = strconv.AppendBool(e.buf, r.Stream) }},
		{key: "system", changed: r.Format == Anthropic && !slices.Equal(r.System, r.origSystem), removed: len(r.System) == 0, val: r.encodeSystem},
		{key: "tools", changed: !slices.Equal(r.Tools, r.origTools), removed: len(r.Tools) == 0, val: r.encodeTools},
	}
	var at [len(fields)]int // index in ms of the member a changed field replaces, -1 for none
	for f, x := range fields {
		at[f] = -1
		if x.changed {
			at[f] = o.lastNamed(ms, x.key)
		}
	}
	// What is written, in order: i < len(ms) the member ms[i] (replaced when in at), else the
	// field i-len(ms) appended.
	var buf [16]int
	out := buf[:0]
	for i := range ms {
		if f := slices.Index(at[:], i); f < 0 || !fields[f].removed {
			out = append(out, i)
		}
	}
	for f, x := range fields {
		if x.changed && !x.removed && at[f] < 0 {
			out = append(out, len(ms)+f)
		}
	}
	spans := make([]span, len(ms))
	for i, m := range ms {
		spans[i] = span{s: m.k, e: m.e}
	}
	encodeList(e, &array{raw: o.raw, spans: spans}, len(out), '{', '}', func(k int) {
		i, f := out[k], out[k]-len(ms)
		if i < len(ms) {
			m := ms[i]
			if f = slices.Index(at[:], i); f < 0 {
				e.raw(o.raw[m.k:m.e])
				return
			}
			e.raw(o.raw[m.k:m.v])
		} else {
			e.buf = append(appendQuoted(e.buf, fields[f].key), ':')
		}
		fields[f].val(e)
	})
	e.raw(r.body[r.objEnd:])
}

// messagesKey is the top-level member holding the messages in format f.
func messagesKey(f Format) string {
	if f == Responses {
		return "input"
	}
	return "messages"
}

func (r *Request) encodeMessages(e *encoder) {
	msgs := r.Messages
	if r.Format == Responses {
		msgs = withItems(msgs) // an assistant message without blocks has no item to write
	}
	encodeList(e, r.msgsArr, len(msgs), '[', ']', func(i int) {
		e.raw(msgs[i].obj.raw)
	})
}

// withItems returns msgs without the messages whose bytes are empty (msgs itself when
// there is none).
func withItems(msgs []*Message) []*Message {
	empty := func(m *Message) bool { return len(m.obj.raw) == 0 }
	if !slices.ContainsFunc(msgs, empty) {
		return msgs
	}
	return slices.DeleteFunc(slices.Clone(msgs), empty)
}

func (r *Request) encodeTools(e *encoder) {
	encodeList(e, r.toolsArr, len(r.Tools), '[', ']', func(i int) {
		e.raw(r.Tools[i].raw)
	})
}

func (r *Request) encodeSystem(e *encoder) {
	if len(r.System) == 1 && r.System[0].obj == nil && r.System[0].str != nil && r.System[0].str[0] == '"' {
		e.raw(r.System[0].str)
		return
	}
	encodeList(e, r.sysArr, len(r.System), '[', ']', func(i int) {
		r.System[i].encodeElem(e)
	})
}

// clone returns a shallow copy of the request (sharing everything).
func (r *Request) clone() *Request {
	nr := *r
	return &nr
}

// WithMessages returns a new request with messages m; everything else is shared.
func (r *Request) WithMessages(m []*Message) *Request {
	nr := r.clone()
	nr.Messages = m
	return nr
}

// WithTools returns a new request with tools t; everything else is shared. An empty list
// removes the "tools" member.
func (r *Request) WithTools(t []*Tool) *Request {
	nr := r.clone()
	nr.Tools = t
	return nr
}

// DuplicateField returns the first top-level member name, decoded, that the body holds more
// than once ("" when every name is unique). Parse and Field read the last such member, but
// the body re-encoded from the request keeps every copy.
func (r *Request) DuplicateField() string {
	for i, mi := range r.members {
		ki := r.obj.raw[mi.k:mi.ke]
		for _, mj := range r.members[:i] {
			if kj := r.obj.raw[mj.k:mj.ke]; bytes.Equal(ki, kj) || (hasBackslash(ki) || hasBackslash(kj)) && unquote(ki) == unquote(kj) {
				return unquote(ki)
			}
		}
	}
	return ""
}

// Field returns the raw value of the top-level member key (the last one when duplicated).
func (r *Request) Field(key string) (raw []byte, ok bool) {
	if i := r.obj.lastNamed(r.members, key); i >= 0 {
		m := r.members[i]
		return r.obj.raw[m.v:m.e], true
	}
	return nil, false
}

// systemRaw returns the raw value of the parsed Anthropic "system" member.
func (r *Request) systemRaw() ([]byte, bool) {
	switch {
	case r.sysStr && len(r.origSystem) == 1:
		return r.origSystem[0].str, true
	case r.sysArr != nil:
		return r.sysArr.raw, true
	}
	return nil, false
}
