package wire

// TopLevel returns the raw values (sharing body's memory; nil when absent, the last when
// repeated) of the named members of the JSON object body, in one scan; bytes that are not
// one JSON object give an error matching ErrInvalid.
func TopLevel(body []byte, names ...string) ([][]byte, error) {
	out := make([][]byte, len(names))
	i := skipWS(body, 0)
	if i >= len(body) || body[i] != '{' {
		if i >= len(body) {
			return nil, synErr(i, "unexpected end of input, expected an object")
		}
		return nil, synErr(i, "invalid character %q looking for beginning of object", body[i])
	}
	end, err := scanObject(body, i, 1, func(ks, ke, vs int) (int, error) {
		ve, err := scanValue(body, vs, 1)
		for n, name := range names {
			if err == nil && keyMatch(body[ks:ke], name) {
				out[n] = body[vs:ve:ve]
			}
		}
		return ve, err
	})
	if err != nil {
		return nil, err
	}
	if j := skipWS(body, end); j < len(body) {
		return nil, synErr(j, "invalid character %q after top-level value", body[j])
	}
	return out, nil
}
