package transcripts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/jsonesc"
)

// validJSON reports whether b is one valid JSON value.
func validJSON(b []byte) bool { return gjson.ValidBytes(b) }

// hasTopKey reports whether the JSON object b has a top-level member key.
func hasTopKey(b []byte, key string) bool {
	return gjson.GetBytes(b, gjson.Escape(key)).Exists()
}

// topString returns the top-level string member key of b, or "".
func topString(b []byte, key string) string {
	r := gjson.GetBytes(b, gjson.Escape(key))
	if r.Type != gjson.String {
		return ""
	}
	return r.String()
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD (as encoding/json
// does); HTML characters are not escaped.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			dst = jsonesc.AppendEscapedASCII(dst, c)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// fixUTF8 returns JSON with every invalid UTF-8 byte replaced by the escape \ufffd. In JSON such
// bytes can only stand inside strings, so the result is the same JSON with valid strings; values
// the importers keep verbatim then stay valid in the requests. Valid input is returned as is.
func fixUTF8(data []byte) []byte {
	if utf8.Valid(data) {
		return data
	}
	out := make([]byte, 0, len(data)+64)
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size == 1 {
			out = append(out, `\ufffd`...)
		} else {
			out = append(out, data[i:i+size]...)
		}
		i += size
	}
	return out
}

// jsonString returns s encoded as a JSON string.
func jsonString(s string) json.RawMessage { return appendJSONString(nil, s) }

// compactJSON returns raw without insignificant whitespace (a copy only when needed).
func compactJSON(raw []byte) (json.RawMessage, error) {
	if bytes.IndexAny(raw, " \t\r\n") < 0 {
		return raw, nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// rawString decodes a JSON value that must be a string.
func rawString(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// isNull reports whether raw is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// parseTime parses an ISO-8601 timestamp; the zero time when s is empty or malformed.
func parseTime(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}

// unmarshalLine decodes one JSON value into v and maps decoding errors to a *ParseError naming
// the line and, for type errors, the field path.
func unmarshalLine(name string, line int, raw []byte, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return lineError(name, line, err)
	}
	return nil
}

// lineError wraps a JSON decoding error for a line.
func lineError(name string, line int, err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		path := te.Field
		return &ParseError{File: name, Line: line, Path: path,
			Err: fmt.Errorf("wrong type: got JSON %s, want %s", te.Value, te.Type)}
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		if se.Error() == "unexpected end of JSON input" {
			return &ParseError{File: name, Line: line, Err: errors.New("truncated JSON record (unexpected end of input)")}
		}
		return &ParseError{File: name, Line: line, Err: fmt.Errorf("invalid JSON at byte %d: %v", se.Offset, se)}
	}
	if err.Error() == "unexpected end of JSON input" {
		return &ParseError{File: name, Line: line, Err: errors.New("truncated JSON record (unexpected end of input)")}
	}
	return &ParseError{File: name, Line: line, Err: err}
}

// lineOfOffset returns the 1-based line of byte offset off in data.
func lineOfOffset(data []byte, off int64) int {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	if off < 0 {
		off = 0
	}
	return bytes.Count(data[:off], []byte("\n")) + 1
}

// jsonlLines calls fn with (1-based line number, value bytes) for every JSON value in data, several
// per line when values are concatenated, skipping blank lines. A bad or rejected line is a
// malformed record (input.skip); a file with no good record is a *ParseError.
func jsonlLines(in *input, data []byte, fn func(line int, rec []byte) error) error {
	lineNo := 0
	good := 0
	for len(data) > 0 {
		lineNo++
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		recs, err := lineRecords(in.name, lineNo, line)
		if err != nil {
			if err := in.skip(err); err != nil {
				return err
			}
			continue
		}
		for _, rec := range recs {
			if err := fn(lineNo, rec); err != nil {
				if err := in.skip(err); err != nil {
					return err
				}
				continue
			}
			good++
		}
	}
	if good == 0 {
		return &ParseError{File: in.name, Line: 1, Err: ErrEmpty}
	}
	return nil
}

// lineRecords returns the JSON values of one JSONL line: the line itself, or the objects of a
// line holding several concatenated values.
func lineRecords(name string, lineNo int, line []byte) ([][]byte, error) {
	if gjson.ValidBytes(line) {
		return [][]byte{line}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	var vals [][]byte
	var derr error
	for {
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			if err != io.EOF {
				derr = err
			}
			break
		}
		vals = append(vals, v)
	}
	if derr != nil || len(vals) < 2 {
		if derr == nil {
			derr = errors.New("invalid JSON")
		}
		if errors.Is(derr, io.ErrUnexpectedEOF) {
			return nil, &ParseError{File: name, Line: lineNo, Err: errors.New("truncated JSON record (unexpected end of line)")}
		}
		return nil, lineError(name, lineNo, derr)
	}
	for _, v := range vals {
		if v[0] != '{' {
			return nil, &ParseError{File: name, Line: lineNo, Err: fmt.Errorf("record is not a JSON object: %.40s", v)}
		}
	}
	return vals, nil
}

// itoa formats an int.
func itoa(n int) string { return strconv.Itoa(n) }
