package wire

// TopLevel returns the raw JSON values of the named members of the object body, one per name
// in the order given (nil for a name the body lacks). A name that occurs more than once gives
// its last member's value, as Parse reads it; escaped keys match their decoded text. It reads
// body in one pass with the parser's scanner, which skips string contents many bytes at a
// time, so the members after a large messages array cost little more than the array's
// length. The returned slices share body's memory. Bytes that are not one JSON object give
// an error matching ErrInvalid, and no values.
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
		if err != nil {
			return 0, err
		}
		for n, name := range names {
			if keyIs(body, ks, ke, name) {
				out[n] = body[vs:ve:ve]
			}
		}
		return ve, nil
	})
	if err != nil {
		return nil, err
	}
	if j := skipWS(body, end); j < len(body) {
		return nil, synErr(j, "invalid character %q after top-level value", body[j])
	}
	return out, nil
}
