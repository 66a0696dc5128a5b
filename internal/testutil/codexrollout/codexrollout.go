// Package codexrollout gives tests the corpus Codex rollouts (codex_*.jsonl) as the Responses
// requests Codex sent, as internal/transcripts rebuilds them. It imports internal/transcripts,
// so that package must never import internal/wire, whose tests use this one.
package codexrollout

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/testutil/corpus"
	"github.com/condense-dev/condense/internal/transcripts"
)

// Rollout is one Codex session: its input items and where each request ends.
type Rollout struct {
	// Name is the corpus file name.
	Name string
	// Items are the input items in order (the last context of the session).
	Items []json.RawMessage
	// Ends holds, per request, how many leading items it sends (one request before each
	// model response).
	Ends []int
	// Chat and ChatEnds are the same transcript in Chat Completions form (the importer's
	// OpenAI form: no reasoning or hosted tool items) and its requests' message counts.
	Chat     [][]byte
	ChatEnds []int

	s     *transcripts.Session
	model string
}

// Files returns the Codex rollouts of the corpus, skipping the test when it is absent.
func Files(tb testing.TB) []string {
	tb.Helper()
	var out []string
	for _, p := range corpus.Files(tb) {
		if strings.HasPrefix(filepath.Base(p), "codex_") {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		tb.Skip("no Codex rollouts in the corpus")
	}
	return out
}

// Load imports a rollout.
func Load(path string) (*Rollout, error) {
	s, err := transcripts.ImportFile(path, transcripts.FormatCodex)
	if err != nil {
		return nil, err
	}
	last := s.Point(s.Len() - 1)
	r := &Rollout{Name: filepath.Base(path), s: s, model: last.Model}
	for _, it := range s.Context(transcripts.Responses, last.ContextIn(transcripts.Responses)) {
		r.Items = append(r.Items, it)
	}
	r.Chat = s.Context(transcripts.OpenAI, last.ContextIn(transcripts.OpenAI))
	for k := 0; k < s.Len(); k++ {
		pt := s.Point(k)
		if pt.ContextIn(transcripts.Responses) == last.ContextIn(transcripts.Responses) {
			r.Ends = append(r.Ends, pt.Messages(transcripts.Responses))
		}
		if pt.ContextIn(transcripts.OpenAI) == last.ContextIn(transcripts.OpenAI) {
			r.ChatEnds = append(r.ChatEnds, pt.Messages(transcripts.OpenAI))
		}
	}
	return r, nil
}

// Join returns one session made of the items of rs in order, with the first's request
// members (model, instructions, tools).
func Join(rs ...*Rollout) *Rollout {
	j := &Rollout{Name: "joined", s: rs[0].s, model: rs[0].model}
	for _, r := range rs {
		for _, e := range r.Ends {
			j.Ends = append(j.Ends, len(j.Items)+e)
		}
		for _, e := range r.ChatEnds {
			j.ChatEnds = append(j.ChatEnds, len(j.Chat)+e)
		}
		j.Items = append(j.Items, r.Items...)
		j.Chat = append(j.Chat, r.Chat...)
	}
	return j
}

// Joined is Join of every Codex rollout of the corpus, in name order (skipping the test when
// there is none): the corpus's largest Responses transcript.
func Joined(tb testing.TB) *Rollout {
	tb.Helper()
	var rs []*Rollout
	for _, p := range Files(tb) {
		rs = append(rs, Require(tb, p))
	}
	return Join(rs...)
}

// Require loads a rollout, failing the test on error.
func Require(tb testing.TB, path string) *Rollout {
	tb.Helper()
	r, err := Load(path)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// Len returns the number of requests.
func (r *Rollout) Len() int { return len(r.Ends) }

// Request returns the body of request k as Codex sends it.
func (r *Rollout) Request(k int) []byte { return r.Body(r.Items[:r.Ends[k]]) }

// Final returns the body holding every item of the rollout.
func (r *Rollout) Final() []byte { return r.Body(r.Items) }

// Body returns a Responses request body in Codex's member order with items as its input.
func (r *Rollout) Body(items []json.RawMessage) []byte {
	msgs := make([][]byte, len(items))
	for i, it := range items {
		msgs[i] = it
	}
	b, err := r.s.AppendBody(nil, transcripts.Responses, r.model, msgs)
	if err != nil {
		panic(err) // a Codex session always has the Responses form
	}
	return b
}

// ChatBody returns a Chat Completions request body holding msgs (a prefix of Chat).
func (r *Rollout) ChatBody(msgs [][]byte) []byte {
	b, err := r.s.AppendBody(nil, transcripts.OpenAI, r.model, msgs)
	if err != nil {
		panic(err)
	}
	return b
}
