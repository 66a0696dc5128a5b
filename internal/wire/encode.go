package wire

import (
	"bytes"
	"io"
)

// minSegment is the shortest piece Request.Segments references instead of copying (shorter
// ones are gathered into one buffer).
const minSegment = 256

// encoder writes a serialized request into one buffer (Bytes) or as Segments that
// reference unchanged bytes where they already are.
type encoder struct {
	buf  []byte   // everything written, or (segmenting) the pieces shorter than minSegment
	seg  bool     // segmenting
	segs Segments // the segments cut so far
	run  int      // where in buf the pieces not yet cut into a segment start
}

// raw writes b. A segmenting encoder references a long b instead of copying it, so b must not
// change afterwards.
func (e *encoder) raw(b []byte) {
	if !e.seg || len(b) < minSegment {
		e.buf = append(e.buf, b...)
		return
	}
	e.cut()
	e.segs = append(e.segs, b)
}

// byte writes c.
func (e *encoder) byte(c byte) { e.buf = append(e.buf, c) }

// cut ends the current run of short pieces as a segment, its capacity capped so that later
// writes to buf never reach it.
func (e *encoder) cut() {
	if len(e.buf) > e.run {
		e.segs = append(e.segs, e.buf[e.run:len(e.buf):len(e.buf)])
		e.run = len(e.buf)
	}
}

// done returns the segments written (for a segmenting encoder).
func (e *encoder) done() Segments {
	e.cut()
	return e.segs
}

// Segments is a serialized request as byte slices whose concatenation is its bytes
// (Request.Segments). The slices may alias the parsed request bodies and must not be
// modified.
type Segments [][]byte

// Len returns the total length in bytes.
func (s Segments) Len() int {
	n := 0
	for _, b := range s {
		n += len(b)
	}
	return n
}

// Bytes returns the concatenated bytes: the only segment itself when there is one (no copy),
// else a new slice.
func (s Segments) Bytes() []byte {
	if len(s) == 1 {
		return s[0]
	}
	return bytes.Join(s, nil)
}

// Reader returns a new reader of the bytes; each call starts at the beginning.
func (s Segments) Reader() io.Reader { return &segmentReader{s: s} }

// segmentReader reads Segments front to back without copying them first.
type segmentReader struct {
	s   Segments
	off int // read offset in s[0]
}

// Read implements io.Reader.
func (r *segmentReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) && len(r.s) > 0 {
		c := copy(p[n:], r.s[0][r.off:])
		n += c
		r.off += c
		if r.off == len(r.s[0]) {
			r.s, r.off = r.s[1:], 0
		}
	}
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

// WriteTo implements io.WriterTo: one Write per remaining segment.
func (r *segmentReader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for len(r.s) > 0 {
		n, err := w.Write(r.s[0][r.off:])
		total += int64(n)
		r.off += n
		if err != nil {
			return total, err
		}
		r.s, r.off = r.s[1:], 0
	}
	return total, nil
}

// encodeList writes a JSON list (or, with '{' '}', object members) of n elements, with the
// separators of the original list a (when non-nil) where it has them and "," elsewhere.
func encodeList(e *encoder, a *array, n int, open, close byte, elem func(i int)) {
	e.byte(open)
	orig := n > 0 && a != nil && len(a.spans) > 0
	for i := 0; i < n; i++ {
		switch {
		case orig && i == 0:
			e.raw(a.raw[1:a.spans[0].s])
		case orig && i < len(a.spans):
			e.raw(a.raw[a.spans[i-1].e:a.spans[i].s])
		case i > 0:
			e.byte(',')
		}
		elem(i)
	}
	if orig {
		e.raw(a.raw[a.spans[len(a.spans)-1].e : len(a.raw)-1])
	}
	e.byte(close)
}
