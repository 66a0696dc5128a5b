package replay

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/wire"
)

// Requests is an in-memory Transcript: request bodies with their metadata.
type Requests struct {
	// File names the transcript.
	File string
	// Source names the source format (default "requests").
	Source string
	// Format is the bodies' wire format (zero: wire.Anthropic).
	Format wire.Format
	// Bodies are the request bodies in order.
	Bodies [][]byte
	// Metas are the per-request metadata (may be shorter than Bodies: missing entries take
	// the body's "model" and no time).
	Metas []Meta
}

// Name implements Transcript.
func (r *Requests) Name() string { return r.File }

// Kind implements Transcript.
func (r *Requests) Kind() string {
	if r.Source == "" {
		return "requests"
	}
	return r.Source
}

// WireFormat implements Transcript.
func (r *Requests) WireFormat() wire.Format {
	if r.Format == 0 {
		return wire.Anthropic
	}
	return r.Format
}

// Len implements Transcript.
func (r *Requests) Len() int { return len(r.Bodies) }

// Meta implements Transcript.
func (r *Requests) Meta(k int) Meta {
	var m Meta
	if k < len(r.Metas) {
		m = r.Metas[k]
	}
	if m.Model == "" {
		m.Model = gjson.GetBytes(r.Bodies[k], "model").Str
	}
	return m
}

// AppendRequest implements Transcript.
func (r *Requests) AppendRequest(dst []byte, k int) ([]byte, error) {
	if k < 0 || k >= len(r.Bodies) {
		return dst, fmt.Errorf("request %d out of range [0,%d)", k, len(r.Bodies))
	}
	return append(dst, r.Bodies[k]...), nil
}

// LineError reports a bad line of a request log.
type LineError struct {
	// File is the log's name.
	File string
	// Line is the 1-based line number.
	Line int
	// Msg explains the problem.
	Msg string
}

// Error implements error.
func (e *LineError) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

// ErrNotRequestLog is returned by ParseRequestLog when the data is not a request log.
var ErrNotRequestLog = errors.New("not a request log")

// ParseRequestLog reads a request log: JSONL of request bodies or `condense import` envelopes
// (docs/replay.md), in Responses, Chat Completions (detected by its roles and tool_calls) or else
// Anthropic form. Blank lines are skipped; any other bad line or a mixed log is a *LineError.
func ParseRequestLog(name string, data []byte) (*Requests, error) {
	r := &Requests{File: name}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 1<<20), 1<<30)
	line := 0
	openai, anthropic, responses := false, false, false
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if !gjson.ValidBytes(b) || !gjson.ParseBytes(b).IsObject() {
			if len(r.Bodies) == 0 {
				// The first record is no JSON object (e.g. a JSON document spanning lines).
				return nil, fmt.Errorf("%s: %w", name, ErrNotRequestLog)
			}
			msg := "invalid JSON"
			if gjson.ValidBytes(b) {
				msg = "not a JSON object"
			}
			return nil, &LineError{File: name, Line: line, Msg: msg}
		}
		v := gjson.ParseBytes(b)
		var m Meta
		body := v
		if !v.Get("messages").Exists() && !isResponsesBody(v) {
			body = v.Get("body")
			if !body.Exists() {
				body = v.Get("request")
			}
			if !body.IsObject() || !body.Get("messages").IsArray() && !isResponsesBody(body) {
				if len(r.Bodies) == 0 {
					return nil, fmt.Errorf("%s: %w", name, ErrNotRequestLog)
				}
				return nil, &LineError{File: name, Line: line, Msg: "no request body (an object with a messages array)"}
			}
			ts := v.Get("time")
			if !ts.Exists() {
				ts = v.Get("timestamp")
			}
			if ts.Exists() {
				t, err := time.Parse(time.RFC3339Nano, ts.Str)
				if err != nil {
					return nil, &LineError{File: name, Line: line, Msg: "bad time: " + err.Error()}
				}
				m.Time = t
			}
			m.OutputTokens = v.Get("output_tokens").Int()
			if u := v.Get("usage.output_tokens"); u.Exists() && u.Int() > 0 {
				m.OutputTokens = u.Int()
			}
			if v.Get("provider").Str == "openai" {
				openai = true
			}
		} else if !body.Get("messages").IsArray() && !isResponsesBody(body) {
			return nil, &LineError{File: name, Line: line, Msg: "messages is not an array"}
		}
		m.Model = body.Get("model").Str
		if len(r.Bodies) > 0 && isResponsesBody(body) != responses {
			return nil, &LineError{File: name, Line: line, Msg: "a log mixes Responses API bodies with others"}
		}
		if isResponsesBody(body) {
			responses = true
		} else if looksOpenAI(body) {
			openai = true
		} else {
			anthropic = true
		}
		r.Bodies = append(r.Bodies, []byte(body.Raw))
		r.Metas = append(r.Metas, m)
	}
	if err := sc.Err(); err != nil {
		return nil, &LineError{File: name, Line: line + 1, Msg: err.Error()}
	}
	if len(r.Bodies) == 0 {
		return nil, fmt.Errorf("%s: %w: no requests", name, ErrNotRequestLog)
	}
	if openai && anthropic && gjson.GetBytes(r.Bodies[0], "system").Exists() {
		openai = false
	}
	switch {
	case responses:
		r.Format = wire.Responses
	case openai:
		r.Format = wire.OpenAI
	}
	return r, nil
}

// isResponsesBody reports a Responses API request body: "input" (a string or an array) and
// no "messages".
func isResponsesBody(v gjson.Result) bool {
	in := v.Get("input")
	return !v.Get("messages").Exists() && (in.Type == gjson.String || in.IsArray())
}

func looksOpenAI(body gjson.Result) bool {
	if body.Get("system").Exists() {
		return false
	}
	found := false
	body.Get("messages").ForEach(func(_, m gjson.Result) bool {
		switch m.Get("role").Str {
		case "tool", "system", "developer":
			found = true
		case "assistant":
			found = m.Get("tool_calls").Exists()
		}
		return !found
	})
	return found
}
