package pruner

import "github.com/condense-dev/condense/internal/wire"

// RenderBody is Render on a raw request body. With an empty state it returns Unchanged
// without parsing (the original bytes are forwarded as they are); otherwise it parses the
// body (a malformed body is returned as the wire error, e.g. *wire.SyntaxError) and renders.
func RenderBody(f wire.Format, body []byte, st *State, pol Policy) (*Result, error) {
	if st.Empty() {
		return &Result{Unchanged: true, Body: body}, nil
	}
	req, err := wire.Parse(f, body)
	if err != nil {
		return nil, err
	}
	return Render(req, st, pol), nil
}

// Record returns the record a ref, key, alias or unambiguous id resolves to, or nil.
func (s *State) Record(x string) *Record {
	if k, ok := s.Resolve(x); ok {
		return s.Records[k]
	}
	return nil
}
