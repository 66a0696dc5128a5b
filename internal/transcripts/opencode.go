package transcripts

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// ocMessage is one opencode message with its parts (the export's {info, parts}).
type ocMessage struct {
	Info  ocInfo   `json:"info"`
	Parts []ocPart `json:"parts"`

	line int // 1-based index in the session's message order
}

// ocInfo is an opencode message header (MessageV2 User or Assistant).
type ocInfo struct {
	ID         string          `json:"id"`
	Role       string          `json:"role"`
	ParentID   string          `json:"parentID"`
	ModelID    string          `json:"modelID"`
	ProviderID string          `json:"providerID"`
	System     json.RawMessage `json:"system"`  // user: string; early assistant messages: []string
	Summary    json.RawMessage `json:"summary"` // assistant: true for a compaction summary
	Finish     string          `json:"finish"`
	Error      *struct {
		Name string `json:"name"`
	} `json:"error"`
	Time struct {
		Created float64 `json:"created"`
	} `json:"time"`
	Tokens *ocTokens `json:"tokens"`
	Model  *struct {
		ModelID string `json:"modelID"`
	} `json:"model"`
}

// ocTokens is opencode's token record of a response (assistant message or step-finish part).
type ocTokens struct {
	Input  float64 `json:"input"`
	Output float64 `json:"output"`
	Cache  struct {
		Read  float64 `json:"read"`
		Write float64 `json:"write"`
	} `json:"cache"`
}

// ocPart is one opencode message part (MessageV2 Part).
type ocPart struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Ignored   bool            `json:"ignored"`
	Metadata  json.RawMessage `json:"metadata"`
	Mime      string          `json:"mime"`
	Filename  string          `json:"filename"`
	URL       string          `json:"url"`
	CallID    string          `json:"callID"`
	Tool      string          `json:"tool"`
	State     *ocToolState    `json:"state"`
	Tokens    *ocTokens       `json:"tokens"`
	Synthetic bool            `json:"synthetic"`
}

// ocToolState is the state of a tool part.
type ocToolState struct {
	Status string          `json:"status"`
	Input  json.RawMessage `json:"input"`
	Output string          `json:"output"`
	Error  string          `json:"error"`
	Time   struct {
		End       float64 `json:"end"`
		Compacted float64 `json:"compacted"`
	} `json:"time"`
}

// opencode's context texts (MessageV2.toModelMessages).
const (
	ocCompactionPrompt = "What did we do so far?"
	ocSubtaskPrompt    = "The following tool was executed by the user"
	ocClearedOutput    = "[Old tool result content cleared]"
	ocInterrupted      = "[Tool execution was interrupted]"
)

// ocStandInSystem is the documented stand-in system prompt for opencode sessions.
const ocStandInSystem = "You are opencode, an interactive CLI coding agent. (condense import stand-in: opencode storage does not record the system prompt.)"

// importOpencodeExport imports the JSON `opencode export` writes: {info, messages:[{info, parts}]}.
func importOpencodeExport(in *input, data []byte) (*Session, error) {
	var doc struct {
		Info     json.RawMessage   `json:"info"`
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, docError(in.name, data, err)
	}
	var msgs []*ocMessage
	for i, raw := range doc.Messages {
		m := &ocMessage{line: i + 1}
		if err := json.Unmarshal(raw, m); err != nil {
			if err := in.skip(&ParseError{File: in.name, Line: lineOfEntry(data, raw), Path: fmt.Sprintf("messages[%d]", i), Err: unwrapType(err)}); err != nil {
				return nil, err
			}
			continue
		}
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		return nil, &ParseError{File: in.name, Path: "messages", Err: ErrEmpty}
	}
	return opencodeSession(in, msgs)
}

// opencodeStorage reads one session from opencode's pre-1.2 JSON storage (storage/message/<session>/
// and storage/part/<message>/) in id (creation) order. A file that does not parse is a malformed
// record; errors name files under root, the directory fsys stands for.
func opencodeStorage(in *input, fsys fs.FS, root, sessionID string) ([]*ocMessage, error) {
	dir := path.Join("message", sessionID)
	files, err := fs.Glob(fsys, path.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var msgs []*ocMessage
	for _, f := range files {
		m := &ocMessage{line: len(msgs) + 1}
		if err := readJSONFile(fsys, root, f, &m.Info); err != nil {
			if err := in.skip(err); err != nil {
				return nil, err
			}
			continue
		}
		id := m.Info.ID
		if id == "" {
			id = strings.TrimSuffix(path.Base(f), ".json")
		}
		parts, err := fs.Glob(fsys, path.Join("part", id, "*.json"))
		if err != nil {
			return nil, err
		}
		sort.Strings(parts)
		for _, pf := range parts {
			var p ocPart
			if err := readJSONFile(fsys, root, pf, &p); err != nil {
				if err := in.skip(err); err != nil {
					return nil, err
				}
				continue
			}
			m.Parts = append(m.Parts, p)
		}
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		return nil, &ParseError{File: in.name, Err: fmt.Errorf("%w: no message files in %s", ErrEmpty, filepath.Join(root, filepath.FromSlash(dir)))}
	}
	return msgs, nil
}

// readJSONFile decodes one storage file; a failure is a *ParseError naming it (under root).
func readJSONFile(fsys fs.FS, root, name string, v any) error {
	shown := filepath.Join(root, filepath.FromSlash(name))
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		return &ParseError{File: shown, Err: err}
	}
	data = fixUTF8(data)
	if err := json.Unmarshal(data, v); err != nil {
		return docError(shown, data, err)
	}
	return nil
}

// opencodeSession rebuilds the requests of an opencode session from its messages, as
// MessageV2.toModelMessages renders them: one request per step of an assistant message.
func opencodeSession(in *input, msgs []*ocMessage) (*Session, error) {
	native := OpenAI
	system := ""
	for _, m := range msgs {
		if m.Info.Role == "assistant" {
			if m.Info.ProviderID == "anthropic" {
				native = Anthropic
			}
			break
		}
	}
	for _, m := range msgs {
		if system != "" {
			break
		}
		if s, ok := rawString(m.Info.System); ok {
			system = s
		} else if ss := gjson.ParseBytes(m.Info.System); ss.IsArray() && len(m.Info.System) > 0 {
			var texts []string
			for _, v := range ss.Array() {
				texts = append(texts, v.String())
			}
			system = strings.Join(texts, "\n")
		}
	}
	if strings.TrimSpace(system) == "" {
		system = ocStandInSystem
	}
	b := newBuilder(FormatOpencode, native, Anthropic, OpenAI)
	users := map[string]msg{}
	for _, m := range msgs {
		switch m.Info.Role {
		case "user":
			um := ocUser(m)
			users[m.Info.ID] = um
			b.add(um)
		case "assistant":
			turns := ocAssistant(b, m)
			if gjson.ParseBytes(m.Info.Summary).Bool() && m.Info.Finish != "" && m.Info.Error == nil {
				// A compaction: later requests start from the compaction prompt and this
				// summary (MessageV2.filterCompacted).
				b.newContext()
				b.s.Stats.Compactions++
				b.replay = true
				if um, ok := users[m.Info.ParentID]; ok {
					b.add(um)
				}
				for _, t := range turns {
					b.add(t)
				}
				b.replay = false
			}
		}
	}
	s := b.finish(system, 32000)
	if s.Len() == 0 {
		return nil, &ParseError{File: in.name, Err: ErrNoRequests}
	}
	return s, nil
}

// ocUser converts a user message.
func ocUser(m *ocMessage) msg {
	um := msg{role: "user"}
	for _, p := range m.Parts {
		switch p.Type {
		case "text":
			if !p.Ignored {
				um.parts = append(um.parts, part{kind: pText, text: p.Text})
			}
		case "file":
			switch {
			case p.Mime == "text/plain" || p.Mime == "application/x-directory":
				// opencode sends these as the synthetic text parts next to them.
			case strings.HasPrefix(p.Mime, "image/") && strings.HasPrefix(p.URL, "data:"):
				um.parts = append(um.parts, part{kind: pImage, text: p.URL, raw: codexImageBlock(p.URL)})
			default:
				name := p.Filename
				if name == "" {
					name = "file"
				}
				um.parts = append(um.parts, part{kind: pText, text: "[Attached " + p.Mime + ": " + name + "]"})
			}
		case "compaction":
			um.parts = append(um.parts, part{kind: pText, text: ocCompactionPrompt})
		case "subtask":
			um.parts = append(um.parts, part{kind: pText, text: ocSubtaskPrompt})
		}
	}
	return um
}

// ocAssistant adds the requests and messages of an assistant message: every step (from a
// step-start part) is one model response. It returns the messages it added.
func ocAssistant(b *builder, m *ocMessage) []msg {
	info := &m.Info
	model := info.ModelID
	if model == "" {
		model = "opencode-unknown-model"
	}
	// opencode drops an errored message unless it was aborted after producing content.
	keep := info.Error == nil
	if !keep && info.Error.Name == "MessageAbortedError" {
		for _, p := range m.Parts {
			if p.Type != "step-start" && p.Type != "reasoning" {
				keep = true
			}
		}
	}
	var steps [][]ocPart
	for _, p := range m.Parts {
		if p.Type == "step-start" || len(steps) == 0 {
			steps = append(steps, nil)
		}
		steps[len(steps)-1] = append(steps[len(steps)-1], p)
	}
	if len(steps) == 0 {
		steps = [][]ocPart{nil}
	}
	if !keep {
		pt := RequestPoint{Model: model, Line: m.line, Time: msTime(info.Time.Created), Dropped: true, Usage: ocUsage(info.Tokens)}
		b.s.Stats.DroppedResponses++
		b.request(pt)
		return nil
	}
	var added []msg
	sent := info.Time.Created
	for i, step := range steps {
		pt := RequestPoint{Model: model, Line: m.line, Time: msTime(sent)}
		for _, p := range step {
			if p.Type == "step-finish" && p.Tokens != nil {
				pt.Usage = ocUsage(p.Tokens)
			}
		}
		if pt.Usage == nil && len(steps) == 1 {
			pt.Usage = ocUsage(info.Tokens)
		}
		b.request(pt)
		am, results := msg{role: "assistant"}, msg{role: "user"}
		for _, p := range step {
			switch p.Type {
			case "text":
				am.parts = append(am.parts, part{kind: pText, text: p.Text})
			case "reasoning":
				if raw := ocThinking(p); raw != nil {
					am.parts = append(am.parts, part{kind: pRaw, raw: raw})
				} else if !b.replay {
					b.s.Stats.DroppedThinking++
				}
			case "tool":
				c, r := ocTool(p)
				am.parts = append(am.parts, c)
				results.parts = append(results.parts, r)
				if p.State != nil && p.State.Time.End > sent && i+1 < len(steps) {
					sent = p.State.Time.End // the next step is sent when the tools are done
				}
			}
		}
		b.add(am)
		b.add(results)
		added = append(added, am, results)
	}
	return added
}

// ocTool converts a tool part into its call and result.
func ocTool(p ocPart) (part, part) {
	c := part{kind: pCall, id: p.CallID, name: p.Tool, input: json.RawMessage(`{}`)}
	r := part{kind: pResult, id: p.CallID, text: ocInterrupted, isError: true}
	st := p.State
	if st == nil {
		return c, r
	}
	if in, err := compactJSON(st.Input); err == nil && len(in) > 0 && in[0] == '{' {
		c.input = in
	}
	switch st.Status {
	case "completed":
		r.text, r.isError = st.Output, false
		if st.Time.Compacted > 0 {
			r.text = ocClearedOutput
		}
	case "error":
		r.text = st.Error
	}
	return c, r
}

// ocThinking renders a reasoning part as an Anthropic thinking block when it carries the
// signature the API needs (AI SDK provider metadata), else nil.
func ocThinking(p ocPart) json.RawMessage {
	md := gjson.ParseBytes(p.Metadata)
	if d := md.Get("anthropic.redactedData"); d.Type == gjson.String {
		raw := appendJSONString([]byte(`{"type":"redacted_thinking","data":`), d.Str)
		return append(raw, '}')
	}
	sig := md.Get("anthropic.signature")
	if sig.Type != gjson.String || sig.Str == "" {
		return nil
	}
	raw := appendJSONString([]byte(`{"type":"thinking","thinking":`), p.Text)
	raw = append(raw, `,"signature":`...)
	raw = appendJSONString(raw, sig.Str)
	return append(raw, '}')
}

// ocUsage converts opencode's token record (its input already excludes cache reads and writes).
func ocUsage(t *ocTokens) *Usage {
	if t == nil {
		return nil
	}
	return &Usage{InputTokens: int64(t.Input), OutputTokens: int64(t.Output),
		CacheReadTokens: int64(t.Cache.Read), CacheWriteTokens: int64(t.Cache.Write)}
}

// msTime converts Unix milliseconds (zero when absent or out of range).
func msTime(ms float64) time.Time {
	if ms <= 0 || ms > math.MaxInt64/1e6 || math.IsNaN(ms) {
		return time.Time{}
	}
	return time.UnixMilli(int64(ms)).UTC()
}

// errOpencodeFile is the cause for an opencode storage file imported without its directory.
var errOpencodeFile = errors.New("an opencode storage file: import its session by path " +
	"(storage/session/<project>/<session>.json) or the storage directory, or use `opencode export`")

// isOpencodeExport reports whether data is the JSON of `opencode export`.
func isOpencodeExport(data []byte) bool {
	if gjson.GetBytes(data, "info.id").Type != gjson.String {
		return false
	}
	first := gjson.GetBytes(data, "messages.0")
	return first.Get("info").IsObject() || !first.Exists() && gjson.GetBytes(data, "messages").IsArray()
}

// opencodeFileKind tells an opencode storage file by its id prefix: "session", "message",
// "part", or "" for anything else.
func opencodeFileKind(data []byte) string {
	id := gjson.GetBytes(data, "id")
	if id.Type != gjson.String {
		return ""
	}
	switch {
	case strings.HasPrefix(id.Str, "ses_") && (hasTopKey(data, "projectID") || hasTopKey(data, "directory")):
		return "session"
	case strings.HasPrefix(id.Str, "msg_") && hasTopKey(data, "sessionID") && hasTopKey(data, "role"):
		return "message"
	case strings.HasPrefix(id.Str, "prt_") && hasTopKey(data, "messageID"):
		return "part"
	}
	return ""
}

// opencodeRoot returns the storage directory dir is or holds (with message/ and part/), or "".
func opencodeRoot(dir string) string {
	for _, d := range []string{dir, filepath.Join(dir, "storage")} {
		if isDir(filepath.Join(d, "message")) && isDir(filepath.Join(d, "part")) {
			return d
		}
	}
	return ""
}

// isDir reports whether p is a directory.
func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// OpencodeSessionFiles lists the session files of the opencode storage directory dir is or
// holds (storage/session/<projectID>/<sessionID>.json), sorted; nil when dir is none.
func OpencodeSessionFiles(dir string) []string {
	root := opencodeRoot(dir)
	if root == "" {
		return nil
	}
	files, _ := filepath.Glob(filepath.Join(root, "session", "*", "*.json"))
	sort.Strings(files)
	return append([]string{}, files...)
}

// importOpencodePath imports one opencode session from its storage: p is the storage
// directory (or the data directory holding storage/) when it holds one session, a
// message/<sessionID> directory, or a session file storage/session/<projectID>/<sessionID>.json.
func importOpencodePath(p string, data []byte, o Options) (*Session, error) {
	in := &input{name: p, strict: o.Strict}
	root, sid := "", ""
	switch {
	case data != nil:
		if filepath.Base(filepath.Dir(filepath.Dir(p))) != "session" {
			return nil, &ParseError{File: p, Err: errors.New("an opencode session file outside storage/session/<project>/: its messages cannot be found")}
		}
		root = filepath.Dir(filepath.Dir(filepath.Dir(p)))
		sid = gjson.GetBytes(data, "id").Str
	case filepath.Base(filepath.Dir(p)) == "message":
		root, sid = filepath.Dir(filepath.Dir(p)), filepath.Base(p)
	default:
		if root = opencodeRoot(p); root == "" {
			return nil, unknownFormat(p)
		}
		files := OpencodeSessionFiles(p)
		if len(files) != 1 {
			return nil, &ParseError{File: p, Err: fmt.Errorf("the opencode storage holds %d sessions: import one of its session files (storage/session/<project>/<session>.json)", len(files))}
		}
		sid = strings.TrimSuffix(filepath.Base(files[0]), ".json")
	}
	msgs, err := opencodeStorage(in, os.DirFS(root), root, sid)
	if err == nil {
		var s *Session
		if s, err = opencodeSession(in, msgs); err == nil {
			return in.done(s, FormatOpencode), nil
		}
	}
	return nil, in.failed(err)
}
