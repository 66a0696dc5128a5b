package wire

import "strconv"

// Modified reports whether the request differs from the parsed body: a With… method was
// used or Model, Stream, System, Tools or Messages were reassigned.
func (r *Request) Modified() bool {
	return r.fieldMod || r.Model != r.origModel || r.Stream != r.origStream ||
		!samePtrs(r.System, r.origSystem) || !samePtrs(r.Tools, r.origTools) || !samePtrs(r.Messages, r.origMessages)
}

func samePtrs[T any](a, b []*T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Bytes returns the serialized request. For an unmodified request it is Raw() itself (no
// copy).
func (r *Request) Bytes() []byte {
	if !r.Modified() {
		return r.body
	}
	return r.AppendTo(make([]byte, 0, r.sizeHint()))
}

func (r *Request) sizeHint() int {
	n := len(r.obj.raw) + 64
	if !samePtrs(r.Messages, r.origMessages) {
		for _, m := range r.Messages {
			n += len(m.obj.raw) + 1
		}
		if r.msgsArr != nil {
			n -= len(r.msgsArr.raw)
		}
	}
	return n
}

// AppendTo appends the serialized request to dst.
func (r *Request) AppendTo(dst []byte) []byte {
	if !r.Modified() {
		return append(dst, r.body...)
	}
	start := skipWS(r.body, 0)
	dst = append(dst, r.body[:start]...)
	o := r.obj
	type extra struct {
		key string
		val func([]byte) []byte
	}
	// Decide which modelled members are re-encoded.
	msgs := !samePtrs(r.Messages, r.origMessages)
	tools := !samePtrs(r.Tools, r.origTools)
	sys := r.Format == Anthropic && !samePtrs(r.System, r.origSystem)
	model := r.Model != r.origModel
	stream := r.Stream != r.origStream
	// Last occurrence of each modelled key is the one that is replaced.
	last := func(name string) int { return o.find(name) }
	idxMsgs, idxTools, idxSys, idxModel, idxStream := last("messages"), last("tools"), last("system"), last("model"), last("stream")
	var keep []int // member indexes emitted, in order
	for i := range o.members {
		if (sys && i == idxSys && len(r.System) == 0) || (tools && i == idxTools && len(r.Tools) == 0) {
			continue // removed
		}
		keep = append(keep, i)
	}
	var extras []extra
	if msgs && idxMsgs < 0 {
		extras = append(extras, extra{"messages", r.appendMessages})
	}
	if model && idxModel < 0 {
		extras = append(extras, extra{"model", func(d []byte) []byte { return appendQuoted(d, r.Model) }})
	}
	if stream && idxStream < 0 {
		extras = append(extras, extra{"stream", func(d []byte) []byte { return strconv.AppendBool(d, r.Stream) }})
	}
	if sys && idxSys < 0 && len(r.System) > 0 {
		extras = append(extras, extra{"system", r.appendSystem})
	}
	if tools && idxTools < 0 && len(r.Tools) > 0 {
		extras = append(extras, extra{"tools", r.appendTools})
	}
	spans := make([]span, len(o.members))
	for i, m := range o.members {
		spans[i] = span{s: m.k, e: m.e}
	}
	layout := &array{raw: o.raw, spans: spans}
	if len(o.members) == 0 {
		layout = nil
	}
	n := len(keep) + len(extras)
	dst = appendMembers(dst, o.raw, layout, n, func(d []byte, k int) []byte {
		if k >= len(keep) {
			x := extras[k-len(keep)]
			d = appendQuoted(d, x.key)
			d = append(d, ':')
			return x.val(d)
		}
		i := keep[k]
		m := o.members[i]
		d = append(d, o.raw[m.k:m.v]...)
		switch {
		case msgs && i == idxMsgs:
			return r.appendMessages(d)
		case tools && i == idxTools:
			return r.appendTools(d)
		case sys && i == idxSys:
			return r.appendSystem(d)
		case model && i == idxModel:
			return appendQuoted(d, r.Model)
		case stream && i == idxStream:
			return strconv.AppendBool(d, r.Stream)
		}
		return append(d, o.raw[m.v:m.e]...)
	})
	return append(dst, r.body[r.objEnd:]...)
}

// appendMembers is appendList for objects: braces instead of brackets.
func appendMembers(dst, raw []byte, layout *array, n int, elem func([]byte, int) []byte) []byte {
	if n == 0 {
		return append(dst, '{', '}')
	}
	start := len(dst)
	dst = appendList(dst, layout, n, elem)
	dst[start] = '{'
	dst[len(dst)-1] = '}'
	return dst
}

func (r *Request) appendMessages(d []byte) []byte {
	return appendList(d, r.msgsArr, len(r.Messages), func(d []byte, i int) []byte {
		return append(d, r.Messages[i].obj.raw...)
	})
}

func (r *Request) appendTools(d []byte) []byte {
	return appendList(d, r.toolsArr, len(r.Tools), func(d []byte, i int) []byte {
		return append(d, r.Tools[i].raw...)
	})
}

func (r *Request) appendSystem(d []byte) []byte {
	if len(r.System) == 1 && r.System[0].obj == nil && r.System[0].str != nil && r.System[0].str[0] == '"' {
		return append(d, r.System[0].str...)
	}
	return appendList(d, r.sysArr, len(r.System), func(d []byte, i int) []byte {
		return r.System[i].appendElem(d)
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

// WithSystem returns a new request with Anthropic system blocks s (a single string-form
// block keeps the string form; an empty list removes the member).
func (r *Request) WithSystem(s []*Block) *Request {
	nr := r.clone()
	nr.System = s
	return nr
}

// Field returns the raw value of the top-level member key (the last one when duplicated).
func (r *Request) Field(key string) (raw []byte, ok bool) {
	return r.obj.get(key)
}

// WithField returns a new request whose top-level member key is set to the JSON value raw,
// replaced in place or appended at the end. raw must be one valid JSON value; otherwise, or
// for a modelled member ("model", "stream", "system", "tools", "messages") whose new value
// does not parse, r itself is returned — SetField reports the error.
func (r *Request) WithField(key string, raw []byte) *Request {
	nr, err := r.SetField(key, raw)
	if err != nil {
		return r
	}
	return nr
}

// SetField is WithField returning an error (matching ErrInvalid) for an unusable value.
// Setting a modelled member re-parses the request so the typed fields follow the new value.
func (r *Request) SetField(key string, raw []byte) (*Request, error) {
	if err := validJSON(raw); err != nil {
		return nil, err
	}
	switch key {
	case "model", "stream", "system", "tools", "messages":
		nb := r.Bytes()
		cur, err := Parse(r.Format, nb)
		if err != nil {
			return nil, err
		}
		body := cur.obj.with(key, raw).raw
		nr, err := Parse(r.Format, body)
		if err != nil {
			return nil, err
		}
		return nr, nil
	}
	nr := r.clone()
	nr.obj = r.obj.with(key, raw)
	nr.fieldMod = true
	return nr, nil
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
