package wire

import (
	"errors"
	"fmt"
)

func (p *parser) schemaErr(off int, path jpath, format string, args ...any) error {
	return &SchemaError{Offset: int64(off), Path: path.String(), Msg: fmt.Sprintf(format, args...)}
}

func isSchema(err error) bool {
	var se *SchemaError
	return errors.As(err, &se)
}

// wrongType validates the value at vs and returns a SchemaError naming the expected type
// (or the syntax error when the value is not even JSON).
func (p *parser) wrongType(vs, depth int, path jpath, want string) error {
	if _, err := scanValue(p.d, vs, depth); err != nil {
		return err
	}
	return p.schemaErr(vs, path, "expected %s, found %s", want, jsonType(p.d[vs]))
}

func jsonType(c byte) string {
	switch c {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// jpath is a JSON path built without allocating; it is rendered only for errors.
type jpath struct {
	parts [8]pathPart
	n     int
}

type pathPart struct {
	key string
	idx int
}

func root(key string) jpath { return jpath{}.key(key) }

func (p jpath) key(k string) jpath { return p.add(pathPart{key: k, idx: -1}) }

func (p jpath) at(i int) jpath { return p.add(pathPart{idx: i}) }

// add returns p with part x appended (the parts past the first 8 are left out).
func (p jpath) add(x pathPart) jpath {
	if p.n < len(p.parts) {
		p.parts[p.n] = x
		p.n++
	}
	return p
}

// String renders the path, e.g. "messages[3].content[0].type"; the root is "$".
func (p jpath) String() string {
	if p.n == 0 {
		return "$"
	}
	var b []byte
	for _, x := range p.parts[:p.n] {
		if x.idx >= 0 {
			b = fmt.Appendf(b, "[%d]", x.idx)
			continue
		}
		if len(b) > 0 {
			b = append(b, '.')
		}
		b = append(b, x.key...)
	}
	return string(b)
}
