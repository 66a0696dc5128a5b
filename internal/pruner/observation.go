package pruner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/cespare/xxhash/v2"

	"github.com/condense-dev/condense/internal/wire"
)

// ObservationPattern recognises the observations of a text-protocol agent: user messages
// that answer its previous assistant message's action (docs/engine.md "Text observations").
type ObservationPattern struct {
	// Harness names the agent the pattern belongs to (informational for custom patterns).
	Harness string `json:"harness,omitempty"`
	// Match is an RE2 expression the observation's text must match; its named group "rc" is the
	// command's exit status (not 0: failed), other named groups are available to Stub.
	Match string `json:"match"`
	// Stub is the text that replaces a pruned observation: ${stub} stands for the stub, ${name}
	// for Match's group name (empty: "${stub}").
	Stub string `json:"stub,omitempty"`
	// Action is an RE2 expression over the assistant message's text: the first group of its last
	// match is the action (the call's input); without a match, the whole text.
	Action string `json:"action,omitempty"`
	// Tool is the call's tool name ("bash" when empty).
	Tool string `json:"tool,omitempty"`
	// Failed marks every observation the pattern matches as failed (a timeout).
	Failed bool `json:"failed,omitempty"`
}

// ObservationPolicy turns on the pruning of text observations (off by default).
type ObservationPolicy struct {
	// Enabled turns observation recognition on.
	Enabled bool `json:"enabled"`
	// Harness selects the built-in patterns of one harness (HarnessMiniSWEAgent,
	// HarnessSWEAgent); "" selects every built-in harness.
	Harness string `json:"harness,omitempty"`
	// Patterns, when set, replace the built-in patterns.
	Patterns []ObservationPattern `json:"patterns,omitempty"`
}

// The harnesses with built-in observation patterns.
const (
	HarnessMiniSWEAgent = "mini-swe-agent"
	HarnessSWEAgent     = "swe-agent"
)

// Harnesses lists the harnesses with built-in observation patterns.
var Harnesses = []string{HarnessMiniSWEAgent, HarnessSWEAgent}

// builtinPatterns are the observation templates of the known harnesses (docs/engine.md).
var builtinPatterns = []ObservationPattern{
	// mini-swe-agent 1.x and 2.x text mode: action_observation_template.
	{Harness: HarnessMiniSWEAgent, Match: `\A<returncode>(?P<rc>-?\d+)</returncode>\n`,
		Stub:   "<returncode>${rc}</returncode>\n<output>\n${stub}\n</output>",
		Action: "(?s)```(?:bash|mswea_bash_command)\\s*\\n(.*?)\\n```", Tool: "bash"},
	// mini-swe-agent timeout_template.
	{Harness: HarnessMiniSWEAgent, Match: `\AThe last command <command>(?P<command>(?s:.*?))</command> timed out and has been killed\.\n`,
		Stub:   "The last command <command>${command}</command> timed out and has been killed.\nThe output of the command was:\n <output>\n${stub}\n</output>",
		Action: "(?s)```(?:bash|mswea_bash_command)\\s*\\n(.*?)\\n```", Tool: "bash", Failed: true},
	// SWE-agent 1.x next_step_template "OBSERVATION:\n{{observation}}".
	{Harness: HarnessSWEAgent, Match: `\AOBSERVATION:\n`, Stub: "OBSERVATION:\n${stub}",
		Action: "(?s)```[^\\n]*\\n(.*?)\\n?```", Tool: "bash"},
	// SWE-agent with its state in the template: "{observation}\n(Open file: …)\n(Current directory: …)\nbash-$".
	{Harness: HarnessSWEAgent, Match: `(?P<state>\n\(Open file: [^\n]*\)\n\(Current directory: [^\n]*\)\n(?:bash-\$)?\s*)\z`,
		Stub: "${stub}${state}", Action: "(?s)```[^\\n]*\\n(.*?)\\n?```", Tool: "bash"},
}

// HarnessPatterns returns the built-in patterns of a harness ("" for every harness); ok is
// false for an unknown harness.
func HarnessPatterns(harness string) (ps []ObservationPattern, ok bool) {
	for _, p := range builtinPatterns {
		if harness == "" || p.Harness == harness {
			ps = append(ps, p)
		}
	}
	return ps, len(ps) > 0
}

// ErrObservationPolicy is matched (errors.Is) by ValidateObservations' errors.
var ErrObservationPolicy = errors.New("pruner: bad observation policy")

// ValidateObservations reports a policy whose harness is unknown, or one of whose patterns has
// an empty or invalid Match, an invalid Action, or a Stub without ${stub}.
func ValidateObservations(o ObservationPolicy) error {
	if len(o.Patterns) == 0 {
		if _, ok := HarnessPatterns(o.Harness); !ok {
			return fmt.Errorf("%w: harness %q (want %s or none)", ErrObservationPolicy, o.Harness, strings.Join(Harnesses, ", "))
		}
		return nil
	}
	for i, p := range o.Patterns {
		if _, err := compilePattern(p); err != nil {
			return fmt.Errorf("%w: patterns[%d]: %v", ErrObservationPolicy, i, err)
		}
	}
	return nil
}

// obsPattern is a compiled ObservationPattern.
type obsPattern struct {
	p      ObservationPattern
	match  *regexp.Regexp
	action *regexp.Regexp // nil: the whole text
	rc     int            // index of the "rc" group, -1 when none
}

func compilePattern(p ObservationPattern) (*obsPattern, error) {
	if p.Match == "" {
		return nil, errors.New("match is empty")
	}
	m, err := regexp.Compile(p.Match)
	if err != nil {
		return nil, fmt.Errorf("match: %v", err)
	}
	c := &obsPattern{p: p, match: m, rc: m.SubexpIndex("rc")}
	if p.Action != "" {
		if c.action, err = regexp.Compile(p.Action); err != nil {
			return nil, fmt.Errorf("action: %v", err)
		}
		if c.action.NumSubexp() < 1 {
			return nil, errors.New("action has no group")
		}
	}
	if c.p.Stub == "" {
		c.p.Stub = "${stub}"
	} else if !strings.Contains(c.p.Stub, "${stub}") {
		return nil, errors.New("stub does not contain ${stub}")
	}
	if c.p.Tool == "" {
		c.p.Tool = "bash"
	}
	return c, nil
}

// observer recognises observations with a policy's compiled patterns (the patterns that do not
// compile are left out: nothing they would match is pruned).
type observer struct {
	ps []*obsPattern
}

var observers sync.Map // observerKey -> *observer

// observerOf returns the observer of a policy, nil when observations are off.
func observerOf(o *ObservationPolicy) *observer {
	if !o.Enabled {
		return nil
	}
	ps := o.Patterns
	if len(ps) == 0 {
		ps, _ = HarnessPatterns(o.Harness)
	}
	key, _ := json.Marshal(ps)
	if v, ok := observers.Load(string(key)); ok {
		return v.(*observer)
	}
	ob := &observer{}
	for _, p := range ps {
		if c, err := compilePattern(p); err == nil {
			ob.ps = append(ob.ps, c)
		}
	}
	v, _ := observers.LoadOrStore(string(key), ob)
	return v.(*observer)
}

// observationIDPrefix starts the id of every text observation's synthetic call.
const observationIDPrefix = "obs_"

// HasObservations reports whether the state indexes a text observation (summarized,
// spilled or backfilled): a rendered request may then ask for a text recovery request.
func (s *State) HasObservations() bool {
	for _, r := range s.Records {
		if strings.HasPrefix(r.ID, observationIDPrefix) {
			return true
		}
	}
	return false
}

// obsMatch is one recognised observation: the pattern, its groups' texts, the call and result
// blocks the engine sees for it (synthetic: they are never sent).
type obsMatch struct {
	p      *obsPattern
	groups []string // submatch texts by group index
	call   *wire.Block
	result *wire.Block
}

// observation recognises message m, right after message prev, as an observation: m is a
// user message without tool results whose first block is text a pattern matches, prev an
// assistant message without tool calls.
func (o *observer) observation(prev, m *wire.Message) *obsMatch {
	if prev == nil || prev.Role != wire.RoleAssistant || m.Role != wire.RoleUser || hasToolCall(prev) || hasToolResult(m) ||
		len(m.Blocks) == 0 || m.Blocks[0].Kind != wire.KindText {
		return nil
	}
	text := m.Blocks[0].Text()
	for _, p := range o.ps {
		idx := p.match.FindStringSubmatchIndex(text)
		if idx == nil {
			continue
		}
		om := &obsMatch{p: p, groups: make([]string, len(idx)/2)}
		for g := range om.groups {
			if idx[2*g] >= 0 {
				om.groups[g] = text[idx[2*g]:idx[2*g+1]]
			}
		}
		failed := p.p.Failed
		if p.rc > 0 && om.groups[p.rc] != "" {
			n, err := strconv.Atoi(om.groups[p.rc])
			failed = failed || err != nil || n != 0
		}
		action := p.actionOf(assistantText(prev))
		input := commandJSON(action)
		id := observationIDPrefix + strconv.FormatUint(xxhash.Sum64String(p.p.Tool+"\x00"+action+"\x00"+text), 16)
		om.call = &wire.Block{Kind: wire.KindToolUse, Type: "observation", ID: id, Name: p.p.Tool, Input: input}
		om.result = &wire.Block{Kind: wire.KindToolResult, Type: "observation", ID: id, Name: p.p.Tool, IsError: failed,
			Content: []*wire.Block{wire.NewTextBlock(m.Blocks[0].Format(), text)}}
		return om
	}
	return nil
}

// actionOf returns the action of an assistant text: the first group of the last match of the
// pattern's Action, else the whole text.
func (p *obsPattern) actionOf(text string) string {
	if p.action == nil {
		return text
	}
	all := p.action.FindAllStringSubmatch(text, -1)
	if len(all) == 0 {
		return text
	}
	return all[len(all)-1][1]
}

// commandJSON is the call input of an action: {"command": action}.
func commandJSON(action string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]string{"command": action})
	return bytes.TrimRight(b.Bytes(), "\n")
}

// frame returns the text that replaces the observation: the pattern's Stub with ${stub} the
// stub and ${name} the observation's group name.
func (om *obsMatch) frame(stub string) string {
	t := om.p.p.Stub
	var b strings.Builder
	for {
		i := strings.Index(t, "${")
		if i < 0 {
			b.WriteString(t)
			return b.String()
		}
		j := strings.IndexByte(t[i:], '}')
		if j < 0 {
			b.WriteString(t)
			return b.String()
		}
		b.WriteString(t[:i])
		name := t[i+2 : i+j]
		if name == "stub" {
			b.WriteString(stub)
		} else if g := om.p.match.SubexpIndex(name); g > 0 {
			b.WriteString(om.groups[g])
		}
		t = t[i+j+1:]
	}
}

// TextRecoveryCommand is the reply a text-protocol agent gives to see pruned outputs again:
// a line "context_tree_query <ref> [<ref> …]" (docs/recovery.md).
const TextRecoveryCommand = QueryToolName

// ObservationStubText is the stub text of a summarized observation, framed by its pattern.
func ObservationStubText(ref string) string {
	return "[Output summarized in pruner summary, ref `" + ref + "`. To see it in full, reply with exactly: " +
		TextRecoveryCommand + " " + ref + "]"
}

// ObservationSpillStubText is the stub text of a spilled observation, framed by its pattern.
func ObservationSpillStubText(tool, ref string, bytes int, preview string) string {
	b := "?"
	if bytes > 0 {
		b = strconv.Itoa(bytes)
	}
	return "[Oversized output spilled out of context — " + b + " bytes.]\nTool: " + tool +
		"\nPreview (head):\n" + preview + "\nFull output — reply with exactly: " + TextRecoveryCommand + " " + ref
}

// ObservationSummaryFooter is the footer of a per-batch summary of observations.
func ObservationSummaryFooter(refs []string) string {
	return "\n\n---\n**Summarized outputs**: " + refList(refs) + "\nTo see an original output in full, reply with exactly: " +
		TextRecoveryCommand + " " + refs[0] + " (one ref or several, separated by spaces)."
}

// recoveryLine finds a text recovery request: a line holding the command and its refs, maybe
// inside a code block, a quote or a list item, maybe in backticks.
var recoveryLine = regexp.MustCompile("(?m)^[ \\t>*-]*`?" + TextRecoveryCommand + "[ \\t]+([A-Za-z0-9_#.:-]+(?:[ \\t,]+[A-Za-z0-9_#.:-]+)*)[ \\t]*`?[ \\t]*\\r?$")

// TextRecoveryRequest returns the refs a model reply asks for in text (every line
// "context_tree_query t3 t7"), in order without repeats; nil when the reply asks for none.
func TextRecoveryRequest(reply string) []string {
	if !strings.Contains(reply, TextRecoveryCommand) {
		return nil
	}
	var ids []string
	seen := map[string]bool{}
	for _, m := range recoveryLine.FindAllStringSubmatch(reply, -1) {
		for _, id := range strings.FieldsFunc(m[1], func(r rune) bool { return r == ' ' || r == '\t' || r == ',' }) {
			if !seen[id] && len(id) <= 200 {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// AnswerTextRecovery answers a text recovery request: when reply asks for refs
// (TextRecoveryRequest), the text to send back as the next user message — QueryAll's answer,
// with the original outputs from lookup — and true; otherwise "" and false.
func AnswerTextRecovery(st *State, reply string, lookup BlobLookup) (string, bool) {
	ids := TextRecoveryRequest(reply)
	if len(ids) == 0 {
		return "", false
	}
	return QueryAll(st, ids, lookup), true
}

// ToolTurns reports, per message of req, whether it is an assistant message with tool calls:
// its own, or (observations on in pol) the action an observation answers. Flush triggers
// use it to tell an agent's tool-using turns from its final replies.
func ToolTurns(req *wire.Request, pol Policy) []bool {
	v := analyse(req.Format, req.Messages, &pol)
	out := make([]bool, len(req.Messages))
	for _, ai := range v.assistants {
		out[ai] = v.toolUsing(ai)
	}
	return out
}

// Observation is a text observation as the engine prunes it: the synthetic call and result
// blocks it stands for (never sent; the result's ID is the call id its record is kept under,
// its content the message's first block).
type Observation struct {
	Call, Result *wire.Block
}

// ObservationOf returns message m, which follows message prev (nil for the first), as a text
// observation under o: a user message a pattern recognises right after an assistant message
// without tool calls. ok is false when m is none or observations are off.
func ObservationOf(prev, m *wire.Message, o ObservationPolicy) (obs Observation, ok bool) {
	ob := observerOf(&o)
	if ob == nil {
		return Observation{}, false
	}
	om := ob.observation(prev, m)
	if om == nil {
		return Observation{}, false
	}
	return Observation{Call: om.call, Result: om.result}, true
}

// ToolTurnFunc returns ToolTurns one message at a time: whether msgs[i] is a tool-using
// assistant turn under pol, reading only that message and the next (a request's last turns
// without the whole view).
func ToolTurnFunc(pol Policy) func(msgs []*wire.Message, i int) bool {
	obs := observerOf(&pol.Observations)
	return func(msgs []*wire.Message, i int) bool {
		m := msgs[i]
		if m.Role != wire.RoleAssistant {
			return false
		}
		for _, b := range m.Blocks {
			if b.Kind == wire.KindToolUse && b.ID != "" {
				return true
			}
		}
		if obs == nil || i+1 >= len(msgs) {
			return false
		}
		next := msgs[i+1]
		return next.Role == wire.RoleUser && !hasToolResult(next) && obs.matches(next)
	}
}

// matches reports whether m's first block is text a pattern recognises (observation without
// building its blocks).
func (o *observer) matches(m *wire.Message) bool {
	if len(m.Blocks) == 0 || m.Blocks[0].Kind != wire.KindText {
		return false
	}
	text := m.Blocks[0].Text()
	for _, p := range o.ps {
		if p.match.MatchString(text) {
			return true
		}
	}
	return false
}
