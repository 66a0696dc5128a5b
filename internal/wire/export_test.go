package wire

// WithSystem returns a new request with Anthropic system blocks s (a single string-form
// block keeps the string form; an empty list removes the member).
func (r *Request) WithSystem(s []*Block) *Request {
	nr := r.clone()
	nr.System = s
	return nr
}

// WithField returns a new request whose top-level member key is set to the JSON value raw,
// replaced in place or appended at the end. raw must be one valid JSON value; otherwise, or
// for a modelled member ("model", "stream", "tools", Anthropic "system", "messages" or
// Responses "input") whose new value does not parse, r itself is returned — SetField
// reports the error.
func (r *Request) WithField(key string, raw []byte) *Request {
	nr, err := r.SetField(key, raw)
	if err != nil {
		return r
	}
	return nr
}

// withField returns the top-level object with member key set to the JSON value raw, and
// its members.
func (r *Request) withField(key string, raw []byte) (*object, []member) {
	o := r.obj.with(key, raw)
	return o, o.members(nil)
}

// SetField (tests only) returns a new request whose top-level member key is set to the JSON value raw,
// replaced in place or appended at the end; an unusable value is an error matching ErrInvalid.
// Setting a modelled member re-parses the request so the typed fields follow the new value.
func (r *Request) SetField(key string, raw []byte) (*Request, error) {
	if err := validJSON(raw); err != nil {
		return nil, err
	}
	if modelled(r.Format, key) {
		nb := r.Bytes()
		cur, err := Parse(r.Format, nb)
		if err != nil {
			return nil, err
		}
		o, _ := cur.withField(key, raw)
		return Parse(r.Format, o.raw)
	}
	nr := r.clone()
	nr.obj, nr.members = r.withField(key, raw)
	nr.fieldMod = true
	return nr, nil
}

// modelled reports whether the top-level member key is parsed into typed fields in format f.
func modelled(f Format, key string) bool {
	switch key {
	case "model", "stream", "tools":
		return true
	case "system":
		return f == Anthropic
	case "messages":
		return f != Responses
	case "input":
		return f == Responses
	}
	return false
}
