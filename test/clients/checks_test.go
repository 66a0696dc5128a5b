package clients

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/upstreamfake"
	"github.com/condense-dev/condense/internal/wire"
)

var markerRe2 = regexp.MustCompile(`MARKER-[A-Z]+-MIDDLE`)

// sent is one model request the provider received, with the agent request it belongs to.
type sent struct {
	rec          upstreamfake.Recorded
	client       *exchange // the agent's request (continuations share it)
	req          *wire.Request
	prompt, done int // position in the plan
}

// collect pairs every model request the provider received with the agent's request.
func collect(t *testing.T, r *rig) []sent {
	t.Helper()
	byseq := map[int]*exchange{}
	for _, ex := range r.tap.exchanges() {
		byseq[ex.Seq] = ex
	}
	var out []sent
	for _, rec := range r.up.Requests() {
		f, ok := formatOfPath(rec.Path)
		if !ok || rec.Method != http.MethodPost {
			continue
		}
		seq, _ := strconv.Atoi(rec.Header.Get(HeaderSeq))
		s := sent{rec: rec, client: byseq[seq]}
		if s.client == nil {
			t.Errorf("provider request %d carries no agent request number (%s: %q)", rec.Seq, HeaderSeq, rec.Header.Get(HeaderSeq))
			continue
		}
		req, err := wire.Parse(f, rec.Body)
		if err != nil {
			t.Errorf("provider request %d does not parse: %v", rec.Seq, err)
			continue
		}
		s.req = req
		s.prompt, s.done = position(req)
		out = append(out, s)
	}
	return out
}

// conversation keeps the requests of the scripted conversation (those with tools and a prompt).
func conversation(all []sent) []sent {
	var out []sent
	for _, s := range all {
		if s.prompt > 0 && len(s.req.Tools) > 0 {
			out = append(out, s)
		}
	}
	return out
}

// checkSession runs every check of the client suite over what the rig recorded.
func checkSession(t *testing.T, r *rig, m *model) {
	t.Helper()
	m.report(t)
	all := collect(t, r)
	conv := conversation(all)
	rounds := 0
	for _, p := range plan {
		rounds += len(p)
	}
	if len(conv) < rounds+len(plan) {
		t.Fatalf("the provider saw %d conversation requests, want at least %d (%d tool rounds and %d final answers)", len(conv), rounds+len(plan), rounds, len(plan))
	}
	checkValid(t, all)
	checkPruned(t, conv)
	checkPrefix(t, conv)
	checkPassThrough(t, all)
	checkRecovery(t, r, m, conv)
	checkStreaming(t, m)
	checkShrunk(t, r, 1)
	checkOneSession(t, r, all)
}

// checkValid: every forwarded request is valid for its provider.
func checkValid(t *testing.T, all []sent) {
	t.Helper()
	invalid := 0
	for _, s := range all {
		if err := wire.Validate(s.req); err != nil {
			invalid++
			t.Errorf("provider request %d is invalid: %v", s.rec.Seq, err)
		}
	}
	t.Logf("%d requests forwarded, %d invalid", len(all), invalid)
}

// checkPruned: the first request of every prompt after the first is pruned (the flush at the
// previous final answer stubbed its results): it shows a stub ref, is smaller than what the
// agent sent, and no longer holds the middle of the files read before — except an output the
// model recovered with context_tree_query, which stays whole for the recovery grace turns.
func checkPruned(t *testing.T, conv []sent) {
	t.Helper()
	recovered := map[string]bool{}
	for _, s := range conv {
		for _, msg := range s.req.Messages {
			for _, b := range msg.Blocks {
				if b.Kind == wire.KindToolResult && b.Name == pruner.QueryToolName {
					for _, m := range markerRe2.FindAllString(b.ResultText(), -1) {
						recovered[m] = true
					}
				}
			}
		}
	}
	for n := 2; n <= len(plan); n++ {
		i := slices.IndexFunc(conv, func(s sent) bool { return s.prompt == n && s.done == 0 })
		if i < 0 {
			t.Errorf("P%d: no first request", n)
			continue
		}
		s := conv[i]
		up, cl := s.rec.Body, s.client.Body
		if !bytes.Contains(up, []byte("ref `t")) {
			t.Errorf("P%d: the first request shows no stub", n)
		}
		t.Logf("P%d first request: the agent sent %d bytes, the provider got %d (%.0f %%)", n, len(cl), len(up), 100*float64(len(up))/float64(len(cl)))
		if len(up) >= len(cl) {
			t.Errorf("P%d: the provider got %d bytes of the agent's %d: not pruned", n, len(up), len(cl))
		}
		for _, p := range plan[:n-1] {
			for _, st := range p {
				if st.read == "" {
					continue
				}
				mk := []byte(marker(strings.TrimSuffix(st.read, ".go")))
				if recovered[string(mk)] {
					continue
				}
				if bytes.Contains(cl, mk) && bytes.Contains(up, mk) {
					t.Errorf("P%d: the output of reading %s is still whole in the forwarded request", n, st.read)
				}
			}
		}
	}
}

// stripCache removes cache_control members and spells string content as one text block:
// agents move their cache breakpoints every request, and spell content either way for that.
func stripCache(raw []byte) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	var walk func(any)
	walk = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			delete(x, "cache_control")
			if s, ok := x["content"].(string); ok && x["role"] != nil {
				x["content"] = []any{map[string]any{"type": "text", "text": s}}
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	b, _ := json.Marshal(v)
	return string(b)
}

// checkPrefix: within a prompt no flush runs, so each request repeats the previous one's
// system, tools and messages exactly (cache markers aside): the provider's prompt cache holds.
func checkPrefix(t *testing.T, conv []sent) {
	t.Helper()
	for i := 1; i < len(conv); i++ {
		a, b := conv[i-1], conv[i]
		if a.prompt != b.prompt {
			continue
		}
		if len(b.req.Messages) < len(a.req.Messages) {
			t.Errorf("provider requests %d→%d: messages shrank from %d to %d within P%d", a.rec.Seq, b.rec.Seq, len(a.req.Messages), len(b.req.Messages), a.prompt)
			continue
		}
		for j, am := range a.req.Messages {
			if stripCache(am.Raw()) != stripCache(b.req.Messages[j].Raw()) {
				t.Errorf("provider requests %d→%d: message %d changed within P%d:\n%.300s\n%.300s", a.rec.Seq, b.rec.Seq, j, a.prompt, am.Raw(), b.req.Messages[j].Raw())
				break
			}
		}
		for _, key := range []string{"system", "tools", "instructions"} {
			av, _ := a.req.Field(key)
			bv, _ := b.req.Field(key)
			if stripCache(av) != stripCache(bv) {
				t.Errorf("provider requests %d→%d: %s changed within P%d", a.rec.Seq, b.rec.Seq, key, a.prompt)
			}
		}
	}
}

// checkPassThrough: the agent's headers reach the provider as sent, and so does every
// top-level member the proxy does not prune, byte for byte; its tools are all there.
func checkPassThrough(t *testing.T, all []sent) {
	t.Helper()
	pruned := map[string]bool{"messages": true, "input": true, "tools": true}
	for _, s := range all {
		for k, vs := range s.client.Header {
			if k == "Content-Length" || k == "Accept-Encoding" || k == "Connection" || strings.HasPrefix(k, "X-Condense-") {
				continue
			}
			if got := s.rec.Header.Values(k); !slices.Equal(got, vs) {
				t.Errorf("provider request %d: header %s = %q, the agent sent %q", s.rec.Seq, k, got, vs)
			}
		}
		gjson.ParseBytes(s.client.Body).ForEach(func(key, v gjson.Result) bool {
			if pruned[key.String()] {
				return true
			}
			if got, ok := s.req.Field(key.String()); !ok || string(got) != v.Raw {
				t.Errorf("provider request %d: member %s is not the agent's bytes", s.rec.Seq, key.String())
			}
			return true
		})
		ups := map[string]bool{}
		for _, tl := range s.req.Tools {
			ups[string(tl.Raw())] = true
		}
		gjson.GetBytes(s.client.Body, "tools").ForEach(func(_, v gjson.Result) bool {
			if !ups[v.Raw] {
				t.Errorf("provider request %d: the agent's tool %s is missing or changed", s.rec.Seq, gjson.Get(v.Raw, "name").String())
			}
			return true
		})
	}
}

// checkRecovery: the model's context_tree_query call was answered by the proxy with the
// original output, byte for byte, and the agent never saw the call.
func checkRecovery(t *testing.T, r *rig, m *model, conv []sent) {
	t.Helper()
	m.mu.Lock()
	queried := slices.Clone(m.queried)
	m.mu.Unlock()
	if len(queried) == 0 {
		t.Errorf("the model never called %s", pruner.QueryToolName)
		return
	}
	// Every tool output the agent ever sent, by text.
	var originals []string
	for _, ex := range r.tap.exchanges() {
		f, ok := formatOfPath(ex.Path)
		if !ok {
			continue
		}
		if req, err := wire.Parse(f, ex.Body); err == nil {
			for _, msg := range req.Messages {
				for _, b := range msg.Blocks {
					if b.Kind == wire.KindToolResult && len(b.ResultText()) > 200 && !strings.Contains(b.ResultText(), "ref `t") {
						originals = append(originals, b.ResultText())
					}
				}
			}
		}
	}
	answered := false
	for _, s := range conv {
		for _, msg := range s.req.Messages {
			for _, b := range msg.Blocks {
				if b.Kind != wire.KindToolResult || b.Name != pruner.QueryToolName {
					continue
				}
				for _, o := range originals {
					if strings.Contains(b.ResultText(), o) {
						answered = true
					}
				}
			}
		}
	}
	if !answered {
		t.Errorf("no %s result forwarded to the provider holds an original tool output byte for byte", pruner.QueryToolName)
	}
	for _, ex := range r.tap.exchanges() {
		if bytes.Contains(ex.Response, []byte(pruner.QueryToolName)) {
			t.Errorf("agent request %d: the response the agent got mentions %s", ex.Seq, pruner.QueryToolName)
		}
		if f, ok := formatOfPath(ex.Path); ok {
			if req, err := wire.Parse(f, ex.Body); err == nil {
				for _, msg := range req.Messages {
					for _, b := range msg.Blocks {
						if b.Kind == wire.KindToolUse && b.Name == pruner.QueryToolName {
							t.Errorf("agent request %d holds a %s call", ex.Seq, pruner.QueryToolName)
						}
					}
				}
			}
		}
	}
}

// checkStreaming: the held final answer reached the agent's side before the provider sent
// the rest of it.
func checkStreaming(t *testing.T, m *model) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.released {
		t.Errorf("P%d's streamed answer did not reach the agent event by event (its first event arrived only with the rest)", m.holdAt)
	}
}

// checkOneSession: every conversation request of the agent session — across its separate
// runs — was one condense session.
func checkOneSession(t *testing.T, r *rig, all []sent) {
	t.Helper()
	infos := r.sessions()
	var names []string
	for _, in := range infos {
		if in.Stats["requests"] > 0 {
			names = append(names, in.Session)
		}
	}
	if len(names) != 1 {
		t.Errorf("the store holds %d sessions with requests, want 1: %q", len(names), names)
	}
}

// checkShrunk: the last conversation request the provider received is at most max of what the
// agent sent for it (1 only logs the ratio).
func checkShrunk(t *testing.T, r *rig, max float64) {
	t.Helper()
	conv := conversation(collect(t, r))
	if len(conv) == 0 {
		return
	}
	last := conv[len(conv)-1]
	ratio := float64(len(last.rec.Body)) / float64(len(last.client.Body))
	t.Logf("last request: the agent sent %d bytes, the provider got %d (%.0f %%)", len(last.client.Body), len(last.rec.Body), 100*ratio)
	if ratio > max {
		t.Errorf("the last request is %.0f %% of what the agent sent, want at most %.0f %%", 100*ratio, 100*max)
	}
}

// checkReasoning: every reasoning item the agent sent back (encrypted, Responses API) reaches
// the provider byte for byte, still followed by the item it preceded, unless the proxy left
// out the whole exchange; at least one came back in every request after a tool round.
func checkReasoning(t *testing.T, all []sent) {
	t.Helper()
	echoed := 0
	for _, s := range all {
		up := map[string]int{} // raw reasoning item → index in the provider's input
		upItems := gjson.GetBytes(s.rec.Body, "input").Array()
		for i, it := range upItems {
			if it.Get("type").Str == "reasoning" {
				up[it.Raw] = i
			}
		}
		items := gjson.GetBytes(s.client.Body, "input").Array()
		for i, it := range items {
			if it.Get("type").Str != "reasoning" {
				continue
			}
			echoed++
			if it.Get("encrypted_content").Str == "" {
				t.Errorf("provider request %d: the agent's reasoning item %d has no encrypted_content", s.rec.Seq, i)
			}
			j, ok := up[it.Raw]
			if !ok {
				if gjson.GetBytes(s.rec.Body, "input.#(encrypted_content=="+strconv.Quote(it.Get("encrypted_content").Str)+")").Exists() {
					t.Errorf("provider request %d: the reasoning item %d was changed:\n agent: %s\n provider: %s", s.rec.Seq, i, it.Raw,
						gjson.GetBytes(s.rec.Body, "input.#(encrypted_content=="+strconv.Quote(it.Get("encrypted_content").Str)+")").Raw)
				}
				continue // left out with its exchange (a compressed chain)
			}
			if i+1 < len(items) {
				next, want := "", items[i+1].Get("call_id").Str+items[i+1].Get("type").Str
				if j+1 < len(upItems) {
					next = upItems[j+1].Get("call_id").Str + upItems[j+1].Get("type").Str
				}
				if next != want {
					t.Errorf("provider request %d: the reasoning item %d is no longer followed by %s (got %q)", s.rec.Seq, i, want, next)
				}
			}
		}
	}
	if echoed == 0 {
		t.Error("the agent sent no reasoning item back: the check proves nothing")
	}
	t.Logf("%d reasoning items sent back by the agent", echoed)
}
