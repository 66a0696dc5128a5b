package transcripts

import (
	"fmt"
	"io"
	"strconv"
	"time"
)

// AppendEnvelope appends the envelope of request k (one JSON object, no trailing newline) to
// dst: provider, index, context, line and time when known, model, usage when recorded,
// dropped when set, and last the request body verbatim (docs/formats.md).
func AppendEnvelope(dst []byte, s *Session, k int, p Provider) ([]byte, error) {
	if k < 0 || k >= s.Len() {
		_, err := s.AppendRequest(nil, k, p)
		return dst, err
	}
	pt := s.Point(k)
	dst = append(dst, `{"provider":`...)
	dst = appendJSONString(dst, string(p))
	dst = append(dst, `,"index":`...)
	dst = strconv.AppendInt(dst, int64(k), 10)
	dst = append(dst, `,"context":`...)
	dst = strconv.AppendInt(dst, int64(pt.ContextIn(p)), 10)
	if pt.Line > 0 {
		dst = append(dst, `,"line":`...)
		dst = strconv.AppendInt(dst, int64(pt.Line), 10)
	}
	if !pt.Time.IsZero() {
		dst = append(dst, `,"time":"`...)
		dst = pt.Time.UTC().AppendFormat(dst, time.RFC3339Nano)
		dst = append(dst, '"')
	}
	dst = append(dst, `,"model":`...)
	dst = appendJSONString(dst, pt.Model)
	if u := pt.Usage; u != nil {
		dst = append(dst, `,"usage":{"input_tokens":`...)
		dst = strconv.AppendInt(dst, u.InputTokens, 10)
		dst = append(dst, `,"output_tokens":`...)
		dst = strconv.AppendInt(dst, u.OutputTokens, 10)
		dst = append(dst, `,"cache_read_tokens":`...)
		dst = strconv.AppendInt(dst, u.CacheReadTokens, 10)
		dst = append(dst, `,"cache_write_tokens":`...)
		dst = strconv.AppendInt(dst, u.CacheWriteTokens, 10)
		dst = append(dst, '}')
	}
	if pt.Dropped {
		dst = append(dst, `,"dropped":true`...)
	}
	dst = append(dst, `,"body":`...)
	dst, err := s.AppendRequest(dst, k, p)
	if err != nil {
		return dst, err
	}
	return append(dst, '}'), nil
}

// WriteEnvelopes writes the envelope of every request, one per line, to w (what
// `condense import` prints). progress, when not nil, is called after each line with the
// number of lines written and the total.
func WriteEnvelopes(w io.Writer, s *Session, p Provider, progress func(done, total int)) error {
	var line []byte
	var err error
	for k := 0; k < s.Len(); k++ {
		line, err = AppendEnvelope(line[:0], s, k, p)
		if err != nil {
			return fmt.Errorf("request %d: %w", k, err)
		}
		line = append(line, '\n')
		if _, err := w.Write(line); err != nil {
			return err
		}
		if progress != nil {
			progress(k+1, s.Len())
		}
	}
	return nil
}
