package proxy

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"net/http"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/config"
	"github.com/condense-dev/condense/internal/wire"
)

// Header names the proxy reads; both are removed before a request goes upstream.
const (
	// HeaderSession carries an explicit session id.
	HeaderSession = "X-Condense-Session"
	// HeaderToken carries the session token (HMAC of the session id) when session auth is on.
	HeaderToken = "X-Condense-Token"
)

// Headers known clients name their own session by.
const (
	headerClaudeCode = "X-Claude-Code-Session-Id"
	headerCodex      = "Session-Id"
	headerCodexAlt   = "Thread-Id"
	headerOpencode   = "X-Session-Affinity"
)

// SessionSource says where a session id came from.
type SessionSource string

// Session id sources, in precedence order (docs/identity.md "Sessions").
const (
	// SourceHeader: the X-Condense-Session header, the exact id.
	SourceHeader SessionSource = "header"
	// SourceClaudeCode: Claude Code's X-Claude-Code-Session-Id, or the session_id in its JSON
	// metadata.user_id.
	SourceClaudeCode SessionSource = "claude-code"
	// SourceCodex: the Codex CLI's session-id (else thread-id) header.
	SourceCodex SessionSource = "codex"
	// SourceOpencode: opencode's X-Session-Affinity header (its session id).
	SourceOpencode SessionSource = "opencode"
	// SourceCacheKey: OpenAI prompt_cache_key, with the conversation key.
	SourceCacheKey SessionSource = "prompt_cache_key"
	// SourceUser: OpenAI user, with the conversation key.
	SourceUser SessionSource = "user"
	// SourceMetadata: Anthropic metadata.user_id, with the conversation key.
	SourceMetadata SessionSource = "metadata.user_id"
	// SourceDerived: the conversation key alone.
	SourceDerived SessionSource = "derived"
)

// identity is who a request belongs to.
type identity struct {
	sid string
	src SessionSource
	// ns is the end user a body field names, for SourceCacheKey, SourceUser and SourceMetadata.
	ns string
	// opening is set for a conversation's first request (no model answer yet) of a session
	// named by its conversation key: it belongs to no stored session yet.
	opening bool
}

// sessionOf returns the identity of a request (identify), except that with session auth a
// body field's bare value is the session when the request's X-Condense-Token is valid for it.
func (s *Server) sessionOf(f wire.Format, h http.Header, body []byte) identity {
	id := identify(f, h, body)
	if len(s.opt.SessionSecret) > 0 && id.ns != "" && config.VerifySessionToken(s.opt.SessionSecret, id.ns, h.Get(HeaderToken)) {
		return identity{sid: id.ns, src: id.src}
	}
	return id
}

// identify names the session of a request, in the precedence of the Source constants: an
// exact id from a header or a known client's own session id, else "<ns>:<key>" or "d-<key>"
// with the conversation key (conversationKey).
func identify(f wire.Format, h http.Header, body []byte) identity {
	if id, ok := headerIdentity(h); ok {
		return id
	}
	return identifyBody(f, readBodyFields(body))
}

// headerIdentity names the session of a request by its headers alone — X-Condense-Session,
// else a known client's own session header — and reports whether they name one.
func headerIdentity(h http.Header) (identity, bool) {
	if v := strings.TrimSpace(h.Get(HeaderSession)); v != "" {
		return identity{sid: v, src: SourceHeader}, true
	}
	if v := strings.TrimSpace(h.Get(headerClaudeCode)); v != "" {
		return identity{sid: "claude-" + urlSafe(v), src: SourceClaudeCode}, true
	}
	for _, k := range []string{headerCodex, headerCodexAlt} {
		if v := strings.TrimSpace(h.Get(k)); v != "" {
			return identity{sid: "codex-" + urlSafe(v), src: SourceCodex}, true
		}
	}
	if v := strings.TrimSpace(h.Get(headerOpencode)); v != "" {
		return identity{sid: "opencode-" + urlSafe(v), src: SourceOpencode}, true
	}
	return identity{}, false
}

// identifyBody is identify for a request without session headers, from its body's fields.
func identifyBody(f wire.Format, bf bodyFields) identity {
	if f == wire.Anthropic {
		if v := claudeCodeSession(bf.metadata); v != "" {
			return identity{sid: "claude-" + urlSafe(v), src: SourceClaudeCode}
		}
	}
	key, opening := bf.conversationKey(f)
	ns, src := bf.namespace(f)
	if ns == "" {
		return identity{sid: "d-" + key, src: SourceDerived, opening: opening}
	}
	return identity{sid: urlSafe(ns) + ":" + key, src: src, ns: ns, opening: opening}
}

// claudeCodeSession returns the session_id of a metadata.user_id that is a JSON object in a
// string, as Claude Code sends it ("" otherwise).
func claudeCodeSession(metadata gjson.Result) string {
	u := metadata.Get("user_id")
	if u.Type != gjson.String || !strings.HasPrefix(strings.TrimSpace(u.Str), "{") {
		return ""
	}
	if v := gjson.Get(u.Str, "session_id"); v.Type == gjson.String {
		return strings.Clone(strings.TrimSpace(v.Str))
	}
	return ""
}

// maxNameLen bounds the part of a session id taken verbatim from a client's value.
const maxNameLen = 64

// urlSafe returns v when it is at most maxNameLen bytes of [A-Za-z0-9._-]; otherwise its
// first bytes with every other byte as "_", then "-" and 8 hex of v's SHA-256.
func urlSafe(v string) string {
	safe := len(v) <= maxNameLen
	var b strings.Builder
	for i := 0; i < len(v) && b.Len() < maxNameLen; i++ {
		c := v[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' {
			b.WriteByte(c)
			continue
		}
		safe = false
		b.WriteByte('_')
	}
	if safe {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return b.String() + "-" + hex.EncodeToString(sum[:4])
}

// bodyFields are the top-level members of a request body that name its session.
type bodyFields struct {
	messages, input, metadata, user, cacheKey gjson.Result
}

// bodyFieldNames are the members bodyFields holds, in its order.
var bodyFieldNames = []string{"messages", "input", "metadata", "user", "prompt_cache_key"}

// readBodyFields reads the members bodyFields holds in one pass over body's top level
// (wire.TopLevel), in place; a body that is not a JSON object is read leniently by gjson.
func readBodyFields(body []byte) bodyFields {
	vals, err := wire.TopLevel(body, bodyFieldNames...)
	if err != nil {
		return readBodyFieldsLenient(body)
	}
	var bf bodyFields
	for i, dst := range bf.fields() {
		if vals[i] != nil {
			*dst = gjson.Parse(bytesView(vals[i]))
		}
	}
	return bf
}

// fields returns bodyFields' members in bodyFieldNames' order.
func (bf *bodyFields) fields() []*gjson.Result {
	return []*gjson.Result{&bf.messages, &bf.input, &bf.metadata, &bf.user, &bf.cacheKey}
}

// readBodyFieldsLenient is readBodyFields by gjson, which reads what it can of bytes that
// are not valid JSON.
func readBodyFieldsLenient(body []byte) bodyFields {
	var bf bodyFields
	dst := bf.fields()
	gjson.Parse(bytesView(body)).ForEach(func(k, v gjson.Result) bool {
		for i, name := range bodyFieldNames {
			if k.Str == name {
				*dst[i] = v
			}
		}
		return true
	})
	return bf
}

// bytesView is b as a string without copying it. The body is never modified while its fields
// are read, and what outlives the read is copied (namespace).
func bytesView(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// namespace returns the end user the fields name — OpenAI prompt_cache_key, else user, else
// Anthropic metadata.user_id — and its source ("" and SourceDerived for none). The value is a
// copy: the fields view the body.
func (bf bodyFields) namespace(f wire.Format) (string, SessionSource) {
	if f == wire.Anthropic {
		if v := bf.metadata.Get("user_id"); v.Type == gjson.String && v.Str != "" {
			return strings.Clone(v.Str), SourceMetadata
		}
		return "", SourceDerived
	}
	if v := bf.cacheKey; v.Type == gjson.String && v.Str != "" {
		return strings.Clone(v.Str), SourceCacheKey
	}
	if v := bf.user; v.Type == gjson.String && v.Str != "" {
		return strings.Clone(v.Str), SourceUser
	}
	return "", SourceDerived
}

// conversationKey is 24 hex of a SHA-256 over the conversation's first exchange: the text of
// its first user message and the first model answer after it (text, tool-call ids and names).
// Before that answer exists, opening is true and the key covers the user message alone.
func (bf bodyFields) conversationKey(f wire.Format) (key string, opening bool) {
	hsh := sha256.New()
	hsh.Write([]byte(f.String()))
	hsh.Write([]byte{0})
	items := bf.messages
	if f == wire.Responses {
		items = bf.input
		if items.Type == gjson.String { // input as a string: one user message
			writeText(hsh, items)
			return sumKey(hsh), true
		}
	}
	state := 0 // 0: before the first user message, 1: after it, 2: in the first answer
	items.ForEach(func(_, m gjson.Result) bool {
		role, typ := m.Get("role").Str, m.Get("type").Str
		answer := role == "assistant" || f == wire.Responses && typ != "" && typ != "message" && !strings.HasSuffix(typ, "_output")
		switch {
		case state == 0 && role == "user":
			writeText(hsh, m.Get("content"))
			state = 1
		case state >= 1 && answer:
			hsh.Write([]byte{1})
			writeAnswer(hsh, m)
			state = 2
			return f == wire.Responses // a Responses answer is a run of items
		case state == 2:
			return false
		}
		return true
	})
	return sumKey(hsh), state < 2
}

func sumKey(h hash.Hash) string {
	sum := h.Sum(nil)
	return hex.EncodeToString(sum[:12])
}

type byteWriter interface{ Write([]byte) (int, error) }

// writeText writes the text parts of a content value (string, or array of blocks/parts).
func writeText(w byteWriter, v gjson.Result) {
	switch {
	case v.Type == gjson.String:
		_, _ = w.Write([]byte(v.Str))
		_, _ = w.Write([]byte{'\n'})
	case v.IsArray():
		v.ForEach(func(_, b gjson.Result) bool {
			if t := b.Get("text"); t.Type == gjson.String {
				_, _ = w.Write([]byte(t.Str))
				_, _ = w.Write([]byte{'\n'})
			}
			return true
		})
	}
}

// writeAnswer writes what tells a model answer apart: its text, and the id and name of each
// tool call (Anthropic tool_use blocks, Chat Completions tool_calls, Responses call items).
func writeAnswer(w byteWriter, m gjson.Result) {
	writeText(w, m.Get("content"))
	write := func(id, name gjson.Result) {
		_, _ = w.Write([]byte(id.Str))
		_, _ = w.Write([]byte{0})
		_, _ = w.Write([]byte(name.Str))
		_, _ = w.Write([]byte{'\n'})
	}
	m.Get("content").ForEach(func(_, b gjson.Result) bool {
		if b.Get("type").Str == "tool_use" {
			write(b.Get("id"), b.Get("name"))
		}
		return true
	})
	m.Get("tool_calls").ForEach(func(_, c gjson.Result) bool {
		write(c.Get("id"), c.Get("function.name"))
		return true
	})
	if id := m.Get("call_id"); id.Exists() {
		write(id, m.Get("name"))
	} else if id := m.Get("id"); id.Exists() && m.Get("role").Str == "" {
		write(id, m.Get("type"))
	}
}
