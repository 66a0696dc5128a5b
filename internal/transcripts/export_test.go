package transcripts

import (
	"encoding/json"
	"time"
)

// Envelope is one line of `condense import` output: the request body with its metadata.
// Time is omitted when unknown, Usage when not recorded; Body is the request body verbatim.
type Envelope struct {
	Provider Provider        `json:"provider"`
	Index    int             `json:"index"`
	Context  int             `json:"context"`
	Line     int             `json:"line,omitempty"`
	Time     *time.Time      `json:"time,omitempty"`
	Model    string          `json:"model"`
	Usage    *Usage          `json:"usage,omitempty"`
	Dropped  bool            `json:"dropped,omitempty"`
	Body     json.RawMessage `json:"body"`
}

// Import parses one session file's bytes. name is used in errors and in Session.Name; format
// may be FormatAuto (or "") to detect it from name and content. Malformed records are skipped
// (Session.Warnings).
func Import(name string, data []byte, format Format) (*Session, error) {
	return ImportWith(name, data, Options{Format: format})
}

// System returns the system prompt used in every request (recorded or stand-in).
func (s *Session) System() string { return s.system }
