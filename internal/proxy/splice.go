package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/wire"
)

// blobSplices is the store blob holding a session's hidden exchanges.
const blobSplices = "proxy-splices"

// splice is one hidden exchange: the assistant message the client saw at client index At
// (identified by Digest) stands for the model-view messages Replace; Results are
// context_tree_query results the proxy owes the model, added to the message(s) that follow
// (Anthropic: prepended to the next user message; OpenAI: tool messages after Replace).
type splice struct {
	At      int               `json:"at"`
	Digest  string            `json:"digest"`
	Replace []json.RawMessage `json:"replace"`
	Results []json.RawMessage `json:"results,omitempty"`
}

// spliceSet is the stored form of a session's hidden exchanges.
type spliceSet struct {
	Splices []splice `json:"splices"`
}

func (s *Server) loadSplices(ctx context.Context, sid string) (*spliceSet, error) {
	c, cancel := s.storeCtx(ctx)
	defer cancel()
	data, err := s.opt.Store.GetBlob(c, sid, blobSplices)
	if errors.Is(err, store.ErrNotFound) {
		return &spliceSet{}, nil
	}
	if err != nil {
		s.met.StoreErrors.WithLabelValues("get_blob").Inc()
		return nil, err
	}
	var set spliceSet
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("proxy: stored hidden exchanges: %w", err)
	}
	return &set, nil
}

// saveSplice adds sp to the session's hidden exchanges (replacing one at the same index).
func (s *Server) saveSplice(ctx context.Context, t *turn, sp *splice) error {
	set, err := s.loadSplices(ctx, t.sid)
	if err != nil {
		return err
	}
	kept := set.Splices[:0]
	for _, o := range set.Splices {
		if o.At < sp.At {
			kept = append(kept, o)
		}
	}
	set.Splices = append(kept, *sp)
	data, err := json.Marshal(set)
	if err != nil {
		return err
	}
	if err := s.opt.Store.PutBlob(ctx, t.sid, blobSplices, data); err != nil {
		return err
	}
	return s.opt.Store.IncrStats(ctx, t.sid, map[string]int64{statSplices: 1})
}

// joinRaw returns prefix, the raw JSON values separated by commas, and suffix.
func joinRaw(prefix string, raws []json.RawMessage, suffix string) []byte {
	var b bytes.Buffer
	b.WriteString(prefix)
	for i, r := range raws {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(r)
	}
	b.WriteString(suffix)
	return b.Bytes()
}

// parseMessages turns raw message objects into wire messages of format f.
func parseMessages(f wire.Format, raws []json.RawMessage) ([]*wire.Message, error) {
	req, err := wire.Parse(f, joinRaw(`{"model":"x","messages":[`, raws, `]}`))
	if err != nil {
		return nil, err
	}
	return req.Messages, nil
}

// parseBlocks turns raw Anthropic content blocks into wire blocks.
func parseBlocks(raws []json.RawMessage) ([]*wire.Block, error) {
	msgs, err := parseMessages(wire.Anthropic, []json.RawMessage{joinRaw(`{"role":"user","content":[`, raws, `]}`)})
	if err != nil {
		return nil, err
	}
	return msgs[0].Blocks, nil
}

// digester hashes what the client sees of an assistant message: its non-empty text and its
// tool call ids, in order.
type digester struct{ parts [][2]string }

func (d *digester) text(s string) {
	if s != "" {
		d.parts = append(d.parts, [2]string{"T", s})
	}
}
func (d *digester) call(id string) { d.parts = append(d.parts, [2]string{"U", id}) }
func (d *digester) sum() string {
	h := sha256.New()
	for _, p := range d.parts {
		fmt.Fprintf(h, "%s%d:%s", p[0], len(p[1]), p[1])
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

func messageDigest(m *wire.Message) string {
	var d digester
	for _, b := range m.Blocks {
		switch b.Kind {
		case wire.KindText:
			d.text(b.Text)
		case wire.KindToolUse:
			d.call(b.ID)
		}
	}
	return d.sum()
}

// buildView returns the model's view of the client request: hidden exchanges re-inserted at
// the place they happened, and the context_tree_query tool added.
func (s *Server) buildView(t *turn) (*wire.Request, error) {
	req := t.client
	if t.splice != nil && len(t.splice.Splices) > 0 {
		sps := append([]splice(nil), t.splice.Splices...)
		sort.Slice(sps, func(i, j int) bool { return sps[i].At < sps[j].At })
		in := req.Messages
		out := make([]*wire.Message, 0, len(in)+4*len(sps))
		next := 0
		changed := false
		for i := 0; i < len(in); i++ {
			for next < len(sps) && sps[next].At < i {
				next++
			}
			m := in[i]
			if next >= len(sps) || sps[next].At != i {
				out = append(out, m)
				continue
			}
			sp := sps[next]
			if m.Role != wire.RoleAssistant || messageDigest(m) != sp.Digest {
				s.met.Diagnostics.WithLabelValues("hidden-exchange-mismatch").Inc()
				t.log.Warn("hidden exchange does not match the client's message; not re-inserted", "at", i)
				out = append(out, m)
				continue
			}
			if t.f == wire.Anthropic && len(sp.Results) > 0 && (i+1 == len(in) || in[i+1].Role != wire.RoleUser) {
				// The exchange ends in calls whose results go into the next user message, and
				// none follows (count_tokens up to here, a prefill, a merged assistant turn):
				// the client's own message, never a call without its result.
				out = append(out, m)
				continue
			}
			repl, err := parseMessages(t.f, sp.Replace)
			if err != nil {
				return nil, err
			}
			out = append(out, repl...)
			changed = true
			if len(sp.Results) == 0 {
				continue
			}
			if t.f == wire.OpenAI {
				res, err := parseMessages(t.f, sp.Results)
				if err != nil {
					return nil, err
				}
				out = append(out, res...)
				continue
			}
			blocks, err := parseBlocks(sp.Results)
			if err != nil {
				return nil, err
			}
			nb := append(append([]*wire.Block(nil), blocks...), in[i+1].Blocks...)
			out = append(out, in[i+1].WithBlocks(nb))
			i++
		}
		if changed {
			req = req.WithMessages(out)
		}
	}
	if !s.opt.DisableQueryTool {
		has := false
		for _, tl := range req.Tools {
			if tl.Name == pruner.QueryToolName {
				has = true
				break
			}
		}
		if !has {
			req = req.WithTools(append(append([]*wire.Tool(nil), req.Tools...), pruner.QueryTool(t.f)))
		}
	}
	return req, nil
}
