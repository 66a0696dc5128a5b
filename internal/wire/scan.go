package wire

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"
	"unsafe"

	"github.com/condense-dev/condense/internal/jsonesc"
)

// MaxDepth is the deepest nesting of JSON arrays and objects Parse accepts; deeper input is
// rejected with a *SyntaxError instead of exhausting the stack.
const MaxDepth = 512

// ErrInvalid is matched (errors.Is) by every error Parse and NewTool return for malformed
// input: *SyntaxError for bytes that are not JSON, *SchemaError for JSON of the wrong shape.
var ErrInvalid = errors.New("wire: invalid request")

// SyntaxError reports bytes that are not valid JSON (or not valid UTF-8 inside a string).
type SyntaxError struct {
	Offset int64  // byte offset in the body where the problem was detected
	Msg    string // what was wrong
}

// Error implements error.
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("wire: invalid JSON at byte %d: %s", e.Offset, e.Msg)
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *SyntaxError) Is(target error) bool { return target == ErrInvalid }

// SchemaError reports valid JSON whose shape does not fit the provider format, for example
// a message that is not an object or a "role" that is not a string.
type SchemaError struct {
	Offset int64  // byte offset of the offending value in the body
	Path   string // JSON path of the value, e.g. "messages[3].content[0].type"
	Msg    string // what was wrong
}

// Error implements error.
func (e *SchemaError) Error() string {
	return fmt.Sprintf("wire: %s at byte %d: %s", e.Path, e.Offset, e.Msg)
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *SchemaError) Is(target error) bool { return target == ErrInvalid }

func synErr(off int, format string, args ...any) error {
	return &SyntaxError{Offset: int64(off), Msg: fmt.Sprintf(format, args...)}
}

// isWS reports JSON insignificant whitespace.
func isWS(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

// skipWS returns the offset of the first byte at or after d[i] that is not whitespace.
// Compact JSON has none, and any byte above ' ' ends the loop after one comparison.
func skipWS(d []byte, i int) int {
	for i < len(d) && d[i] <= ' ' && isWS(d[i]) {
		i++
	}
	return i
}

// strPlain marks bytes that may appear in a JSON string without further checks:
// printable ASCII other than '"' and '\\'.
var strPlain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return
}()

const (
	lo8 = 0x0101010101010101
	hi8 = 0x8080808080808080
)

// scanString validates the JSON string starting at d[i] == '"' and returns the offset just
// past its closing quote and whether it contains escapes.
func scanString(d []byte, i int) (end int, escaped bool, err error) {
	start := i
	if i = skipShort(d, i+1); i < len(d) && d[i] == '"' {
		return i + 1, false, nil
	}
	for {
		// Fast path: the string kernel skips plain ASCII, two-byte escapes and valid
		// UTF-8; what it stops at is checked below.
		n, esc := scanRun(d[i:])
		i += n
		escaped = escaped || esc
		if i >= len(d) {
			return 0, false, synErr(start, "unterminated string")
		}
		c := d[i]
		switch {
		case c == '"':
			return i + 1, escaped, nil
		case c == '\\':
			escaped = true
			if i+1 >= len(d) {
				return 0, false, synErr(start, "unterminated string")
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(d) {
					return 0, false, synErr(i, "truncated \\u escape")
				}
				for k := i + 2; k < i+6; k++ {
					if unhex(d[k]) < 0 {
						return 0, false, synErr(k, "invalid hex digit in \\u escape")
					}
				}
				i += 6
			default:
				return 0, false, synErr(i, "invalid escape character %q", d[i+1])
			}
		case c < 0x20:
			return 0, false, synErr(i, "control character 0x%02x in string", c)
		default:
			r, size := utf8.DecodeRune(d[i:])
			if r == utf8.RuneError && size <= 1 {
				return 0, false, synErr(i, "invalid UTF-8 in string")
			}
			i += size
		}
	}
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// scanNumber validates a JSON number starting at d[i].
func scanNumber(d []byte, i int) (int, error) {
	start := i
	if i < len(d) && d[i] == '-' {
		i++
	}
	if i >= len(d) {
		return 0, synErr(start, "truncated number")
	}
	switch {
	case d[i] == '0':
		i++
	case '1' <= d[i] && d[i] <= '9':
		i = digits(d, i)
	default:
		return 0, synErr(i, "invalid number")
	}
	if i < len(d) && d[i] == '.' {
		n := i + 1
		if i = digits(d, n); i == n {
			return 0, synErr(i, "expected digit after decimal point")
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		n := i
		if i = digits(d, n); i == n {
			return 0, synErr(i, "expected digit in exponent")
		}
	}
	return i, nil
}

// digits returns the offset of the first byte at or after d[i] that is not a decimal digit.
func digits(d []byte, i int) int {
	for i < len(d) && '0' <= d[i] && d[i] <= '9' {
		i++
	}
	return i
}

func scanLiteral(d []byte, i int, lit string) (int, error) {
	if len(d)-i < len(lit) || string(d[i:i+len(lit)]) != lit {
		return 0, synErr(i, "invalid literal, expected %s", lit)
	}
	return i + len(lit), nil
}

// scanValue validates the JSON value starting at d[i] (no leading whitespace) and returns
// the offset just past it.
func scanValue(d []byte, i, depth int) (int, error) {
	if i >= len(d) {
		return 0, synErr(i, "unexpected end of input, expected a value")
	}
	switch c := d[i]; c {
	case '"':
		end, _, err := scanString(d, i)
		return end, err
	case '{':
		return scanObject(d, i, depth+1, nil)
	case '[':
		return scanArray(d, i, depth+1, nil)
	case 't':
		return scanLiteral(d, i, "true")
	case 'f':
		return scanLiteral(d, i, "false")
	case 'n':
		return scanLiteral(d, i, "null")
	default:
		if c == '-' || ('0' <= c && c <= '9') {
			return scanNumber(d, i)
		}
		return 0, synErr(i, "invalid character %q looking for beginning of value", c)
	}
}

// memberFunc is called for each object member with the offsets in d of its key and value;
// it validates the value and returns its end.
type memberFunc func(keyStart, keyEnd, valStart int) (valEnd int, err error)

// scanObject validates the object at d[i] == '{'. When fn is non-nil it parses each value.
func scanObject(d []byte, i, depth int, fn memberFunc) (int, error) {
	if depth > MaxDepth {
		return 0, synErr(i, "nesting deeper than %d", MaxDepth)
	}
	if i = skipWS(d, i+1); i < len(d) && d[i] == '}' {
		return i + 1, nil
	}
	for {
		ks, ke, vs, err := memberKey(d, i)
		if err != nil {
			return 0, err
		}
		if fn != nil {
			i, err = fn(ks, ke, vs)
		} else {
			i, err = scanValue(d, vs, depth)
		}
		if err != nil {
			return 0, err
		}
		if i, err = memberNext(d, i); err != nil || d[i-1] == '}' {
			return i, err
		}
	}
}

// memberKey scans the key of the object member at d[i] and the colon after it,
// returning the key literal's offsets and where its value starts (a byte is there).
func memberKey(d []byte, i int) (ks, ke, vs int, err error) {
	if i >= len(d) {
		return 0, 0, 0, synErr(i, "unexpected end of input in object")
	}
	if d[i] != '"' {
		return 0, 0, 0, synErr(i, "invalid character %q looking for object key", d[i])
	}
	ke, _, err = scanString(d, i)
	if err != nil {
		return 0, 0, 0, err
	}
	j := skipWS(d, ke)
	if j >= len(d) || d[j] != ':' {
		return 0, 0, 0, synErr(j, "expected ':' after object key")
	}
	j = skipWS(d, j+1)
	if j >= len(d) {
		return 0, 0, 0, synErr(j, "unexpected end of input, expected a value")
	}
	return i, ke, j, nil
}

// memberNext follows an object member's value ending at d[i]: it returns the offset of
// the next key, or just past the closing brace (d[end-1] == '}').
func memberNext(d []byte, i int) (int, error) {
	if i < len(d) && d[i] == ',' && i+1 < len(d) && d[i+1] == '"' {
		return i + 1, nil // compact JSON
	}
	i = skipWS(d, i)
	if i >= len(d) {
		return 0, synErr(i, "unexpected end of input in object")
	}
	switch d[i] {
	case ',':
		return skipWS(d, i+1), nil
	case '}':
		return i + 1, nil
	}
	return 0, synErr(i, "invalid character %q after object member", d[i])
}

// elemFunc is called for each array element at valStart; it returns the element's end.
type elemFunc func(idx, valStart int) (valEnd int, err error)

// scanArray validates the array at d[i] == '['. When fn is non-nil it parses each element.
func scanArray(d []byte, i, depth int, fn elemFunc) (int, error) {
	if depth > MaxDepth {
		return 0, synErr(i, "nesting deeper than %d", MaxDepth)
	}
	i = skipWS(d, i+1)
	if i < len(d) && d[i] == ']' {
		return i + 1, nil
	}
	for idx := 0; ; idx++ {
		var err error
		if fn != nil {
			if i >= len(d) {
				return 0, synErr(i, "unexpected end of input in array")
			}
			i, err = fn(idx, i)
		} else {
			i, err = scanValue(d, i, depth)
		}
		if err != nil {
			return 0, err
		}
		i = skipWS(d, i)
		if i >= len(d) {
			return 0, synErr(i, "unexpected end of input in array")
		}
		switch d[i] {
		case ',':
			i = skipWS(d, i+1)
		case ']':
			return i + 1, nil
		default:
			return 0, synErr(i, "invalid character %q after array element", d[i])
		}
	}
}

// unquote decodes a validated JSON string literal (including quotes) into a string of its own.
func unquote(lit []byte) string {
	s := lit[1 : len(lit)-1]
	if !hasBackslash(s) {
		return string(s)
	}
	return decoded(bodyString(s))
}

func hasBackslash(s []byte) bool { return bytes.IndexByte(s, '\\') >= 0 }

// decoded returns, in memory of its own, the text that s, the body of a validated string
// literal with escapes, decodes to.
func decoded(s string) string {
	return bodyString(appendDecoded(noZeroBytes(len(s)), s))
}

// appendDecoded appends the text that s, the body of a validated string literal, decodes to
// (never longer than s).
func appendDecoded(dst []byte, s string) []byte {
	dst = slices.Grow(dst, len(s))
	src := unsafe.Slice(unsafe.StringData(s), len(s))
	buf := dst[len(dst) : len(dst)+len(s)] // decodeRun writes anywhere in buf[j:j+len(src)-i]
	i, j := 0, 0
	for i < len(src) {
		n, m := decodeRun(buf[j:], src[i:])
		i += n
		j += m
		for i < len(src) && strPlain[src[i]] {
			buf[j] = src[i]
			i++
			j++
		}
		if i >= len(src) {
			break
		}
		switch c := src[i]; {
		case c >= utf8.RuneSelf: // a UTF-8 sequence the kernel left (validated: complete)
			size := max(utf8Size(src[i:]), 1)
			j += copy(buf[j:], src[i:i+size])
			i += size
		case escDecode[src[i+1]] != 0:
			buf[j] = escDecode[src[i+1]]
			i += 2
			j++
		default: // \uXXXX, the only other escape
			out, used := decodeU(src[i:min(i+12, len(src))], buf[j:j])
			j += len(out)
			i += used
		}
	}
	return dst[:len(dst)+j]
}

func hex4(b []byte) int {
	return unhex(b[0])<<12 | unhex(b[1])<<8 | unhex(b[2])<<4 | unhex(b[3])
}

// appendQuoted appends s as a JSON string literal. Invalid UTF-8 becomes U+FFFD.
func appendQuoted(dst []byte, s string) []byte {
	dst, _ = appendQuotedCheck(dst, s)
	return dst
}

// appendQuotedCheck is appendQuoted also reporting whether invalid UTF-8 was replaced (so
// the literal does not decode to s).
func appendQuotedCheck(dst []byte, s string) ([]byte, bool) {
	dst = append(dst, '"')
	b := strBytes(s) // read only
	replaced := false
	start := 0
	for i := skipPlain(b, 0); i < len(b); i = skipPlain(b, i) {
		if c := b[i]; c < utf8.RuneSelf {
			dst = append(dst, b[start:i]...)
			dst = jsonesc.AppendEscapedASCII(dst, c)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, b[start:i]...)
			dst = append(dst, `\ufffd`...)
			replaced = true
			start = i + 1
		}
		i += size
	}
	dst = append(dst, b[start:]...)
	return append(dst, '"'), replaced
}

// quote returns s as a JSON string literal.
func quote(s string) []byte { return appendQuoted(make([]byte, 0, quotedCap(len(s))), s) }

// quotedCap is a capacity for the literal of an n-byte string: room for a few escapes
// (text has a newline every few dozen bytes) so the buffer rarely grows.
func quotedCap(n int) int { return n + n/16 + 8 }

// validJSON reports whether raw is exactly one JSON value (surrounding whitespace allowed).
func validJSON(raw []byte) error {
	i := skipWS(raw, 0)
	end, err := scanValue(raw, i, 0)
	if err != nil {
		return err
	}
	if j := skipWS(raw, end); j != len(raw) {
		return synErr(j, "unexpected data after top-level value")
	}
	return nil
}

// bodyString returns b as a string sharing its memory: only for bytes never written again,
// the parsed body's (Parse's contract) and decoded strings'.
func bodyString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
