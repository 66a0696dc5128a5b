package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/wire"
)

// answer answers context_tree_query calls from the session state: cont carries the results
// in a continuation request, results holds them in the stored splice form (tool_result blocks,
// tool messages, function_call_output items).
func (s *Server) answer(ctx context.Context, t *turn, calls []call) (cont, results []json.RawMessage) {
	for _, c := range calls {
		text := s.queryText(ctx, t, c.input)
		var r []byte
		switch t.f {
		case wire.OpenAI:
			r, _ = json.Marshal(map[string]string{"role": "tool", "tool_call_id": c.id, "content": text})
		case wire.Responses:
			r, _ = json.Marshal(struct {
				Type   string `json:"type"`
				CallID string `json:"call_id"`
				Output string `json:"output"`
			}{"function_call_output", c.id, text})
		default:
			r, _ = json.Marshal(map[string]string{"type": "tool_result", "tool_use_id": c.id, "content": text})
		}
		results = append(results, r)
	}
	if t.f != wire.Anthropic {
		return results, results
	}
	return []json.RawMessage{joinRaw(`{"role":"user","content":[`, results, `]}`)}, results
}

// queryText answers one context_tree_query input.
func (s *Server) queryText(ctx context.Context, t *turn, input []byte) string {
	ids, err := pruner.ParseQueryInput(input)
	if err != nil {
		return "context_tree_query: " + err.Error()
	}
	if t.state == nil {
		return "context_tree_query: the pruning state of this session is unavailable right now; retry later."
	}
	return pruner.QueryAll(t.state, ids, s.blobLookup(ctx, t))
}

// blobLookup reads the session's blobs for a query answer, each read under the store timeout.
func (s *Server) blobLookup(ctx context.Context, t *turn) pruner.BlobLookup {
	return func(key string) ([]byte, bool) {
		c, cancel := s.storeCtx(ctx)
		defer cancel()
		b, err := s.opt.Store.GetBlob(c, t.sid, key)
		return b, err == nil
	}
}

// recoversText reports whether the model's replies to a request may be text recovery
// requests the proxy answers: a text turn of a stored session, one answer asked for, in-proxy
// answering on, and a state that indexes observations (only their stubs ask for one).
func (s *Server) recoversText(t *turn) bool {
	return t.text && t.stored() && s.opt.Store != nil && s.opt.MaxRecoveryRounds > 0 && !manyChoices(t) &&
		t.state != nil && t.state.HasObservations()
}

// holdsText reports whether a streamed round's content is held until its end: it may be a
// text recovery request the proxy answers (the client never sees one).
func (s *Server) holdsText(t *turn, round int) bool {
	return t.recoverText && round <= s.opt.MaxRecoveryRounds
}

// textRecovery returns what a text recovery request adds to the continuation — the model's
// message asst and a user message holding the answer (pruner.AnswerTextRecovery) — or nil
// when the round's reply is none, was cut off, or may not be answered (holdsText).
func (s *Server) textRecovery(ctx context.Context, t *turn, round int, asst json.RawMessage, stop string) []json.RawMessage {
	if !s.holdsText(t, round) || !endTurn(t.f, stop) {
		return nil
	}
	reply := replyText(t.f, asst)
	ans, ok := pruner.AnswerTextRecovery(t.state, reply, s.blobLookup(ctx, t))
	if !ok {
		return nil
	}
	return []json.RawMessage{asst, userMessage(t.f, ans)}
}

// replyText is the text of an assistant message the proxy built (Responses: its items), its
// text blocks joined by newlines.
func replyText(f wire.Format, asst json.RawMessage) string {
	msgs, err := parseMessages(f, []json.RawMessage{asst})
	if err != nil {
		return ""
	}
	var parts []string
	for _, m := range msgs {
		for _, b := range m.Blocks {
			if m.Role == wire.RoleAssistant && b.Kind == wire.KindText {
				parts = append(parts, b.Text())
			}
		}
	}
	return strings.Join(parts, "\n")
}

// userMessage is a user message of one text in format f (Responses: a message item).
func userMessage(f wire.Format, text string) json.RawMessage {
	if f == wire.Responses {
		return joinRaw(`{"type":"message","role":"user","content":[{"type":"input_text","text":`, []json.RawMessage{jsonStr(text)}, `}]}`)
	}
	return joinRaw(`{"role":"user","content":`, []json.RawMessage{jsonStr(text)}, `}`)
}

// continuation is a recovery round's continuation upstream: the response (200, of the wanted
// kind), the request that was sent and the messages it appended; text: the round was a text
// recovery request, of which the client sees nothing.
type continuation struct {
	resp     *http.Response
	next     *wire.Request
	appended []json.RawMessage
	text     bool
}

// contFailure is a recovery continuation the provider did not answer: its error response
// (resp: status, headers and unread body, as it came), or err when none came (unreachable,
// no headers in time, a response of another kind than the client's).
type contFailure struct {
	resp *http.Response
	err  error
}

// continueWith sends a continuation of the forwarded request with msgs appended. It returns
// nil, nil when it cannot be built (the caller defers the queries), and a failure when the
// provider did not answer it (the client then gets that error).
func (s *Server) continueWith(ctx context.Context, t *turn, msgs []json.RawMessage, wantStream bool) (*continuation, *contFailure) {
	extra, err := parseMessages(t.f, msgs)
	if err != nil {
		t.log.Warn("building the recovery continuation failed", "err", err)
		return nil, nil
	}
	next := t.fwd.WithMessages(append(append([]*wire.Message(nil), t.fwd.Messages...), extra...))
	resp, err := s.send(ctx, t, next.Segments())
	if err != nil {
		return nil, s.continuationFailed(t, &contFailure{err: err})
	}
	if resp.StatusCode != http.StatusOK {
		return nil, s.continuationFailed(t, &contFailure{resp: resp})
	}
	if isEventStream(resp.Header) != wantStream {
		resp.Body.Close()
		return nil, s.continuationFailed(t, &contFailure{err: fmt.Errorf("the provider answered the recovery continuation with %q", resp.Header.Get("Content-Type"))})
	}
	s.met.Recoveries.WithLabelValues("answered").Inc()
	return &continuation{resp: resp, next: next, appended: msgs}, nil
}

// continuationFailed counts a failed recovery continuation, keeps why for the request's log
// line and returns it.
func (s *Server) continuationFailed(t *turn, f *contFailure) *contFailure {
	s.met.Recoveries.WithLabelValues("failed").Inc()
	if f.resp != nil {
		t.err = fmt.Errorf("the provider refused the recovery continuation with %d", f.resp.StatusCode)
	} else {
		s.countLimit(t.ep, f.err)
		t.err = fmt.Errorf("the recovery continuation failed: %w", f.err)
	}
	return f
}

// continueRecovery answers a round's query calls (or its text recovery request) and continues
// upstream with the round's message and the answers appended; stop is the round's ("": none).
// It returns nil, nil when the round may not continue (canContinue), a failure as continueWith.
func (s *Server) continueRecovery(ctx context.Context, t *turn, round int, asst json.RawMessage, query, client []call, stop string, wantStream bool) (*continuation, *contFailure) {
	if len(query) == 0 && len(client) == 0 {
		msgs := s.textRecovery(ctx, t, round, asst, stop)
		if msgs == nil {
			return nil, nil
		}
		c, fail := s.continueWith(ctx, t, msgs, wantStream)
		if c != nil {
			c.text = true
		}
		return c, fail
	}
	if !s.canContinue(round, query, client, toolStop(t.f, stop)) {
		return nil, nil
	}
	cont, _ := s.answer(ctx, t, query)
	return s.continueWith(ctx, t, append([]json.RawMessage{asst}, cont...), wantStream)
}

// canContinue reports whether a round's queries may be answered in the proxy.
func (s *Server) canContinue(rounds int, query, client []call, toolStop bool) bool {
	return len(query) > 0 && len(client) == 0 && toolStop && rounds <= s.opt.MaxRecoveryRounds
}

// continueStream continues a stream after a round of query calls or a text recovery request
// (text: the client sees nothing of the round), returning the continuation (its messages
// appended to replace) or nil; when the provider does not answer it aborts and does not return.
func (s *Server) continueStream(ctx context.Context, e emitter, t *turn, round int, asst json.RawMessage, query, client []call, stop string, replace *[]json.RawMessage) (next *http.Response, text bool) {
	c, fail := s.continueRecovery(ctx, t, round, asst, query, client, stop, true)
	if fail != nil {
		s.abortStreamFailure(ctx, e, t, fail)
	}
	if c == nil {
		return nil, false
	}
	*replace = append(*replace, c.appended...)
	t.fwd = c.next
	return c.resp, c.text
}

// writeJSONFailure answers a non-streamed request with a failed continuation: the provider's
// error as it came, or a 502.
func (s *Server) writeJSONFailure(ctx context.Context, w http.ResponseWriter, t *turn, f *contFailure) {
	if f.resp == nil {
		s.upstreamFailed(w, t, f.err)
		return
	}
	defer f.resp.Body.Close()
	if err := relayRaw(w, f.resp); err != nil {
		s.abortBroken(ctx, w, t, nil, err)
	}
}

// abortStreamFailure ends a stream whose continuation failed: it sends the error event
// (streamErrorEvent) and aborts the client's connection, so the client sees an error, not a
// cleanly ended answer. It does not return.
func (s *Server) abortStreamFailure(ctx context.Context, e emitter, t *turn, f *contFailure) {
	status, msg := http.StatusBadGateway, "condense proxy: the recovery continuation failed: "
	var body []byte
	if f.resp != nil {
		body, _ = readAllMax(f.resp.Body, 1<<20)
		f.resp.Body.Close()
		status, msg = f.resp.StatusCode, "condense proxy: the provider refused the recovery continuation: "+http.StatusText(f.resp.StatusCode)
	} else {
		msg += f.err.Error()
	}
	abortResponse(ctx, e.w, streamErrorEvent(e, t.f, status, "recovery_failed", msg, body))
}

// settle decides the last round's query calls: deferred after a tool stop (asst stored), else
// dropped (visible stored). It returns them, the stop the client sees and the message to store.
func (s *Server) settle(f wire.Format, stop string, query, client []call, asst, visible json.RawMessage) (deferred []call, shown string, stored json.RawMessage) {
	deferred, stored = query, asst
	if len(query) > 0 && !toolStop(f, stop) {
		s.met.Recoveries.WithLabelValues("dropped").Inc()
		deferred, stored = nil, visible
	}
	shown = stop
	if len(deferred) > 0 && len(client) == 0 {
		shown = deferredStop(f)
	}
	return deferred, shown, nonEmpty(f, stored)
}

// ending is how a response's last round ends, as endRecovery takes it.
type ending struct {
	rounds           int    // rounds of the response
	deferred, client []call // the last round's deferred query calls and the client's own calls
	stop             string // the stop the client sees
	// replace are the model-view messages of all rounds (the hidden exchange's).
	replace []json.RawMessage
	dg      digester        // what the client sees of the answer
	visible json.RawMessage // the assistant message the client holds
}

// endRecovery ends every relay of a response that may hide query calls: it answers the
// deferred calls, stores the hidden exchange (after several rounds or deferred calls), sets
// out's final and viewTail and starts the final-answer flush (onFinal).
func (s *Server) endRecovery(ctx context.Context, t *turn, out *outcome, e ending) {
	var results []json.RawMessage
	if len(e.deferred) > 0 {
		s.met.Recoveries.WithLabelValues("deferred").Inc()
		_, results = s.answer(ctx, t, e.deferred)
	}
	if e.rounds > 1 || len(e.deferred) > 0 {
		out.splice = &splice{At: len(t.client.Messages), Digest: e.dg.sum(), Replace: e.replace, Results: results}
		s.persistSplice(ctx, t, out.splice)
	}
	out.final = t.finalAnswer(len(e.client), e.stop)
	if out.splice != nil && len(e.deferred) == 0 {
		out.viewTail = e.replace
	} else {
		out.viewTail = []json.RawMessage{e.visible}
	}
	s.onFinal(t, out)
}

// hiddenOnlyText is the text of an assistant message that would otherwise be empty because the
// proxy hid the context_tree_query calls that were all the model sent: an empty assistant
// message is invalid for the provider when a client sends it back.
const hiddenOnlyText = "[condense: the model only asked to retrieve pruned context]"

// hiddenOnlyBlock is hiddenOnlyText as an Anthropic text block.
var hiddenOnlyBlock = json.RawMessage(`{"type":"text","text":` + string(jsonStr(hiddenOnlyText)) + `}`)

// nonEmpty returns an assistant message the proxy builds (to store or to show) with
// hiddenOnlyText as its content when it has none: no content blocks (Anthropic), no text and
// no tool calls (OpenAI), no items (Responses).
func nonEmpty(f wire.Format, msg json.RawMessage) json.RawMessage {
	if f == wire.Responses {
		if len(spreadItems([]json.RawMessage{msg})) == 0 {
			return hiddenOnlyView
		}
		return msg
	}
	m := gjson.ParseBytes(msg)
	if f == wire.Anthropic {
		if len(m.Get("content").Array()) == 0 {
			return anthropicAssistant([]json.RawMessage{hiddenOnlyBlock})
		}
		return msg
	}
	if m.Get("content").Str == "" && len(m.Get("tool_calls").Array()) == 0 {
		return openAIAssistant(hiddenOnlyText, nil)
	}
	return msg
}
