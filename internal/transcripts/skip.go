package transcripts

import (
	"errors"
	"fmt"
)

// input is the file being imported: its name and what happens to a malformed record.
type input struct {
	name     string
	strict   bool
	warnings []*ParseError
}

// skip handles a malformed record: a strict import returns err; otherwise err is kept as a
// warning (naming the file and line) and nil is returned, so the caller drops the record.
func (in *input) skip(err error) error {
	if in.strict {
		return err
	}
	var pe *ParseError
	if !errors.As(err, &pe) {
		pe = &ParseError{File: in.name, Err: err}
	}
	in.warnings = append(in.warnings, pe)
	return nil
}

// done completes a successful import.
func (in *input) done(s *Session, f Format) *Session {
	s.Name = in.name
	s.Format = f
	s.Warnings = in.warnings
	return s
}

// failed adds the skipped records to the error of an import that failed anyway, so that the
// cause (often a skipped record) is not hidden behind "no model responses".
func (in *input) failed(err error) error {
	if len(in.warnings) == 0 {
		return err
	}
	return fmt.Errorf("%w (%d malformed records skipped; the first: %v)", err, len(in.warnings), in.warnings[0])
}
