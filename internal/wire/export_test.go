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
