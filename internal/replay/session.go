package replay

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/condense-dev/condense/internal/cost"
	"github.com/condense-dev/condense/internal/transcripts"
)

// sessionTranscript adapts an imported session to Transcript in one provider form.
type sessionTranscript struct {
	s    *transcripts.Session
	prov transcripts.Provider
}

// FromSession returns the transcript of an imported session in the given provider form ("" for
// the session's native form).
func FromSession(s *transcripts.Session, p transcripts.Provider) (Transcript, error) {
	if p == "" {
		p = s.Native
	}
	ok := false
	for _, q := range s.Providers() {
		ok = ok || q == p
	}
	if !ok {
		return nil, fmt.Errorf("%s: %w: %s", s.Name, transcripts.ErrProvider, p)
	}
	return &sessionTranscript{s: s, prov: p}, nil
}

// Name implements Transcript.
func (t *sessionTranscript) Name() string { return t.s.Name }

// Kind implements Transcript.
func (t *sessionTranscript) Kind() string { return string(t.s.Format) }

// Len implements Transcript.
func (t *sessionTranscript) Len() int { return t.s.Len() }

// WireFormat implements Transcript.
func (t *sessionTranscript) WireFormat() cost.WireFormat {
	if t.prov == transcripts.OpenAI {
		return cost.OpenAI
	}
	return cost.Anthropic
}

// Meta implements Transcript.
func (t *sessionTranscript) Meta(k int) Meta {
	p := t.s.Point(k)
	m := Meta{Time: p.Time, Model: p.Model}
	if p.Usage != nil && p.Usage.OutputTokens > 0 {
		m.OutputTokens = p.Usage.OutputTokens
	}
	return m
}

// AppendRequest implements Transcript.
func (t *sessionTranscript) AppendRequest(dst []byte, k int) ([]byte, error) {
	return t.s.AppendRequest(dst, k, t.prov)
}

// Open reads one file as a transcript: any session format the importers know (auto-detected),
// else a request log (ParseRequestLog). provider picks the request form of sessions ("" =
// native).
func Open(path string, provider transcripts.Provider) (Transcript, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	name := filepath.Base(path)
	s, serr := transcripts.Import(name, data, transcripts.FormatAuto)
	if serr == nil {
		return FromSession(s, provider)
	}
	if errors.Is(serr, transcripts.ErrUnknownFormat) {
		r, lerr := ParseRequestLog(name, data)
		if lerr == nil {
			return r, nil
		}
		if !errors.Is(lerr, ErrNotRequestLog) {
			return nil, lerr
		}
	}
	return nil, serr
}
