package pruner

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// utf16Len is the JavaScript string length of s (UTF-16 code units).
func utf16Len(s string) int {
	n := 0
	for i := 0; i < len(s); {
		// Skip ASCII eight bytes at a time.
		for i+8 <= len(s) && (uint64(s[i])|uint64(s[i+1])<<8|uint64(s[i+2])<<16|uint64(s[i+3])<<24|
			uint64(s[i+4])<<32|uint64(s[i+5])<<40|uint64(s[i+6])<<48|uint64(s[i+7])<<56)&0x8080808080808080 == 0 {
			i += 8
			n += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			n++
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
		i += size
	}
	return n
}

// utf16Prefix returns the longest prefix of s of at most n UTF-16 units (never splitting a
// surrogate pair, unlike JavaScript) and the number of units it holds.
func utf16Prefix(s string, n int) (string, int) {
	u := 0
	for i, r := range s {
		w := 1
		if r >= 0x10000 {
			w = 2
		}
		if u+w > n {
			return s[:i], u
		}
		u += w
	}
	return s, u
}

// jsSpace reports whether r is in the JavaScript whitespace set used by trim and \s.
func jsSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
}

func jsTrim(s string) string { return strings.TrimFunc(s, jsSpace) }

// ContentHash is the dedup hash of a tool result: hex SHA-256 (first 16 bytes) over the tool
// name, a zero byte and the normalized text (CRLF to LF, trailing spaces and tabs stripped per
// line, whole text trimmed).
func ContentHash(tool, text string) string {
	h := sha256.New()
	h.Write([]byte(tool))
	h.Write([]byte{0})
	h.Write([]byte(normalizeForHash(text)))
	var sum [32]byte
	return hex.EncodeToString(h.Sum(sum[:0])[:16])
}

func normalizeForHash(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	if strings.Contains(s, " \n") || strings.Contains(s, "\t\n") || strings.HasSuffix(s, " ") || strings.HasSuffix(s, "\t") {
		lines := strings.Split(s, "\n")
		for i, l := range lines {
			lines[i] = strings.TrimRight(l, " \t")
		}
		s = strings.Join(lines, "\n")
	}
	return jsTrim(s)
}

// HeadPreview returns the head of s within maxBytes UTF-8 bytes: the whole string when it fits,
// else cut back to a rune boundary and then to the last newline (excluded) when there is one
// past index 0.
func HeadPreview(s string, maxBytes int) string {
	if maxBytes < 0 {
		maxBytes = 0
	}
	if len(s) <= maxBytes {
		return s
	}
	cut := maxBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	head := s[:cut]
	if i := strings.LastIndexByte(head, '\n'); i > 0 {
		head = head[:i]
	}
	return head
}

// StubText is the replacement text of a summarized result (reference §10.3).
func StubText(ref string) string {
	return "[Summarized in pruner summary, ref `" + ref + "`. Use context_tree_query to retrieve full output.]"
}

// SpillStubText is the replacement text of a spilled result. It keeps the reference's lines
// except the sidecar-file line: a proxy's client cannot read our store, so recovery is by query.
func SpillStubText(tool, ref string, bytes int, preview string) string {
	b := "?"
	if bytes > 0 {
		b = strconv.Itoa(bytes)
	}
	return "[Oversized output spilled out of context — " + b + " bytes.]\nTool: " + tool +
		"\nPreview (head):\n" + preview + "\nFull output — use context_tree_query with ref `" + ref + "`."
}

// PurgedArgs is the replacement input of a purged errored call (reference §10.4).
func PurgedArgs(size int) []byte {
	return []byte(`{"_purged":"<purged-errored-args size=\"` + strconv.Itoa(size) + `\"/>"}`)
}

// SummaryFooter is the footer appended to every per-batch summary (reference §9).
func SummaryFooter(refs []string) string {
	return "\n\n---\n**Summarized tool refs**: " + refList(refs) + "\nUse `context_tree_query` with these refs to retrieve the original full outputs."
}

// refList is refs in backticks, separated by ", ".
func refList(refs []string) string {
	var b strings.Builder
	for i, r := range refs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("`" + r + "`")
	}
	return b.String()
}

var (
	anchoredLabel = regexp.MustCompile(`^(\s*(?:[-*]\s+)?)\[\[(\d+):([^\]\n]+)\]\]\s*`)
	anyLabel      = regexp.MustCompile(`\[\[\d+:[^\]\n]+\]\]\s*`)
)

// DecorateRefs rewrites summarizer text line by line (reference §9): a valid leading [[N:tool]]
// label becomes the inline ref `tN` and a space; every other label is removed; lines inside
// ``` fences are untouched.
func DecorateRefs(text string, refs, tools []string) string {
	if text == "" {
		return ""
	}
	lines := strings.Split(text, "\n")
	fence := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimLeftFunc(l, jsSpace), "```") {
			fence = !fence
			continue
		}
		if fence || !strings.Contains(l, "[[") {
			continue
		}
		if m := anchoredLabel.FindStringSubmatchIndex(l); m != nil {
			prefix := l[m[2]:m[3]]
			n, err := strconv.Atoi(l[m[4]:m[5]])
			name := l[m[6]:m[7]]
			rest := l[m[1]:]
			if err == nil && n >= 1 && n <= len(refs) && n <= len(tools) &&
				strings.EqualFold(strings.TrimSpace(name), strings.TrimSpace(tools[n-1])) {
				l = prefix + "`" + refs[n-1] + "` " + rest
			} else {
				l = prefix + rest
			}
			head := len(l) - len(rest)
			l = l[:head] + anyLabel.ReplaceAllString(l[head:], "")
		} else {
			l = anyLabel.ReplaceAllString(l, "")
		}
		lines[i] = l
	}
	return strings.Join(lines, "\n")
}

// SummarizerSystemPrompt is the per-batch instruction text. It carries the label contract of
// reference §8: each call is introduced by [[N:tool]] and the first bullet about a call starts
// with that label copied exactly.
const SummarizerSystemPrompt = `You condense the tool activity of an AI coding agent so the agent can keep working without the raw outputs.

The batch below lists tool calls in order. For each call worth keeping, write one to three short bullets:
what the call did (tool and purpose in one sentence), what came out of it, and anything the agent must remember.
Reproduce file paths, symbols, identifiers, commands, signatures, version numbers and error messages exactly as they appear.
For a file the call read or a listing or search it ran, name the functions, types, constants and paths it showed that the agent may refer to again, most used first.
Leave out calls that succeeded without producing anything worth remembering, and calls whose arguments were empty.
Keep it short.

Labels: every call in the batch is introduced by a label such as [[3:bash]]. Begin the first bullet you write about a call with that exact label, as the first thing on the line after the bullet marker (for example "- [[3:bash]] Ran the tests ..."). Do not put the label in bold, backticks, a numbered list or a quote. Never change a label's number or tool name and never make up labels. If you leave a call out, leave its label out too.`

// RangeFusionSystemPrompt is the range-fusion instruction text.
const RangeFusionSystemPrompt = `Below are several consecutive summaries of steps the agent took while working on one finished sub-task.
Merge them into a single summary of that sub-task: remove repetition, keep results, decisions, file paths, identifiers and error messages exactly as written.
Keep every reference token such as ` + "`t12`" + ` or b3 unchanged next to the fact it belongs to.
Write a brief narrative or a few grouped bullets.`

// serializeBatch renders calls with [[N:tool]] labels (reference §8.1).
func serializeBatch(assistantText string, calls []BatchCall) string {
	var b strings.Builder
	if assistantText != "" {
		b.WriteString("Assistant said: ")
		b.WriteString(assistantText)
		b.WriteString("\n\n")
	}
	for i, c := range calls {
		if i > 0 {
			b.WriteString("\n---\n")
		}
		b.WriteString("[[")
		b.WriteString(strconv.Itoa(c.Label))
		b.WriteString(":")
		b.WriteString(c.Tool)
		b.WriteString("]] Tool: ")
		b.WriteString(c.Tool)
		b.WriteString("(")
		b.Write(prettyJSON(c.Args))
		b.WriteString(")\nResult (")
		if c.IsError {
			b.WriteString("ERROR")
		} else {
			b.WriteString("OK")
		}
		b.WriteString("): ")
		head, units := utf16Prefix(c.Result, 2000)
		b.WriteString(head)
		if len(head) < len(c.Result) {
			b.WriteString(" ...[")
			b.WriteString(strconv.Itoa(utf16Len(c.Result) - units))
			b.WriteString(" chars truncated]")
		}
	}
	return b.String()
}

// BatchPrompt is the user message of a per-batch summarizer call.
func BatchPrompt(assistantText string, calls []BatchCall) string {
	return SummarizerSystemPrompt + "\n\n<tool-call-batch>\n" + serializeBatch(assistantText, calls) + "\n</tool-call-batch>"
}

// RangeFusionPrompt is the user message of a range-fusion call over per-batch summaries.
func RangeFusionPrompt(parts []string) string {
	return RangeFusionSystemPrompt + "\n\n<sub-task-summaries>\n" + strings.Join(parts, "\n\n") + "\n</sub-task-summaries>"
}

func prettyJSON(raw []byte) []byte {
	if len(bytes.TrimSpace(raw)) == 0 {
		return []byte("{}")
	}
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		return raw
	}
	return out.Bytes()
}

func compactJSON(raw []byte) string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return "{}"
	}
	var out bytes.Buffer
	if err := json.Compact(&out, raw); err != nil {
		return string(raw)
	}
	return out.String()
}

// argsExcerpt is the compact argument JSON capped at 200 UTF-16 units plus "...".
func argsExcerpt(raw []byte) string {
	s := compactJSON(raw)
	head, _ := utf16Prefix(s, 200)
	if len(head) < len(s) {
		return head + "..."
	}
	return s
}

// pathArg extracts a string "path" member from argument JSON: raw must be one JSON object
// whose (last) "path" member is a string, decoded as encoding/json decodes it.
func pathArg(raw []byte) (string, bool) {
	if !bytes.Contains(raw, []byte(`"path"`)) || !gjson.ValidBytes(raw) {
		return "", false
	}
	return pathArgValid(raw)
}

// pathArgValid is pathArg for raw already known to be one valid JSON value (an Anthropic
// tool_use input, which the wire parser checked).
func pathArgValid(raw []byte) (string, bool) {
	if !bytes.Contains(raw, []byte(`"path"`)) {
		return "", false
	}
	root := gjson.ParseBytes(raw)
	if !root.IsObject() {
		return "", false
	}
	var v gjson.Result
	root.ForEach(func(k, val gjson.Result) bool {
		if k.Str == "path" {
			v = val // the last one wins, as in encoding/json
		}
		return true
	})
	switch {
	case v.Type == gjson.Null && v.Raw != "": // null decodes to ""
		return "", true
	case v.Type != gjson.String:
		return "", false
	}
	if strings.IndexByte(v.Raw, '\\') < 0 && utf8.ValidString(v.Raw) {
		return v.Str, true
	}
	var s string // escapes or invalid UTF-8: decode exactly as encoding/json does
	if json.Unmarshal([]byte(v.Raw), &s) != nil {
		return "", false
	}
	return s, true
}

// deterministicBody is the zero-LLM body of an uncovered chain (reference §11.3, with the
// Span line counting turns because our transcripts carry no timestamps).
func deterministicBody(recs []*Record, refs []string, turns int) string {
	var b strings.Builder
	b.WriteString("Deterministic chain compression (no per-batch summary existed for this span; raw outputs recoverable via context_tree_query).\n")
	b.WriteString("Calls: " + strconv.Itoa(len(recs)) + "\n")
	counts := map[string]int{}
	var names []string
	for _, r := range recs {
		if counts[r.Tool] == 0 {
			names = append(names, r.Tool)
		}
		counts[r.Tool]++
	}
	sort.Slice(names, func(i, j int) bool {
		if counts[names[i]] != counts[names[j]] {
			return counts[names[i]] > counts[names[j]]
		}
		return names[i] < names[j]
	})
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + " x" + strconv.Itoa(counts[n])
	}
	b.WriteString("Tools: " + strings.Join(parts, ", ") + "\n")
	b.WriteString("Span: " + strconv.Itoa(turns) + " tool-using assistant turn(s)\n")
	if len(recs) > 0 {
		b.WriteString("First: " + recs[0].Tool + " " + recs[0].ArgsExcerpt + "\n")
		b.WriteString("Last: " + recs[len(recs)-1].Tool + " " + recs[len(recs)-1].ArgsExcerpt + "\n")
	} else {
		b.WriteString("First: -\nLast: -\n")
	}
	if len(refs) == 0 {
		for _, r := range recs {
			refs = append(refs, r.ID)
		}
	}
	b.WriteString("Refs: " + strings.Join(refs, ", "))
	return b.String()
}

var placeholder = regexp.MustCompile(`\{b(\d+)\}`)

// substituteBlocks replaces {bN} with lookup("bN") once (no re-scan); self references and
// unknown ids stay literal.
func substituteBlocks(text, self string, lookup func(string) (string, bool)) string {
	if !strings.Contains(text, "{b") {
		return text
	}
	return placeholder.ReplaceAllStringFunc(text, func(m string) string {
		id := m[1 : len(m)-1]
		if id == self || lookup == nil {
			return m
		}
		if t, ok := lookup(id); ok && t != "" {
			return t
		}
		return m
	})
}
