package pruner

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/condense-dev/condense/internal/wire"
)

// Query limits: a recovered body is cut to whole lines within these bounds.
const (
	QueryMaxLines = 2000
	QueryMaxBytes = 51200
)

// queryHit is one record to print under a label.
type queryHit struct {
	label string
	rec   *Record
}

// Query answers one context_tree_query id (docs/recovery.md): a tN ref, occurrence key or alias
// gives one block, a raw provider id every occurrence with its key, an unknown id the valid
// range. Bodies come from blobs through lookup (nil: previews only).
func Query(st *State, refOrID string, lookup BlobLookup) string {
	if st == nil {
		st = NewState()
	}
	var hits []queryHit
	if keys := st.byID[refOrID]; len(keys) > 0 && st.Records[refOrID] == nil && st.Aliases[refOrID] == "" {
		for _, k := range keys {
			if rk, ok := st.Resolve(k); ok {
				hits = append(hits, queryHit{label: k, rec: st.Records[rk]})
			}
		}
		sort.SliceStable(hits, func(i, j int) bool { return hits[i].label < hits[j].label })
		if len(hits) == 1 {
			hits[0].label = refOrID
		}
	} else if rk, ok := st.Resolve(refOrID); ok {
		hits = []queryHit{{label: refOrID, rec: st.Records[rk]}}
	}
	if len(hits) == 0 {
		return "## toolRef: " + refOrID + "\n(not found in index — may not have been summarized yet)" + validRange(st)
	}
	parts := make([]string, len(hits))
	for i, h := range hits {
		parts[i] = queryBlock(h, lookup)
	}
	return strings.Join(parts, "\n\n---\n\n")
}

// QueryAll answers a whole tool call: every id in order, blocks joined by a rule.
func QueryAll(st *State, ids []string, lookup BlobLookup) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = Query(st, id, lookup)
	}
	if len(parts) == 0 {
		return "(no toolCallIds given)" + validRange(st)
	}
	return strings.Join(parts, "\n\n---\n\n")
}

func validRange(st *State) string {
	if st.NextRef <= 1 {
		return "\nNo refs have been issued in this session yet."
	}
	return "\nValid refs: t1–t" + strconv.Itoa(st.NextRef-1) + " (some numbers may be unused)."
}

func queryBlock(h queryHit, lookup BlobLookup) string {
	r := h.rec
	var args []byte
	if lookup != nil {
		args, _ = lookup(BlobKeyArgs(r.Key))
	}
	argText := string(prettyJSON(args))
	if args == nil {
		argText = r.ArgsExcerpt
	}
	status := "OK"
	if r.IsError {
		status = "ERROR"
	}
	var b strings.Builder
	b.WriteString("## toolRef: " + h.label + "\nTool: " + r.Tool + "\nArgs: " + argText + "\nStatus: " + status +
		"\nTurn: " + strconv.Itoa(r.Turn) + "\n\n")
	var body []byte
	ok := false
	if lookup != nil {
		body, ok = lookup(BlobKeyResult(r.Key))
	}
	switch {
	case ok:
		b.WriteString(truncateHead(string(body)))
	case r.Preview != "":
		b.WriteString(r.Preview + "\n[Full output unavailable — only the preview was found]")
	default:
		b.WriteString("(output unavailable — blob missing)")
	}
	return b.String()
}

// truncateHead keeps whole lines within QueryMaxLines and QueryMaxBytes (a first line over
// the byte cap is cut at a rune boundary instead of dropped).
func truncateHead(s string) string {
	lines := strings.Split(s, "\n")
	total := len(lines)
	size, n := 0, 0
	for n < len(lines) && n < QueryMaxLines {
		add := len(lines[n])
		if n > 0 {
			add++
		}
		if size+add > QueryMaxBytes {
			break
		}
		size += add
		n++
	}
	if n == total {
		return s
	}
	if n == 0 {
		// One line longer than the byte cap: keep its head rather than nothing.
		head := HeadPreview(lines[0], QueryMaxBytes)
		return head + "\n[Output truncated: first line cut at " + strconv.Itoa(len(head)) + " of " +
			strconv.Itoa(len(lines[0])) + " bytes; " + strconv.Itoa(total) + " lines in total]"
	}
	return strings.Join(lines[:n], "\n") + "\n[Output truncated: " + strconv.Itoa(n) + "/" + strconv.Itoa(total) + " lines shown]"
}

const queryDescription = "Retrieve original tool outputs that the context pruner replaced by summaries. " +
	"Pass the short refs shown in a summary or stub, for example context_tree_query({\"toolCallIds\": [\"t12\", \"t3\"]}). " +
	"A raw tool-call id that was reused returns every occurrence, each labelled with its occurrence key."

// QueryToolSchema returns the tool definition to add to a request's tools in format f.
func QueryToolSchema(f wire.Format) []byte {
	params := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"toolCallIds": map[string]any{
				"type":        "array",
				"items":       map[string]any{"type": "string"},
				"description": "Short refs (t12), occurrence keys or raw tool-call ids to retrieve.",
			},
		},
		"required": []string{"toolCallIds"},
	}
	var v any
	switch f {
	case wire.OpenAI:
		v = map[string]any{"type": "function", "function": map[string]any{
			"name": QueryToolName, "description": queryDescription, "parameters": params}}
	case wire.Responses:
		// A flat function tool; strict defaults to true there, which would require
		// "additionalProperties": false in the schema.
		v = map[string]any{"type": "function", "name": QueryToolName, "description": queryDescription,
			"parameters": params, "strict": false}
	default:
		v = map[string]any{"name": QueryToolName, "description": queryDescription, "input_schema": params}
	}
	b, _ := json.Marshal(v)
	return b
}

// queryTools holds the parsed tool definition per format (see QueryTool).
var queryTools = map[wire.Format]func() *wire.Tool{
	wire.Anthropic: sync.OnceValue(func() *wire.Tool { return mustTool(wire.Anthropic) }),
	wire.OpenAI:    sync.OnceValue(func() *wire.Tool { return mustTool(wire.OpenAI) }),
	wire.Responses: sync.OnceValue(func() *wire.Tool { return mustTool(wire.Responses) }),
}

func mustTool(f wire.Format) *wire.Tool {
	t, err := wire.NewTool(f, QueryToolSchema(f))
	if err != nil {
		panic("pruner: the context_tree_query definition does not parse: " + err.Error())
	}
	return t
}

// QueryTool returns QueryToolSchema(f) parsed as a tool of a request in format f (nil for an
// unknown format). It is built once per format; wire values are immutable, so every request
// shares it.
func QueryTool(f wire.Format) *wire.Tool {
	if q, ok := queryTools[f]; ok {
		return q()
	}
	return nil
}

// ParseQueryInput decodes a context_tree_query call's input into its ids.
func ParseQueryInput(input []byte) ([]string, error) {
	var in struct {
		ToolCallIDs []string `json:"toolCallIds"`
	}
	if err := json.Unmarshal(input, &in); err != nil {
		return nil, &QueryInputError{Msg: err.Error()}
	}
	return in.ToolCallIDs, nil
}

// QueryInputError reports malformed context_tree_query input.
type QueryInputError struct {
	// Msg says what is wrong.
	Msg string
}

// Error implements error.
func (e *QueryInputError) Error() string { return "pruner: bad context_tree_query input: " + e.Msg }
