package replay

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/condense-dev/condense/internal/transcripts"
	"github.com/condense-dev/condense/internal/wire"
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
func (t *sessionTranscript) WireFormat() wire.Format {
	switch t.prov {
	case transcripts.OpenAI:
		return wire.OpenAI
	case transcripts.Responses:
		return wire.Responses
	}
	return wire.Anthropic
}

// ObservationHarness implements TextObservations.
func (t *sessionTranscript) ObservationHarness() string { return t.s.Observations }

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

// OpenOptions tune OpenWith.
type OpenOptions struct {
	Provider transcripts.Provider          // request form of sessions ("" = each session's native form)
	Strict   bool                          // fail on a malformed session record instead of skipping it
	Skipped  func(*transcripts.ParseError) // receives every skipped record; may be nil
}

// OpenWith reads one file as a transcript: any session format the importers know (auto-detected),
// else a request log (ParseRequestLog). A file that is neither fails with the importers'
// unknown-format error, the one `condense import` gives.
func OpenWith(path string, o OpenOptions) (Transcript, error) {
	s, serr := transcripts.ImportFileWith(path, transcripts.Options{Strict: o.Strict})
	if serr == nil {
		s.Name = filepath.Base(path)
		if o.Skipped != nil {
			for _, w := range s.Warnings {
				o.Skipped(w)
			}
		}
		return FromSession(s, o.Provider)
	}
	if errors.Is(serr, transcripts.ErrUnknownFormat) {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		r, lerr := ParseRequestLog(filepath.Base(path), data)
		if lerr == nil {
			return r, nil
		}
		if !errors.Is(lerr, ErrNotRequestLog) {
			return nil, lerr
		}
	}
	return nil, serr
}
