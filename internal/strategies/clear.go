package strategies

import (
	"context"
	"fmt"
	"sort"

	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/replay"
	"github.com/condense-dev/condense/internal/wire"
)

// ClearedPlaceholder replaces a cleared tool result (and, with ClearToolInputs, the call's
// input is replaced by an empty object).
const ClearedPlaceholder = "[tool result cleared to save context]"

// ClearToolUses simulates Anthropic's stateless context editing clear_tool_uses_20250919 on each
// request: over Trigger input tokens, results older than the Keep latest uses (bar ExcludeTools)
// become a placeholder, unless that would clear fewer than ClearAtLeast tokens.
type ClearToolUses struct {
	// Trigger is the input-token threshold (default 100000).
	Trigger int
	// Keep is how many of the most recent tool uses keep their results (default 3).
	Keep int
	// ClearAtLeast is the minimum tokens an activation must clear (0: no minimum).
	ClearAtLeast int
	// ExcludeTools are tool names whose results are never cleared.
	ExcludeTools []string
	// ClearToolInputs also replaces the cleared calls' inputs by {}.
	ClearToolInputs bool
}

// DefaultClearToolUses returns the API defaults: trigger 100000 input tokens, keep 3 tool uses.
func DefaultClearToolUses() ClearToolUses { return ClearToolUses{Trigger: 100000, Keep: 3} }

// Name implements replay.Strategy.
func (c ClearToolUses) Name() string { return "clear-tool-uses" }

// New implements replay.Strategy.
func (c ClearToolUses) New(context.Context, replay.Transcript) (replay.Runner, error) {
	if c.Trigger < 0 || c.Keep < 0 || c.ClearAtLeast < 0 {
		return nil, fmt.Errorf("clear-tool-uses: negative trigger, keep or clear_at_least")
	}
	return clearRunner{c}, nil
}

type clearRunner struct{ c ClearToolUses }

// Close implements replay.Runner.
func (clearRunner) Close() error { return nil }

// Rewrite implements replay.Runner.
func (r clearRunner) Rewrite(_ context.Context, req *replay.Request) (replay.Result, error) {
	p, err := req.Prompt(req.Body)
	if err != nil {
		return replay.Result{}, err
	}
	if p.Tokens() <= r.c.Trigger {
		return replay.Result{Body: req.Body}, nil
	}
	excluded := map[string]bool{}
	for _, t := range r.c.ExcludeTools {
		excluded[t] = true
	}
	uses := toolUses(req.Format, req.Body)
	est := req.Estimator
	placeholder := est.Text(ClearedPlaceholder)
	var edits []edit
	cleared, count := 0, 0
	for i := 0; i < len(uses)-r.c.Keep; i++ {
		u := uses[i]
		if excluded[u.name] || u.resMsg < 0 {
			continue
		}
		if u.resultText == ClearedPlaceholder {
			continue
		}
		cleared += est.Text(u.resultText) - placeholder
		count++
		edits = append(edits, resultEdit(req.Format, u, ClearedPlaceholder))
		if e, ok := inputEdit(req.Format, u); ok && r.c.ClearToolInputs {
			cleared += est.Text(u.inputRaw) - 1
			edits = append(edits, e)
		}
	}
	if count == 0 {
		return replay.Result{Body: req.Body}, nil
	}
	if cleared < r.c.ClearAtLeast {
		return replay.Result{Body: req.Body, Diagnostics: []replay.Diagnostic{{Request: req.Index, Kind: "clear-below-minimum",
			Detail: fmt.Sprintf("would clear %d tokens < clear_at_least %d", cleared, r.c.ClearAtLeast)}}}, nil
	}
	return replay.Result{Body: applyEdits(req.Body, messagesKey(req.Format), edits)}, nil
}

// resultEdit replaces a tool result's content with text.
func resultEdit(f wire.Format, u toolUse, text string) edit {
	switch f {
	case wire.OpenAI:
		return edit{msg: u.resMsg, blk: -1, member: "content", raw: jsonString(text)}
	case wire.Responses:
		return edit{msg: u.resMsg, blk: -1, member: "output", raw: jsonString(text)}
	}
	return edit{msg: u.resMsg, blk: u.resBlk, member: "content", raw: jsonString(text)}
}

// inputEdit replaces a tool call's input with an empty object (Responses: an empty arguments
// object, an empty custom tool input; a local shell call's action is left: ok false).
func inputEdit(f wire.Format, u toolUse) (edit, bool) {
	switch f {
	case wire.OpenAI:
		return edit{msg: u.msg, blk: u.block, call: true, member: "arguments", raw: `"{}"`}, true
	case wire.Responses:
		switch u.kind {
		case "function_call":
			return edit{msg: u.msg, blk: -1, member: "arguments", raw: `"{}"`}, true
		case "custom_tool_call":
			return edit{msg: u.msg, blk: -1, member: "input", raw: `""`}, true
		}
		return edit{}, false
	}
	return edit{msg: u.msg, blk: u.block, member: "input", raw: "{}"}, true
}

// MaskedPlaceholder replaces a masked tool output.
const MaskedPlaceholder = "[earlier tool output omitted]"

// ObservationMask replaces every tool output but the last Window with a placeholder on every
// request, keeping the calls; a text-protocol agent's observation messages are its outputs
// (replay.ObservationHarness).
type ObservationMask struct {
	// Window is how many of the most recent tool outputs are kept (default 10).
	Window int
}

// Name implements replay.Strategy.
func (m ObservationMask) Name() string { return "observation-mask" }

// New implements replay.Strategy.
func (m ObservationMask) New(_ context.Context, t replay.Transcript) (replay.Runner, error) {
	if m.Window < 0 {
		return nil, fmt.Errorf("observation-mask: negative window")
	}
	r := maskRunner{m: m}
	r.obs = replay.ObservationPolicy(t)
	return r, nil
}

type maskRunner struct {
	m   ObservationMask
	obs pruner.ObservationPolicy // recognises text observations; off for a tool-calling agent
}

// Close implements replay.Runner.
func (maskRunner) Close() error { return nil }

// output is one tool output or text observation, by message and its edit.
type output struct {
	msg  int
	text string
	edit edit
}

// Rewrite implements replay.Runner.
func (r maskRunner) Rewrite(_ context.Context, req *replay.Request) (replay.Result, error) {
	var outs []output
	for _, u := range toolUses(req.Format, req.Body) {
		if u.resMsg >= 0 {
			outs = append(outs, output{msg: u.resMsg, text: u.resultText, edit: resultEdit(req.Format, u, MaskedPlaceholder)})
		}
	}
	if r.obs.Enabled {
		wr, err := wire.Parse(req.Format, req.Body)
		if err != nil {
			return replay.Result{}, err
		}
		for i := 1; i < len(wr.Messages); i++ {
			if o, ok := pruner.ObservationOf(wr.Messages[i-1], wr.Messages[i], r.obs); ok {
				outs = append(outs, output{msg: i, text: o.Result.ResultText(),
					edit: edit{msg: i, blk: -1, member: "content", raw: jsonString(MaskedPlaceholder)}})
			}
		}
		sort.SliceStable(outs, func(a, b int) bool { return outs[a].msg < outs[b].msg })
	}
	var edits []edit
	for i := 0; i < len(outs)-r.m.Window; i++ {
		if outs[i].text != MaskedPlaceholder {
			edits = append(edits, outs[i].edit)
		}
	}
	return replay.Result{Body: applyEdits(req.Body, messagesKey(req.Format), edits)}, nil
}
