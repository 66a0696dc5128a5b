// Package transcripts imports recorded coding-agent sessions (pi, Claude Code, Codex, SWE-agent,
// mini-SWE-agent, opencode, Gemini CLI) as the sequence of LLM requests the agent sent, stored as
// pre-encoded contexts and materialised lazily by Request / AppendRequest. See docs/formats.md.
package transcripts

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// Format names a transcript format.
type Format string

// The supported transcript formats.
const (
	FormatAuto         Format = "auto"
	FormatPi           Format = "pi"
	FormatClaudeCode   Format = "claude-code"
	FormatCodex        Format = "codex"
	FormatSWEAgent     Format = "swe-agent"
	FormatMiniSWEAgent Format = "mini-swe-agent"
	FormatOpencode     Format = "opencode"
	FormatGeminiCLI    Format = "gemini-cli"
)

// Formats lists every concrete format, in the order auto-detection reports them.
var Formats = []Format{FormatPi, FormatClaudeCode, FormatCodex, FormatSWEAgent, FormatMiniSWEAgent, FormatOpencode, FormatGeminiCLI}

// FormatList returns the concrete format names joined with ", " (for help texts and errors).
func FormatList() string {
	names := make([]string, len(Formats))
	for i, f := range Formats {
		names[i] = string(f)
	}
	return strings.Join(names, ", ")
}

// The text-protocol harnesses a session's Observations names (the engine's harness names).
const (
	harnessMiniSWEAgent = "mini-swe-agent"
	harnessSWEAgent     = "swe-agent"
)

// Provider names a request wire format by its wire.Format name (a string: wire's own tests
// import this package, so it cannot import wire).
type Provider string

// The request wire formats an import can produce.
const (
	// Anthropic is the Anthropic Messages API request body.
	Anthropic Provider = "anthropic"
	// OpenAI is the OpenAI Chat Completions request body.
	OpenAI Provider = "openai"
	// Responses is the OpenAI Responses API request body (POST /v1/responses).
	Responses Provider = "responses"
)

// ErrUnknownFormat is returned when auto-detection cannot recognise a file, or a format name is
// not one of Formats.
var ErrUnknownFormat = errors.New("unknown transcript format")

// unknownFormat is the one error for a file no importer recognises: it names the file and lists
// the supported formats.
func unknownFormat(name string) error {
	return &ParseError{File: name, Err: fmt.Errorf("%w (supported: %s; see docs/formats.md)", ErrUnknownFormat, FormatList())}
}

// ErrEmpty is returned (wrapped in a *ParseError) for a file that holds no records.
var ErrEmpty = errors.New("empty session file")

// ErrNoRequests is returned (wrapped in a *ParseError) for a file whose records hold no model
// response, so no request can be rebuilt.
var ErrNoRequests = errors.New("session has no model responses")

// ErrProvider is returned by Request when the session cannot be rendered for the asked provider
// (the OpenAI form exists for OpenAI-native sources, the Responses form for Codex only).
var ErrProvider = errors.New("provider form not available for this session")

// ParseError reports bad input: the file, the 1-based line (0 when unknown) and, for JSON
// documents, the path of the offending value.
type ParseError struct {
	File string // file name as given to Import (may be empty)
	Line int    // 1-based line number; 0 when not known
	Path string // JSON path inside the line or document (e.g. "message.content[2]"), may be empty
	Err  error  // the cause
}

// Error formats the error as "file:line: path: cause".
func (e *ParseError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
	} else {
		b.WriteString("<input>")
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns the cause.
func (e *ParseError) Unwrap() error { return e.Err }

// Usage is the token usage recorded for one model response; a field is -1 when not recorded.
// InputTokens counts input neither read from nor written to the prompt cache (Anthropic
// semantics; OpenAI's input_tokens minus cached tokens).
type Usage struct {
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
}

// RequestPoint is the metadata of one rebuilt request.
type RequestPoint struct {
	Context int       // index of the context (compaction segment) the request belongs to, in the native form
	Time    time.Time // when the request was sent (see docs/formats.md); zero when unknown
	Model   string    // model the agent asked for
	Usage   *Usage    // usage recorded for the response; nil when unknown
	Line    int       // 1-based line (JSONL) or entry index+1 (JSON documents) of the response
	Dropped bool      // the response was aborted or errored and is not part of later contexts

	n   [len(providers)]int // messages of the context in this request, per provider form
	ctx [len(providers)]int // its context index, per provider form
}

// Messages returns the number of wire messages the request holds in the given form (0 for a
// form the session does not have).
func (p RequestPoint) Messages(f Provider) int {
	if i := formIndex(f); i >= 0 {
		return p.n[i]
	}
	return 0
}

// ContextIn returns the index of the request's context in the given form: forms built from
// one message stream share their contexts, the Responses form of a Codex session has its own
// (a new one at every compaction only).
func (p RequestPoint) ContextIn(f Provider) int {
	if i := formIndex(f); i >= 0 {
		return p.ctx[i]
	}
	return 0
}

// Stats counts what an import saw, as the corpus MANIFEST defines it (docs/formats.md): merged
// LLM-visible Messages over the whole file, the model's ToolCalls, ToolResults and
// FailedResults (format-specific error flags), and Requests (model responses).
type Stats struct {
	Messages         int
	Requests         int
	ToolCalls        int
	ToolResults      int
	FailedResults    int
	Compactions      int
	DroppedResponses int // aborted / errored / synthetic responses left out of later contexts
	DroppedThinking  int // thinking blocks that could not be sent back (redacted or missing signature)
	DroppedReasoning int // encrypted reasoning items (Codex)
	OrphanResults    int // tool results without a matching call in the preceding message (dropped)
	SyntheticResults int // "No result provided" results added for calls that had none
	EmptyRequests    int // responses with no message before them: no request is rebuilt
	Sidechains       int // subagent conversations held inline in a Claude Code 1.x main file
	RenamedCalls     int // calls whose id an earlier call of the context used: renamed in the Anthropic form
}

// Session is an imported session.
type Session struct {
	Name   string // file name given to Import
	Format Format
	Native Provider // the provider form closest to the source
	Stats  Stats

	Warnings []*ParseError // malformed records skipped (a strict import fails on the first instead)

	// Observations names the text-protocol harness whose observations are user messages
	// ("mini-swe-agent", "swe-agent") when the agent acted in text, "" otherwise.
	Observations string

	system string   // system prompt (real when recorded, else the stand-in)
	tools  []string // tool names, sorted
	points []RequestPoint
	forms  [len(providers)]*form // per provider, in providers order; nil when unavailable
}

// Len returns the number of requests.
func (s *Session) Len() int { return len(s.points) }

// Point returns the metadata of request k (0-based).
func (s *Session) Point(k int) RequestPoint { return s.points[k] }

// Providers returns the provider forms this session can be rendered in, native first.
func (s *Session) Providers() []Provider {
	out := []Provider{s.Native}
	for _, p := range providers {
		if p != s.Native && s.forms[formIndex(p)] != nil {
			out = append(out, p)
		}
	}
	return out
}

// Contexts returns the number of contexts in the given form (0 when unavailable).
func (s *Session) Contexts(p Provider) int {
	f := s.form(p)
	if f == nil {
		return 0
	}
	return len(f.contexts)
}

// form returns the session's rendering in p, nil when it has none.
func (s *Session) form(p Provider) *form {
	if i := formIndex(p); i >= 0 {
		return s.forms[i]
	}
	return nil
}

// Context returns the pre-encoded messages of context i in the given form. The slices are
// shared: callers must not modify them.
func (s *Session) Context(p Provider, i int) [][]byte {
	return s.forms[formIndex(p)].contexts[i]
}

// Request returns the body of request k in the given provider form.
func (s *Session) Request(k int, p Provider) ([]byte, error) {
	return s.AppendRequest(nil, k, p)
}

// AppendRequest appends the body of request k in the given provider form to dst.
func (s *Session) AppendRequest(dst []byte, k int, p Provider) ([]byte, error) {
	if k < 0 || k >= len(s.points) {
		return dst, fmt.Errorf("request %d out of range [0,%d)", k, len(s.points))
	}
	f := s.form(p)
	if f == nil {
		return dst, fmt.Errorf("%w: %s from %s", ErrProvider, p, s.Format)
	}
	fi := formIndex(p)
	pt := &s.points[k]
	return f.appendBody(dst, pt.Model, f.contexts[pt.ctx[fi]][:pt.n[fi]]), nil
}

// AppendBody appends a request body in the given form holding msgs, pre-encoded messages
// of that form (Responses: input items), in place of a request's messages: the session's
// system prompt, tools and other members around them, and model.
func (s *Session) AppendBody(dst []byte, p Provider, model string, msgs [][]byte) ([]byte, error) {
	f := s.form(p)
	if f == nil {
		return dst, fmt.Errorf("%w: %s from %s", ErrProvider, p, s.Format)
	}
	return f.appendBody(dst, model, msgs), nil
}

// appendBody appends the body holding msgs to dst.
func (f *form) appendBody(dst []byte, model string, msgs [][]byte) []byte {
	size := len(f.head) + len(f.tail) + len(model) + 64
	for _, m := range msgs {
		size += len(m) + 1
	}
	if cap(dst)-len(dst) < size {
		nd := make([]byte, len(dst), len(dst)+size)
		copy(nd, dst)
		dst = nd
	}
	dst = append(dst, `{"model":`...)
	dst = appendJSONString(dst, model)
	dst = append(dst, f.head...)
	for i, m := range msgs {
		if i > 0 || f.headMsg {
			dst = append(dst, ',')
		}
		dst = append(dst, m...)
	}
	return append(dst, f.tail...)
}

// providers lists the request forms an importer can render, in Session.forms order.
var providers = [...]Provider{Anthropic, OpenAI, Responses}

// formIndex maps a provider to its slot in Session.forms (-1 when unknown).
func formIndex(p Provider) int {
	for i, q := range providers {
		if q == p {
			return i
		}
	}
	return -1
}

// Options tune an import.
type Options struct {
	Format Format // FormatAuto or "" to detect it from the name and content
	Strict bool   // fail on the first malformed record instead of skipping it with a warning
}

// ImportFile reads and imports one session file (errors and Session.Name use path as given).
// format may be FormatAuto or "". Malformed records are skipped (Session.Warnings).
func ImportFile(path string, format Format) (*Session, error) {
	return ImportFileWith(path, Options{Format: format})
}

// ImportFileWith imports one session file with the given options; a directory, or an opencode
// session file, is read as opencode storage.
func ImportFileWith(path string, o Options) (*Session, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	auto := o.Format == "" || o.Format == FormatAuto || o.Format == FormatOpencode
	if st.IsDir() {
		if !auto {
			return nil, fmt.Errorf("%s is a directory: only opencode storage is read from a directory", path)
		}
		return importOpencodePath(path, nil, o)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if auto && opencodeFileKind(data) == "session" {
		return importOpencodePath(path, data, o)
	}
	return ImportWith(path, data, o)
}

// ImportWith parses one session file's bytes with the given options.
func ImportWith(name string, data []byte, o Options) (*Session, error) {
	format := o.Format
	if format == "" || format == FormatAuto {
		f, err := Detect(name, data)
		if err != nil {
			return nil, err
		}
		format = f
	}
	in := &input{name: name, strict: o.Strict}
	data = fixUTF8(data)
	var s *Session
	var err error
	switch format {
	case FormatPi:
		s, err = importPi(in, data)
	case FormatClaudeCode:
		s, err = importClaudeCode(in, data)
	case FormatCodex:
		s, err = importCodex(in, data)
	case FormatSWEAgent:
		s, err = importSWEAgent(in, data)
	case FormatMiniSWEAgent:
		s, err = importMiniSWEAgent(in, data)
	case FormatGeminiCLI:
		s, err = importGeminiCLI(in, data)
	case FormatOpencode:
		if !isOpencodeExport(data) {
			return nil, &ParseError{File: name, Err: errOpencodeFile}
		}
		s, err = importOpencodeExport(in, data)
	default:
		return nil, fmt.Errorf("%w: %q", ErrUnknownFormat, format)
	}
	if err != nil {
		return nil, in.failed(err)
	}
	return in.done(s, format), nil
}

// Detect guesses the format of a session file from its name and first records.
func Detect(name string, data []byte) (Format, error) {
	trim := bytes.TrimLeft(data, " \t\r\n\ufeff")
	if len(trim) == 0 {
		return "", &ParseError{File: name, Line: 1, Err: ErrEmpty}
	}
	// Whole-document JSON (SWE-agent / mini-SWE-agent) versus JSONL: a JSON document spans
	// lines, so its first line alone does not parse.
	first, _, _ := bytes.Cut(trim, []byte("\n"))
	if isOpencodeExport(trim) || opencodeFileKind(trim) != "" {
		return FormatOpencode, nil
	}
	if hasTopKey(trim, "sessionId") && hasTopKey(trim, "projectHash") {
		return FormatGeminiCLI, nil // a chat file: its legacy record, or its log's metadata line
	}
	if strings.HasSuffix(name, ".traj") || strings.HasSuffix(name, ".traj.json") || !validJSON(first) ||
		hasTopKey(first, "history") || hasTopKey(first, "trajectory_format") {
		if hasTopKey(trim, "history") || hasTopKey(trim, "trajectory") && !hasTopKey(trim, "messages") {
			return FormatSWEAgent, nil
		}
		if hasTopKey(trim, "messages") {
			return FormatMiniSWEAgent, nil
		}
		if strings.HasSuffix(name, ".traj") {
			return FormatSWEAgent, nil
		}
		if strings.HasSuffix(name, ".traj.json") {
			return FormatMiniSWEAgent, nil
		}
	}
	// JSONL: look at the first few records.
	rest := trim
	for i := 0; i < 8 && len(rest) > 0; i++ {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		t := topString(line, "type")
		switch {
		case t == "gemini" || (t == "user" || t == "info" || t == "error" || t == "warning") &&
			hasTopKey(line, "content") && !hasTopKey(line, "message") && !hasTopKey(line, "payload"),
			hasTopKey(line, "$rewindTo") || hasTopKey(line, "$set"):
			return FormatGeminiCLI, nil // a chat log that lost its metadata line
		case t == "session" && hasTopKey(line, "cwd"):
			return FormatPi, nil
		case t == "message" && gjson.GetBytes(line, "message.role").Type == gjson.String,
			t == "model_change" || t == "thinking_level_change" || t == "branch_summary" || t == "custom_message",
			t == "compaction" && (hasTopKey(line, "firstKeptEntryId") || hasTopKey(line, "firstKeptEntryIndex")):
			return FormatPi, nil // a pi session without its header line
		case t == "session_meta" || t == "response_item" || t == "turn_context":
			return FormatCodex, nil
		case t == "user" || t == "assistant" || t == "file-history-snapshot" || t == "summary" ||
			t == "progress" || t == "queue-operation" || (t == "system" && hasTopKey(line, "subtype")):
			return FormatClaudeCode, nil
		}
	}
	return "", unknownFormat(name)
}
