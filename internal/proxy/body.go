package proxy

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"

	"github.com/condense-dev/condense/internal/logs"
)

// refusal is a request the proxy answers itself with an error: the status, the
// X-Condense-Error code and the message.
type refusal struct {
	status    int
	code, msg string
	attrs     []any // for the request's log line
}

// readRequestBody reads a model request's body, decoded (gzip, zstd, br), or returns why it is
// refused; a refusal the headers decide (413 by declared length, 415) comes before any byte is
// read, so a client waiting on Expect: 100-continue never gets its 100 Continue.
func (s *Server) readRequestBody(w http.ResponseWriter, r *http.Request) ([]byte, *refusal) {
	limit := s.opt.MaxBodyBytes
	if r.ContentLength > limit {
		return nil, &refusal{status: http.StatusRequestEntityTooLarge, code: "request_too_large",
			msg: fmt.Sprintf("condense proxy: the request body's Content-Length %d exceeds the %d-byte limit", r.ContentLength, limit)}
	}
	codings, err := contentCodings(r.Header)
	if err != nil {
		return nil, &refusal{status: http.StatusUnsupportedMediaType, code: "unsupported_content_encoding", msg: "condense proxy: " + err.Error()}
	}
	raw := s.newBodyReader(w, r.Body)
	var body []byte
	if len(codings) == 0 {
		body, err = readLimited(raw, limit, r.ContentLength)
	} else {
		body, err = decodeBody(http.MaxBytesReader(nil, raw, limit), codings, limit)
	}
	if err == nil {
		return body, nil
	}
	return nil, s.bodyFailed(r, raw, codings, err)
}

// bodyFailed says why reading a body failed: too large (413), the client too slow (408), the
// body cut short (400 body_incomplete), unreadable or undecodable (400).
func (s *Server) bodyFailed(r *http.Request, raw *bodyReader, codings []string, err error) *refusal {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		msg := fmt.Sprintf("condense proxy: the request body exceeds %d bytes", s.opt.MaxBodyBytes)
		if len(codings) > 0 {
			msg += " (decoded: the limit applies to the body after its Content-Encoding)"
		}
		return &refusal{status: http.StatusRequestEntityTooLarge, code: "request_too_large", msg: msg}
	case errors.Is(raw.err, os.ErrDeadlineExceeded):
		bound, what := s.opt.BodyReadTimeout, "the request body did not arrive within %s"
		if raw.idle > 0 && (raw.total.IsZero() || time.Now().Before(raw.total)) {
			bound, what = raw.idle, "the client sent no more of the request body for %s"
		}
		return &refusal{status: http.StatusRequestTimeout, code: "body_read_timeout", msg: "condense proxy: " + fmt.Sprintf(what, bound),
			attrs: []any{"timeoutMs", logs.Ms(bound), "read", raw.n}}
	case errors.Is(raw.err, io.ErrUnexpectedEOF) && r.ContentLength > 0:
		return &refusal{status: http.StatusBadRequest, code: "body_incomplete", attrs: []any{"read", raw.n},
			msg: fmt.Sprintf("condense proxy: the request body ended after %d of the %d bytes its Content-Length declares", raw.n, r.ContentLength)}
	case raw.err != nil:
		return &refusal{status: http.StatusBadRequest, code: "body_read_failed", msg: "condense proxy: reading request body: " + raw.err.Error()}
	}
	return &refusal{status: http.StatusBadRequest, code: "body_decode_failed",
		msg: fmt.Sprintf("condense proxy: decoding the %s request body: %v", strings.Join(codings, ", "), err)}
}

// contentCodings returns the Content-Encoding codings of a request, in the order they were
// applied ("identity" left out; none for a plain body), or an error naming one the proxy
// does not decode.
func contentCodings(h http.Header) ([]string, error) {
	var out []string
	for _, v := range h.Values("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			switch c = strings.ToLower(strings.TrimSpace(c)); c {
			case "", "identity":
			case "gzip", "x-gzip", "zstd", "br":
				out = append(out, c)
			default:
				return nil, fmt.Errorf("unsupported Content-Encoding %q: the proxy decodes gzip, zstd and br request bodies", c)
			}
		}
	}
	return out, nil
}

// decodeBody undoes codings (the last applied first) and reads the decoded body, at most
// limit bytes of it.
func decodeBody(r io.Reader, codings []string, limit int64) ([]byte, error) {
	for _, c := range slices.Backward(codings) {
		switch c {
		case "gzip", "x-gzip":
			zr, err := gzip.NewReader(r)
			if err != nil {
				return nil, err
			}
			r = zr
		case "zstd":
			zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(limit)))
			if err != nil {
				return nil, err
			}
			defer zr.Close()
			r = zr
		case "br":
			r = brotli.NewReader(r)
		}
	}
	return readLimited(r, limit, -1)
}

// bodyReader reads the client's raw body under the read deadlines — the whole body within
// BodyReadTimeout of the headers, and each read within BodyIdleTimeout — counting the bytes
// and keeping the error that ended it.
type bodyReader struct {
	r     io.ReadCloser
	rc    *http.ResponseController
	total time.Time     // zero: no bound on the whole body
	idle  time.Duration // 0: no bound on one read
	set   time.Time     // when the idle deadline was last moved
	n     int64
	err   error // the first error but EOF
	done  bool  // the body ended: net/http owns the connection's deadline again
}

// newBodyReader starts reading a body under the deadlines (set on the connection now).
func (s *Server) newBodyReader(w http.ResponseWriter, body io.ReadCloser) *bodyReader {
	b := &bodyReader{r: body, rc: http.NewResponseController(w)}
	if body == http.NoBody {
		return b // nothing to read: net/http already reads the connection for the next request
	}
	now := time.Now()
	if s.opt.BodyReadTimeout > 0 {
		b.total = now.Add(s.opt.BodyReadTimeout)
	}
	if s.opt.BodyIdleTimeout > 0 && (b.total.IsZero() || s.opt.BodyIdleTimeout < s.opt.BodyReadTimeout) {
		b.idle = s.opt.BodyIdleTimeout
	}
	b.deadline(now)
	return b
}

// deadline sets the connection's read deadline to the earlier of the two bounds.
func (b *bodyReader) deadline(now time.Time) {
	d := b.total
	if b.idle > 0 {
		if at := now.Add(b.idle); d.IsZero() || at.Before(d) {
			d = at
		}
		b.set = now
	}
	if !d.IsZero() {
		_ = b.rc.SetReadDeadline(d)
	}
}

func (b *bodyReader) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	// The idle deadline moves only once a quarter of it passed: a read then waits between
	// 3/4 and all of BodyIdleTimeout before it fails.
	if b.idle > 0 {
		if now := time.Now(); now.Sub(b.set) > b.idle/4 {
			b.deadline(now)
		}
	}
	n, err := b.r.Read(p)
	b.n += int64(n)
	if err != nil {
		b.done = true // net/http clears the deadline itself once the body ended
		if !errors.Is(err, io.EOF) {
			b.err = err
		}
	}
	return n, err
}

func (b *bodyReader) Close() error { return b.r.Close() }

// maxPreGrow is the most readBody allocates for a body before its bytes arrive: a declared
// Content-Length alone must not make the proxy hold its size.
const maxPreGrow = 1 << 20

// readBody reads a request body of at most limit bytes into one buffer, sized by the declared
// Content-Length (at most maxPreGrow before bytes arrive) and doubled as they do.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	return readLimited(r.Body, limit, r.ContentLength)
}

// readLimited is readBody over any reader whose length is declared (negative: unknown).
func readLimited(r io.Reader, limit, declared int64) ([]byte, error) {
	rc, ok := r.(io.ReadCloser)
	if !ok {
		rc = io.NopCloser(r)
	}
	body := http.MaxBytesReader(nil, rc, limit)
	want := int64(-1) // the capacity a body of the declared length needs
	size := int64(bytes.MinRead)
	if declared > 0 && declared <= limit {
		want = declared + bytes.MinRead
		size = min(want, maxPreGrow)
	}
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			n := int64(2*cap(buf)) + bytes.MinRead
			if want > int64(cap(buf)) {
				n = min(n, want)
			}
			buf = slices.Grow(buf, int(n)-len(buf))
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}
