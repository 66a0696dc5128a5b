package summarize

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/condense-dev/condense/internal/fidelity"
)

// ExtractiveModel is the Result.Model of the built-in extractive summarizer.
const ExtractiveModel = "extractive"

// SessionModelName is the summarizer.model value that selects SessionModel: summarize with the
// model (and credentials) of the session being pruned.
const SessionModelName = "default"

// Extractive is the built-in summarizer that calls no LLM; its output depends only on the input
// and its zero value is ready. A batch gets one labelled bullet per call with sub-bullets of
// result lines; a range keeps the per-batch summaries' distinct bullets (docs/summarizer.md).
type Extractive struct {
	// MaxLine caps each quoted line in runes (0 means 200).
	MaxLine int
	// MaxErrorLines caps the error lines quoted per call (0 means 3).
	MaxErrorLines int
	// MaxNames caps the "names:" line of a call in bytes (0 means DefaultMaxNames, negative
	// omits it); it never exceeds an eighth of the result.
	MaxNames int
}

// DefaultMaxNames is the default budget of a call's "names:" line, in bytes.
const DefaultMaxNames = 240

// Summarize implements Summarizer. Usage is zero (Calls is 0: no provider call was made).
func (x Extractive) Summarize(ctx context.Context, req *Request) (*Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if req == nil {
		return nil, &Error{Kind: KindInvalid, Model: ExtractiveModel, Msg: "nil request"}
	}
	var text string
	if req.Kind == KindRange {
		parts := req.Parts
		if len(parts) == 0 {
			parts = ParseRangePrompt(req.Prompt)
		}
		text = x.fuse(parts)
	} else {
		calls := req.Calls
		assistant := ""
		if len(calls) == 0 {
			assistant, calls = ParseBatchPrompt(req.Prompt)
		}
		text = x.batch(assistant, calls)
	}
	if strings.TrimSpace(text) == "" {
		return nil, &Error{Kind: KindUnusable, Model: ExtractiveModel, Msg: "nothing to summarize in the request"}
	}
	return &Result{Text: text, Model: ExtractiveModel}, nil
}

func (x Extractive) maxLine() int {
	if x.MaxLine > 0 {
		return x.MaxLine
	}
	return 200
}

func (x Extractive) maxNames() int {
	if x.MaxNames == 0 {
		return DefaultMaxNames
	}
	return max(x.MaxNames, 0)
}

func (x Extractive) maxErr() int {
	if x.MaxErrorLines > 0 {
		return x.MaxErrorLines
	}
	return 3
}

// isErrorLine reports whether line holds error evidence (fidelity.IsErrorLine).
func isErrorLine(line string) bool { return fidelity.IsErrorLine(line) }

func (x Extractive) batch(assistant string, calls []Call) string {
	var b strings.Builder
	if a := firstLine(assistant); a != "" {
		fmt.Fprintf(&b, "- Assistant: %s\n", clip(a, x.maxLine()))
	}
	for i, c := range calls {
		label := c.Label
		if label <= 0 {
			label = i + 1
		}
		status := "OK"
		if c.IsError {
			status = "ERROR"
		}
		lines := nonEmptyLines(c.Result)
		fmt.Fprintf(&b, "- [[%d:%s]] %s", label, c.Tool, c.Tool)
		if a := x.args(c.Args); a != "" {
			b.WriteString(" ")
			b.WriteString(a)
		}
		fmt.Fprintf(&b, " → %s, %d line(s), %d chars\n", status, len(lines), utf8.RuneCountInString(c.Result))
		if len(lines) == 0 {
			continue
		}
		fmt.Fprintf(&b, "  - first: %s\n", clip(lines[0], x.maxLine()))
		if len(lines) > 1 {
			fmt.Fprintf(&b, "  - last: %s\n", clip(lines[len(lines)-1], x.maxLine()))
		}
		n := 0
		for j := 1; j < len(lines)-1 && n < x.maxErr(); j++ {
			if isErrorLine(lines[j]) {
				fmt.Fprintf(&b, "  - error: %s\n", clip(lines[j], x.maxLine()))
				n++
			}
		}
		if names := x.names(c.Result, b.String()); names != "" {
			fmt.Fprintf(&b, "  - names: %s\n", names)
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// names lists the salient names (fidelity.Mentions) of result that shown lacks, most frequent
// first, ties by first occurrence, joined by ", " within min(maxNames, len(result)/8) bytes.
func (x Extractive) names(result, shown string) string {
	budget := min(x.maxNames(), len(result)/8)
	if budget <= 0 {
		return ""
	}
	type name struct {
		s     string
		count int
	}
	var list []*name
	byText := map[string]*name{}
	fidelity.Mentions(result, func(s string) {
		if strings.IndexByte(s, ' ') >= 0 || len(s) > budget || strings.Contains(s, "[[") {
			return
		}
		if n := byText[s]; n != nil {
			n.count++
			return
		}
		n := &name{s: strings.Clone(s), count: 1}
		byText[n.s] = n
		list = append(list, n)
	})
	sort.SliceStable(list, func(i, j int) bool { return list[i].count > list[j].count })
	var b strings.Builder
	for _, n := range list {
		if strings.Contains(shown, n.s) || b.Len()+len(n.s)+2 > budget {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(n.s)
	}
	return b.String()
}

// args renders the scalar top-level arguments as key=value in key order; other values and
// non-object inputs are rendered compactly. The whole is clipped to 2×MaxLine.
func (x Extractive) args(raw []byte) string {
	raw = []byte(strings.TrimSpace(string(raw)))
	if len(raw) == 0 {
		return ""
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return clip(oneLine(string(raw)), 2*x.maxLine())
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		v := obj[k]
		var s string
		var str string
		if json.Unmarshal(v, &str) == nil {
			s = strconv.Quote(clip(oneLine(str), x.maxLine()))
		} else if len(v) > 0 && (v[0] == '{' || v[0] == '[') {
			s = "…"
		} else {
			s = string(v)
		}
		parts = append(parts, k+"="+s)
	}
	return clip(strings.Join(parts, " "), 2*x.maxLine())
}

// fuse keeps the distinct bullet lines of the per-batch summaries in order, dropping their
// ref footers.
func (x Extractive) fuse(parts []string) string {
	seen := map[string]bool{}
	var out []string
	for _, p := range parts {
		for _, l := range strings.Split(stripFooter(p), "\n") {
			t := strings.TrimRight(l, " \t\r")
			s := strings.TrimSpace(t)
			if s == "" || seen[s] {
				continue
			}
			if !strings.HasPrefix(s, "- ") && !strings.HasPrefix(s, "* ") {
				t = "- " + s
			}
			seen[s] = true
			out = append(out, t)
		}
	}
	return strings.Join(out, "\n")
}

// footerStart is where the engine's ref footer begins in a per-batch summary.
const footerStart = "\n\n---\n**Summarized tool refs**"

func stripFooter(s string) string {
	if i := strings.Index(s, footerStart); i >= 0 {
		return s[:i]
	}
	return s
}

// truncMarker is the serializer's truncation suffix on long results.
var truncMarker = regexp.MustCompile(` \.\.\.\[\d+ chars truncated\]$`)

func nonEmptyLines(s string) []string {
	s = truncMarker.ReplaceAllString(s, "")
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if t := strings.TrimSpace(l); t != "" {
			out = append(out, t)
		}
	}
	return out
}

func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if t := strings.TrimSpace(l); t != "" {
			return t
		}
	}
	return ""
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// labelLike matches text that the engine would take for a [[N:tool]] label.
var labelLike = regexp.MustCompile(`\[\[(\d+:)`)

// clip cuts s to n runes, marking the cut with "…", and defuses label-like tokens so quoted
// text never carries a [[N:tool]] label of its own.
func clip(s string, n int) string {
	s = labelLike.ReplaceAllString(s, "[ [$1")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

// batchHeader matches a call header of the engine's batch serialization (reference §8.1):
// "[[N:tool]] Tool: tool(".
var batchHeader = regexp.MustCompile(`(?m)^\[\[(\d+):([^\]\n]+)\]\] Tool: `)

// ParseBatchPrompt recovers the assistant text and calls of a per-batch prompt: within <tool-call-batch>
// (or the whole prompt), an optional "Assistant said: " line, then "[[N:tool]] Tool: tool(<args>)\nResult
// (OK|ERROR): <text>" per call, joined by "\n---\n"; a label out of the sequence 1, 2, 3… is result text.
func ParseBatchPrompt(prompt string) (assistant string, calls []Call) {
	body := prompt
	if i := strings.Index(body, "<tool-call-batch>\n"); i >= 0 {
		body = body[i+len("<tool-call-batch>\n"):]
		if j := strings.LastIndex(body, "\n</tool-call-batch>"); j >= 0 {
			body = body[:j]
		}
	}
	var starts [][]int
	for _, m := range batchHeader.FindAllStringSubmatchIndex(body, -1) {
		n, _ := strconv.Atoi(body[m[2]:m[3]])
		if n == len(starts)+1 {
			starts = append(starts, m)
		}
	}
	if len(starts) == 0 {
		return "", nil
	}
	if pre := body[:starts[0][0]]; strings.HasPrefix(pre, "Assistant said: ") {
		assistant = strings.TrimRight(strings.TrimPrefix(pre, "Assistant said: "), "\n")
	}
	for i, m := range starts {
		end := len(body)
		if i+1 < len(starts) {
			end = starts[i+1][0]
		}
		chunk := body[m[1]:end]
		if i+1 < len(starts) {
			chunk = strings.TrimSuffix(chunk, "\n---\n")
		}
		tool := body[m[4]:m[5]]
		c := Call{Label: i + 1, Tool: tool}
		head, result := chunk, ""
		for _, st := range []string{"\nResult (OK): ", "\nResult (ERROR): "} {
			if k := strings.Index(chunk, st); k >= 0 && (head == chunk || k < len(head)) {
				head, result = chunk[:k], chunk[k+len(st):]
				c.IsError = st == "\nResult (ERROR): "
			}
		}
		head = strings.TrimPrefix(head, tool+"(")
		head = strings.TrimSuffix(head, ")")
		c.Args = []byte(head)
		c.Result = result
		calls = append(calls, c)
	}
	return assistant, calls
}

// ParseRangePrompt returns the per-batch summaries of a range-fusion prompt: the text between
// <sub-task-summaries> and </sub-task-summaries>, split at blank lines that precede a bullet
// or label line. Without the markers it returns the whole prompt as one part.
func ParseRangePrompt(prompt string) []string {
	body := prompt
	if i := strings.Index(body, "<sub-task-summaries>\n"); i >= 0 {
		body = body[i+len("<sub-task-summaries>\n"):]
		if j := strings.LastIndex(body, "\n</sub-task-summaries>"); j >= 0 {
			body = body[:j]
		}
	}
	if strings.TrimSpace(body) == "" {
		return nil
	}
	// Footers end each per-batch summary; fusing strips them, so splitting is only needed
	// to strip every footer, not just the first.
	var parts []string
	for {
		i := strings.Index(body, footerStart)
		if i < 0 {
			break
		}
		parts = append(parts, body[:i])
		rest := body[i+len(footerStart):]
		// the footer runs to the end of its "Use `context_tree_query`…" line
		if k := strings.Index(rest, "original full outputs."); k >= 0 {
			rest = rest[k+len("original full outputs."):]
		} else {
			rest = ""
		}
		body = strings.TrimLeft(rest, "\n")
	}
	if strings.TrimSpace(body) != "" {
		parts = append(parts, body)
	}
	return parts
}
