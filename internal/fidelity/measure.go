package fidelity

import (
	"bytes"
	"strings"

	"github.com/condense-dev/condense/internal/wire"
)

// Use is one salient token the agent used: it wrote it in its response to a request, and the
// request (as the agent built it) showed it only inside tool results (or text observations).
type Use struct {
	// Token is the token.
	Token Token
	// Text is the token as the agent wrote it (normalized).
	Text string
	// Sources are the ids of the tool calls whose results show it, in request order (for a
	// text observation, the id of its synthetic call, pruner.Observation).
	Sources []string
}

// Response returns the agent's response to request prev as request next records it: the
// assistant messages next appends after prev's messages. It is nil when next does not extend
// prev (its message at prev's last position differs, as after a compaction or a rewind).
func Response(prev, next *wire.Request) []*wire.Message {
	n := len(prev.Messages)
	if len(next.Messages) <= n || (n > 0 && !bytes.Equal(prev.Messages[n-1].Bytes(), next.Messages[n-1].Bytes())) {
		return nil
	}
	var out []*wire.Message
	for _, m := range next.Messages[n:] {
		if m.Role == wire.RoleAssistant {
			out = append(out, m)
		}
	}
	return out
}

// Uses returns the uses of response against the request the index shows: each distinct
// mention (Mentions) of the response's text and tool-call arguments that the request shows
// only inside tool results (Index), in the order the response first mentions them.
func (x *Index) Uses(response []*wire.Message) []Use {
	var out []Use
	seen := map[Token]bool{}
	mention := func(s string) {
		t := TokenOf(s)
		if seen[t] {
			return
		}
		seen[t] = true
		if x.OnlyInToolResults(t) {
			out = append(out, Use{Token: t, Text: strings.Clone(s), Sources: x.sources(t)})
		}
	}
	for _, m := range response {
		for _, b := range m.Blocks {
			switch b.Kind {
			case wire.KindText:
				Mentions(b.Text(), mention)
			case wire.KindToolUse:
				jsonStrings(b.Input, func(s string) { Mentions(s, mention) })
			}
		}
	}
	return out
}

// Outcome is what a rendered request did with a use.
type Outcome uint8

const (
	// Kept: the rendered request shows the token (in a tool result, a summary, a stub, a
	// chain's synthetic message or any other text).
	Kept Outcome = iota
	// Recoverable: it does not, but a tool result that held it was pruned with its original
	// kept, so context_tree_query can bring it back.
	Recoverable
	// Lost: it does not, and no result that held it can be recovered.
	Lost
)

// String returns "kept", "recoverable" or "lost".
func (o Outcome) String() string {
	switch o {
	case Kept:
		return "kept"
	case Recoverable:
		return "recoverable"
	}
	return "lost"
}

// Verdict is one use with its outcome in a rendered request.
type Verdict struct {
	Use
	Outcome Outcome
	// Source is the tool call to recover (the latest recoverable source) or to re-run (the
	// latest source) when the use is not kept; "" when it is.
	Source string
}

// Classify judges uses against the rendered request the index shows. recoverable reports
// whether the original result of a tool call id can be recovered by context_tree_query (nil:
// none can).
func (x *Index) Classify(uses []Use, recoverable func(id string) bool) []Verdict {
	out := make([]Verdict, len(uses))
	for i, u := range uses {
		v := Verdict{Use: u}
		switch {
		case x.Shows(u.Token):
			v.Outcome = Kept
		default:
			v.Outcome = Lost
			if n := len(u.Sources); n > 0 {
				v.Source = u.Sources[n-1]
			}
			for j := len(u.Sources) - 1; j >= 0 && recoverable != nil; j-- {
				if recoverable(u.Sources[j]) {
					v.Outcome, v.Source = Recoverable, u.Sources[j]
					break
				}
			}
		}
		out[i] = v
	}
	return out
}

// Tally counts verdicts by outcome.
type Tally struct {
	Uses        int `json:"uses"`
	Kept        int `json:"kept"`
	Recoverable int `json:"recoverable"`
	Lost        int `json:"lost"`
}

// Add counts vs into t.
func (t *Tally) Add(vs []Verdict) {
	for _, v := range vs {
		t.Uses++
		switch v.Outcome {
		case Kept:
			t.Kept++
		case Recoverable:
			t.Recoverable++
		default:
			t.Lost++
		}
	}
}

// Plus returns t + u.
func (t Tally) Plus(u Tally) Tally {
	return Tally{Uses: t.Uses + u.Uses, Kept: t.Kept + u.Kept, Recoverable: t.Recoverable + u.Recoverable, Lost: t.Lost + u.Lost}
}
