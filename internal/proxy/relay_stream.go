package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"time"
)

// sseEvent is one server-sent event: its exact bytes, its name and its data.
type sseEvent struct {
	raw  []byte
	name string
	data []byte
}

// readEvent reads one event (up to and including its blank line) of at most max bytes
// (an *upstreamLimit past that).
func readEvent(br *bufio.Reader, max int) (sseEvent, error) {
	var ev sseEvent
	for {
		line, err := readLine(br, max-len(ev.raw))
		if errors.Is(err, errLineTooLong) {
			return ev, &upstreamLimit{limitEventSize, max}
		}
		ev.raw = append(ev.raw, line...)
		trim := bytes.TrimRight(line, "\r\n")
		switch {
		case len(trim) == 0 && len(line) > 0:
			if len(ev.raw) > len(line) {
				return ev, nil
			}
			ev.raw = ev.raw[:0] // stray blank line
		case bytes.HasPrefix(trim, []byte("event:")):
			ev.name = string(bytes.TrimSpace(trim[6:]))
		case bytes.HasPrefix(trim, []byte("data:")):
			d := trim[5:]
			if len(d) > 0 && d[0] == ' ' {
				d = d[1:]
			}
			if ev.data != nil {
				ev.data = append(ev.data, '\n')
			}
			ev.data = append(ev.data, d...)
		}
		if err != nil {
			return ev, err
		}
	}
}

func encodeEvent(name string, data []byte) []byte {
	var b bytes.Buffer
	if name != "" {
		b.WriteString("event: ")
		b.WriteString(name)
		b.WriteByte('\n')
	}
	b.WriteString("data: ")
	b.Write(data)
	b.WriteString("\n\n")
	return b.Bytes()
}

// startStream sends a relayed stream's status and headers and returns its emitter.
func startStream(w http.ResponseWriter, resp *http.Response) emitter {
	copyResponseHeaders(w.Header(), resp.Header)
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	return emitter{w: w, fl: fl}
}

// emitter writes a relayed stream to the client, flushing after every write.
type emitter struct {
	w  http.ResponseWriter
	fl http.Flusher
	// seq numbers a Responses stream's events as the client sees them (nil for the others).
	seq *sequencer
	// hold, when set, takes what emit writes instead (held, which release writes).
	hold *[][]byte
}

func (e emitter) emit(b []byte) {
	if e.hold != nil {
		*e.hold = append(*e.hold, b)
		return
	}
	_, _ = e.w.Write(b)
	if e.fl != nil {
		e.fl.Flush()
	}
}

// held returns an emitter that holds what it emits when on (holdsText), else e itself.
func (e emitter) held(on bool) emitter {
	if on {
		e.hold = new([][]byte)
	}
	return e
}

// release writes what a held emitter took, and drops it; with drop it only drops it.
func (e emitter) release(drop bool) {
	if e.hold == nil {
		return
	}
	held := *e.hold
	*e.hold = nil
	if drop {
		return
	}
	e.hold = nil
	for _, b := range held {
		e.emit(b)
	}
}

// readEvent reads the next event of a relayed stream. When reading the provider's body fails
// before its end it aborts the client's response (abortBroken; an Anthropic or Responses
// stream first gets an error event), closing body; a partial last event is not relayed then.
func (s *Server) readEvent(ctx context.Context, e emitter, t *turn, br *bufio.Reader, body io.Closer) (sseEvent, error) {
	ev, err := readEvent(br, int(s.opt.MaxResponseBytes))
	if err == nil || errors.Is(err, io.EOF) {
		return ev, err
	}
	body.Close()
	msg := "condense proxy: the provider's response broke off: "
	var ul *upstreamLimit
	if errors.As(err, &ul) {
		msg = "condense proxy: "
	}
	event := streamErrorEvent(e, t.f, http.StatusBadGateway, "upstream_read_failed", msg+err.Error(), nil)
	s.abortBroken(ctx, e.w, t, event, err)
	return ev, err
}

// errLineTooLong is readLine's error past its bound.
var errLineTooLong = errors.New("line too long")

// readLine reads one line (up to and including '\n') of at most max bytes, failing with
// errLineTooLong past that: unlike bufio.Reader.ReadBytes it never holds more.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(line)+len(frag) > max {
			return nil, errLineTooLong
		}
		line = append(line, frag...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}

// readRound reads one upstream stream to its end: events without data are relayed as they
// came, the others go to handle. It closes the body and returns when its last byte was read.
func (s *Server) readRound(ctx context.Context, e emitter, t *turn, resp *http.Response, handle func(sseEvent)) (eof time.Time) {
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	for {
		ev, err := s.readEvent(ctx, e, t, br, resp.Body)
		if len(ev.raw) > 0 && len(ev.data) == 0 {
			e.emit(ev.raw) // comments, retry hints: as they came
		}
		if len(ev.raw) > 0 && len(ev.data) > 0 {
			handle(ev)
		}
		if err != nil {
			break
		}
	}
	eof = time.Now()
	resp.Body.Close()
	return eof
}
