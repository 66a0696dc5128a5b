package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/wire"
)

// Where a session's hidden exchanges are stored. Each is a blob of its own, keyed by the
// client message index it stands at, written once and never read-modified-written; the
// session counters index them, so the snapshot every request loads already lists them.
const (
	// blobSplicePrefix + At is the blob of the hidden exchange at client index At.
	blobSplicePrefix = "proxy-splice/"
	// statSplicePrefix + At is the counter that says the exchange at At exists: the time it
	// was written (unix ns), which tells a process whether the copy it holds is current; 0
	// once a later exchange at an earlier index dropped it (the client went back).
	statSplicePrefix = "proxySplice/"
)

// splice is one hidden exchange: the client's assistant message at index At (its Digest)
// stands for the model-view messages Replace, followed by Results, the query results owed to
// the model in the format's form (a Responses assistant message is a JSON array of items).
type splice struct {
	At      int               `json:"at"`
	Digest  string            `json:"digest"`
	Replace []json.RawMessage `json:"replace"`
	Results []json.RawMessage `json:"results,omitempty"`
}

// spliceSet is a session's hidden exchanges, ordered by At.
type spliceSet struct {
	Splices []splice
}

// spliceKey names a session's hidden exchange at a client index.
type spliceKey struct {
	sid string
	at  int
}

// cachedSplice is a hidden exchange as read from the store, with the stamp it was written
// with.
type cachedSplice struct {
	stamp int64
	sp    *splice
}

// spliceIndex returns the client indexes the session's counters know: index → stamp, 0 for
// an exchange that was dropped.
func spliceIndex(stats map[string]int64) map[int]int64 {
	var idx map[int]int64
	for k, v := range stats {
		if !strings.HasPrefix(k, statSplicePrefix) {
			continue
		}
		at, err := strconv.Atoi(k[len(statSplicePrefix):])
		if err != nil {
			continue
		}
		if idx == nil {
			idx = map[int]int64{}
		}
		idx[at] = v
	}
	return idx
}

// hasSplices reports whether a session snapshot lists hidden exchanges.
func hasSplices(stats map[string]int64) bool {
	for _, stamp := range spliceIndex(stats) {
		if stamp != 0 {
			return true
		}
	}
	return false
}

// loadSplices returns the hidden exchanges the request's snapshot lists, each read from the
// store once per process (kept in memory while its stamp holds).
func (s *Server) loadSplices(ctx context.Context, t *turn) (*spliceSet, error) {
	byAt := map[int]splice{}
	for at, stamp := range spliceIndex(t.snap.Stats) {
		if stamp == 0 {
			continue
		}
		key := spliceKey{t.sid, at}
		if c, ok := s.spliceCache.Load(key); ok && c.stamp == stamp {
			byAt[at] = *c.sp
			continue
		}
		data, err := s.getBlob(ctx, t.sid, blobSplicePrefix+strconv.Itoa(at))
		if errors.Is(err, store.ErrNotFound) {
			continue // listed by a writer whose blob write failed: nothing to re-insert
		}
		if err != nil {
			return nil, err
		}
		var sp splice
		if err := json.Unmarshal(data, &sp); err != nil {
			return nil, fmt.Errorf("proxy: stored hidden exchange at %d: %w", at, err)
		}
		s.spliceCache.Swap(key, cachedSplice{stamp, &sp})
		byAt[at] = sp
	}
	set := &spliceSet{Splices: make([]splice, 0, len(byAt))}
	for _, sp := range byAt {
		set.Splices = append(set.Splices, sp)
	}
	sort.Slice(set.Splices, func(i, j int) bool { return set.Splices[i].At < set.Splices[j].At })
	return set, nil
}

// getBlob reads one blob of the session with the request path's store timeout.
func (s *Server) getBlob(ctx context.Context, sid, key string) ([]byte, error) {
	c, cancel := s.storeCtx(ctx)
	defer cancel()
	data, err := s.opt.Store.GetBlob(c, sid, key)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.met.StoreErrors.WithLabelValues("get_blob").Inc()
	}
	return data, err
}

// saveSplice stores sp as the session's hidden exchange at sp.At: its own blob, then one
// UpdateStats (Set) that lists it and drops the exchanges at later indexes the request's
// snapshot listed. Nothing is read and rewritten.
func (s *Server) saveSplice(ctx context.Context, t *turn, sp *splice) error {
	stamp := time.Now().UnixNano()
	data, err := json.Marshal(sp)
	if err != nil {
		return err
	}
	if err := s.opt.Store.PutBlob(ctx, t.sid, blobSplicePrefix+strconv.Itoa(sp.At), data); err != nil {
		return err
	}
	set := map[string]int64{statSplicePrefix + strconv.Itoa(sp.At): stamp}
	s.spliceCache.Swap(spliceKey{t.sid, sp.At}, cachedSplice{stamp, sp})
	for at, st := range spliceIndex(t.snap.Stats) {
		if at > sp.At && st != 0 {
			set[statSplicePrefix+strconv.Itoa(at)] = 0
		}
	}
	return s.opt.Store.UpdateStats(ctx, t.sid, store.StatsUpdate{Set: set})
}

// persistSplice stores a hidden exchange before the response completes, so the client's
// next request (on any replica) finds it.
func (s *Server) persistSplice(ctx context.Context, t *turn, sp *splice) {
	if s.opt.Store == nil || !t.stored() {
		return
	}
	c, cancel := s.storeCtx(context.WithoutCancel(ctx))
	defer cancel()
	start := time.Now()
	err := s.saveSplice(c, t, sp)
	s.met.StoreSeconds.WithLabelValues("save_splice").Observe(time.Since(start).Seconds())
	if err != nil {
		s.met.StoreErrors.WithLabelValues("save_splice").Inc()
		t.log.Warn("storing hidden exchange failed", "err", err)
	}
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

// message adds what the client sees of message m: its text blocks and tool calls.
func (d *digester) message(m *wire.Message) {
	for _, b := range m.Blocks {
		switch b.Kind {
		case wire.KindText:
			d.text(b.Text())
		case wire.KindToolUse:
			d.call(b.ID)
		}
	}
}

func messageDigest(m *wire.Message) string {
	var d digester
	d.message(m)
	return d.sum()
}

// reinsert returns the client request with the hidden exchanges re-inserted where they
// happened, each only while the client's message there matches its digest.
func (s *Server) reinsert(t *turn) (*wire.Request, error) {
	if t.splice == nil || len(t.splice.Splices) == 0 {
		return t.client, nil
	}
	req := t.client
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
		if last := len(repl) - 1; last >= 0 && repl[last].Role == wire.RoleAssistant && messageDigest(repl[last]) == sp.Digest {
			repl[last] = m // the continuation the client saw goes up as the client sends it back
		}
		out = append(out, repl...)
		changed = true
		if len(sp.Results) == 0 {
			continue
		}
		if t.f != wire.Anthropic { // OpenAI tool messages, Responses output items
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
	return req, nil
}
