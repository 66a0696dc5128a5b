package replay

import (
	"context"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"

	"github.com/condense-dev/condense/internal/cost"
	"github.com/condense-dev/condense/internal/fidelity"
	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/wire"
)

// sessionUses is the fidelity measure's view of one transcript (docs/fidelity.md): every
// request's uses, the memo the strategies' indexes read, each use's tool call size for the
// recovery charges, and the text observations counted as tool results.
type sessionUses struct {
	uses  [][]fidelity.Use
	memo  *fidelity.Memo
	calls map[string]sourceCall
	obs   pruner.ObservationPolicy
}

// sourceCall is a tool call a use came from, in tokens: its name and arguments (what a re-run
// sends again) and its result (what a recovery or a re-run brings back).
type sourceCall struct {
	name         string
	args, result int
}

// measureUses reads t's requests once, in order, and returns the uses of each one's response,
// read from the next request: none for the last, one before a compaction, one that does not
// parse and the one before it. A text-protocol transcript's observations count as tool results.
func measureUses(ctx context.Context, t Transcript, est cost.Estimator) (*sessionUses, error) {
	su := &sessionUses{uses: make([][]fidelity.Use, t.Len()), calls: map[string]sourceCall{}, obs: ObservationPolicy(t)}
	memo := fidelity.NewMemo()
	idx := fidelity.NewIndex(memo)
	idx.Observe(su.obs)
	wf := t.WireFormat()
	used := map[fidelity.Token]struct{}{}
	var prev *wire.Request
	for k := 0; k < t.Len(); k++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		body, err := t.AppendRequest(nil, k)
		if err != nil {
			return nil, err
		}
		r, err := wire.Parse(wf, body)
		if err != nil {
			prev = nil
			continue
		}
		if prev != nil {
			uses := idx.Uses(fidelity.Response(prev, r))
			if len(uses) > 0 {
				su.uses[k-1] = uses
				su.noteCalls(prev, idx, uses, est)
				for _, u := range uses {
					used[u.Token] = struct{}{}
				}
			}
		}
		idx.Update(r)
		prev = r
	}
	su.memo = memo.Restrict(used)
	return su, nil
}

// noteCalls records the size of the tool calls of r that uses came from: the calls and
// results of its messages, and the synthetic ones of its text observations (idx shows r).
func (su *sessionUses) noteCalls(r *wire.Request, idx *fidelity.Index, uses []fidelity.Use, est cost.Estimator) {
	want := map[string]bool{}
	for _, u := range uses {
		for _, id := range u.Sources {
			want[id] = true
		}
	}
	block := est.Overhead("block")
	note := func(b *wire.Block) {
		if !want[b.ID] {
			return
		}
		c := su.calls[b.ID]
		switch b.Kind {
		case wire.KindToolUse:
			c.name = b.Name
			c.args = block + est.Text(b.Name) + est.Text(string(b.Input))
		case wire.KindToolResult:
			c.result = block + est.Text(b.ResultText())
		}
		su.calls[b.ID] = c
	}
	for _, m := range r.Messages {
		for _, b := range m.Blocks {
			note(b)
		}
	}
	for id := range want {
		if i := idx.ObservationMessage(id); i > 0 {
			if o, ok := pruner.ObservationOf(r.Messages[i-1], r.Messages[i], su.obs); ok {
				note(o.Call)
				note(o.Result)
			}
		}
	}
}

// recoveryRound is the extra request a request costs when some of its uses are not kept: the
// agent calls context_tree_query once for the recoverable originals and re-runs the tool call
// of each lost use, then sends the request again with those calls and their results.
type recoveryRound struct {
	// Prompt is the rendered request's prompt followed by the assistant's calls and the user
	// message with their results.
	Prompt cost.Prompt
	// Output is the tokens of the calls the agent writes.
	Output int
	// Queries and Reruns count the originals recovered and the tool calls re-run.
	Queries, Reruns int
}

// recovery returns the recovery round of request k rendered as p, or false when every use
// was kept. Each use not kept names one source call (fidelity.Verdict.Source); a call counts
// once per round.
func (su *sessionUses) recovery(k int, p *cost.Prompt, vs []fidelity.Verdict, est cost.Estimator) (recoveryRound, bool) {
	var queried, rerun []sourceCall
	seen := map[string]bool{}
	for _, v := range vs {
		if v.Outcome == fidelity.Kept || seen[v.Source] {
			continue
		}
		seen[v.Source] = true
		c := su.calls[v.Source]
		if v.Outcome == fidelity.Recoverable {
			queried = append(queried, c)
		} else {
			rerun = append(rerun, c)
		}
	}
	if len(seen) == 0 {
		return recoveryRound{}, false
	}
	block, msg := est.Overhead("block"), est.Overhead("message")
	calls, results := 0, 0
	if len(queried) > 0 {
		refs := make([]string, len(queried))
		for i := range refs {
			refs[i] = strconv.Quote("t" + strconv.Itoa(i+1))
		}
		calls += block + est.Text("context_tree_query") + est.Text(`{"ids":[`+strings.Join(refs, ",")+`]}`)
		results += block
		for i, c := range queried {
			results += c.result + est.Text("## toolRef: t"+strconv.Itoa(i+1)+"\n")
		}
	}
	for _, c := range rerun {
		calls += c.args
		results += c.result
	}
	segs := make([]cost.Segment, len(p.Segments), len(p.Segments)+2)
	copy(segs, p.Segments)
	last := len(segs) > 0 && segs[len(segs)-1].Breakpoint
	key := xxhash.Sum64String("recovery-round:" + strconv.Itoa(k))
	segs = append(segs, cost.Segment{Key: key, Tokens: msg + calls}, cost.Segment{Key: key + 1, Tokens: msg + results, Breakpoint: last})
	return recoveryRound{
		Prompt:  cost.Prompt{Model: p.Model, Time: p.Time, Segments: segs},
		Output:  calls,
		Queries: len(queried),
		Reruns:  len(rerun),
	}, true
}

// measure judges request k's uses against what the strategy sent (billed, parsed if read), counts
// them and returns the USD charge of the recovery round under the strategy's cache (Quote: later
// requests do not build on it). seen must see every request of the session in order.
func (rep *StrategyReport) measure(k int, billed []byte, parsed *wire.Request, p *cost.Prompt, recoverable func(string) bool,
	seen *fidelity.Index, su *sessionUses, cache *cost.Cache, f wire.Format, est cost.Estimator) float64 {
	if parsed == nil {
		var err error
		if parsed, err = wire.Parse(f, billed); err != nil {
			return 0
		}
	}
	seen.Update(parsed)
	if len(su.uses[k]) == 0 {
		return 0
	}
	vs := seen.Classify(su.uses[k], recoverable)
	rep.Fidelity.Add(vs)
	round, ok := su.recovery(k, p, vs, est)
	if !ok {
		return 0
	}
	bill := cache.Quote(&round.Prompt)
	u := bill.Usage
	u.Output = int64(round.Output)
	usd := u.Cost(bill.Price)
	rep.RecoveryRounds++
	rep.RecoveryQueries += round.Queries
	rep.Reruns += round.Reruns
	rep.Recovery = rep.Recovery.Add(u)
	rep.RecoveryCost += usd
	return usd
}
