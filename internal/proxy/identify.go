package proxy

import (
	"crypto/sha256"
	"encoding/hex"
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

// SessionSource says where a session id came from.
type SessionSource string

// Session id sources, in priority order.
const (
	// SourceHeader: the X-Condense-Session header.
	SourceHeader SessionSource = "header"
	// SourceMetadata: Anthropic metadata.user_id, with the conversation hash.
	SourceMetadata SessionSource = "metadata.user_id"
	// SourceUser: OpenAI user, with the conversation hash.
	SourceUser SessionSource = "user"
	// SourceCacheKey: OpenAI prompt_cache_key, with the conversation hash.
	SourceCacheKey SessionSource = "prompt_cache_key"
	// SourceDerived: a hash of the system prompt and the first user message alone.
	SourceDerived SessionSource = "derived"
)

// sessionOf returns the session of a request (sessionOfBody), except that with session auth a
// body field's bare value is the session when the request's X-Condense-Token is valid for it.
func (s *Server) sessionOf(f wire.Format, h http.Header, body []byte) (string, SessionSource) {
	sid, src, ns := sessionOfBody(f, h, body)
	if len(s.opt.SessionSecret) > 0 && ns != "" && config.VerifySessionToken(s.opt.SessionSecret, ns, h.Get(HeaderToken)) {
		return ns, src
	}
	return sid, src
}

// sessionOfBody derives the session id of a request and the end user its body names (ns):
// the X-Condense-Session header, else "<ns>:<24 hex>" or "d-<24 hex>", the hex a SHA-256 of
// the system prompt's and first user message's text (conversationHash). See docs/proxy.md.
func sessionOfBody(f wire.Format, h http.Header, body []byte) (sid string, src SessionSource, ns string) {
	if v := strings.TrimSpace(h.Get(HeaderSession)); v != "" {
		return v, SourceHeader, ""
	}
	bf := readBodyFields(body)
	ns, src = bf.namespace(f)
	if ns == "" {
		return "d-" + bf.conversationHash(f), SourceDerived, ""
	}
	return ns + ":" + bf.conversationHash(f), src, ns
}

// bodyFields are the top-level members of a request body that name its session.
type bodyFields struct {
	system, messages, metadata, user, cacheKey gjson.Result
}

// bodyFieldNames are the members bodyFields holds, in its order.
var bodyFieldNames = []string{"system", "messages", "metadata", "user", "prompt_cache_key"}

// readBodyFields reads the members bodyFields holds in one pass over body's top level
// (wire.TopLevel), in place; a body that is not a JSON object is read leniently by gjson.
func readBodyFields(body []byte) bodyFields {
	vals, err := wire.TopLevel(body, bodyFieldNames...)
	if err != nil {
		return readBodyFieldsLenient(body)
	}
	var bf bodyFields
	for i, dst := range []*gjson.Result{&bf.system, &bf.messages, &bf.metadata, &bf.user, &bf.cacheKey} {
		if vals[i] != nil {
			*dst = gjson.Parse(bytesView(vals[i]))
		}
	}
	return bf
}

// readBodyFieldsLenient is readBodyFields by gjson, which reads what it can of bytes that
// are not valid JSON.
func readBodyFieldsLenient(body []byte) bodyFields {
	var bf bodyFields
	gjson.Parse(bytesView(body)).ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "system":
			bf.system = v
		case "messages":
			bf.messages = v
		case "metadata":
			bf.metadata = v
		case "user":
			bf.user = v
		case "prompt_cache_key":
			bf.cacheKey = v
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

// namespace returns the end user the fields name — Anthropic metadata.user_id, else OpenAI
// user, then prompt_cache_key — and its source ("" and SourceDerived for none). The value is a copy: the fields view the body.
func (bf bodyFields) namespace(f wire.Format) (string, SessionSource) {
	if f == wire.Anthropic {
		if v := bf.metadata.Get("user_id"); v.Type == gjson.String && v.Str != "" {
			return strings.Clone(v.Str), SourceMetadata
		}
		return "", SourceDerived
	}
	if v := bf.user; v.Type == gjson.String && v.Str != "" {
		return strings.Clone(v.Str), SourceUser
	}
	if v := bf.cacheKey; v.Type == gjson.String && v.Str != "" {
		return strings.Clone(v.Str), SourceCacheKey
	}
	return "", SourceDerived
}

// conversationHash is 24 hex of a SHA-256 over the text of the request's system prompt
// (OpenAI: its leading system/developer messages) and first user message.
func (bf bodyFields) conversationHash(f wire.Format) string {
	hsh := sha256.New()
	hsh.Write([]byte(f.String()))
	hsh.Write([]byte{0})
	if f == wire.Anthropic {
		writeText(hsh, bf.system)
	}
	hsh.Write([]byte{0})
	firstUser := false
	bf.messages.ForEach(func(_, m gjson.Result) bool {
		role := m.Get("role").Str
		if f == wire.OpenAI && (role == "system" || role == "developer") && !firstUser {
			writeText(hsh, m.Get("content"))
			hsh.Write([]byte{1})
			return true
		}
		if role == "user" {
			hsh.Write([]byte{0})
			writeText(hsh, m.Get("content"))
			firstUser = true
			return false
		}
		return true
	})
	sum := hsh.Sum(nil)
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
