package wire

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"testing"
	"unsafe"

	"github.com/condense-dev/condense/internal/testutil/corpus"
)

// claudeCodeRequest builds one Anthropic request from all user/assistant "message" objects
// of a Claude Code JSONL transcript, in file order. It is a test helper only (the session
// importer lives elsewhere): consecutive records are not merged, which the wire model does
// not care about.
func claudeCodeRequest(tb testing.TB, path string) []byte {
	tb.Helper()
	return wrapMessages(claudeCodeMessages(tb, path))
}

// claudeCodeMessages returns the "message" objects of a Claude Code transcript.
func claudeCodeMessages(tb testing.TB, path string) []json.RawMessage {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var msgs []json.RawMessage
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		var rec struct {
			Type    string          `json:"type"`
			Message json.RawMessage `json:"message"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) != nil {
			continue
		}
		if (rec.Type == "user" || rec.Type == "assistant") && len(rec.Message) > 0 {
			var probe struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			}
			if json.Unmarshal(rec.Message, &probe) == nil && probe.Role != "" && len(probe.Content) > 0 {
				msgs = append(msgs, rec.Message)
			}
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return msgs
}

// wrapMessages builds a request body around message objects.
func wrapMessages(msgs []json.RawMessage) []byte {
	var buf bytes.Buffer
	buf.WriteString(`{"model":"claude-sonnet-4-5","max_tokens":32000,"system":[{"type":"text","text":"You are a coding agent.","cache_control":{"type":"ephemeral"}}],"messages":[`)
	for i, m := range msgs {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(m)
	}
	buf.WriteString(`],"stream":true,"metadata":{"user_id":"u1"}}`)
	return buf.Bytes()
}

// largestClaudeCodeRequest returns the biggest request built from the Claude Code corpus
// files, and its name.
func largestClaudeCodeRequest(tb testing.TB) ([]byte, string) {
	tb.Helper()
	var best []byte
	var name string
	for _, p := range corpus.Files(tb) {
		base := p[bytes.LastIndexByte([]byte(p), '/')+1:]
		if !(bytes.HasPrefix([]byte(base), []byte("ccspot_")) || bytes.HasPrefix([]byte(base), []byte("cccodemie_"))) {
			continue
		}
		b := claudeCodeRequest(tb, p)
		if len(b) > len(best) {
			best, name = b, base
		}
	}
	if best == nil {
		tb.Fatal("no Claude Code corpus files")
	}
	return best, name
}

// twoMBRequest concatenates the messages of the Claude Code corpus files (in name order)
// until the request reaches 2 MB: a deterministic, realistic ~2 MB Anthropic request.
func twoMBRequest(tb testing.TB) []byte {
	tb.Helper()
	var msgs []json.RawMessage
	size := 0
	for _, p := range corpus.Files(tb) {
		base := p[bytes.LastIndexByte([]byte(p), '/')+1:]
		if !(bytes.HasPrefix([]byte(base), []byte("ccspot_")) || bytes.HasPrefix([]byte(base), []byte("cccodemie_"))) {
			continue
		}
		for _, m := range claudeCodeMessages(tb, p) {
			msgs = append(msgs, m)
			size += len(m) + 1
			if size >= 2<<20 {
				return wrapMessages(msgs)
			}
		}
	}
	tb.Fatal("Claude Code corpus smaller than 2 MB")
	return nil
}

// offsetIn returns the offset of sub inside body when sub is a subslice of body (by
// address, so identical bytes elsewhere cannot be mistaken for it), or -1.
func offsetIn(body, sub []byte) int {
	if len(sub) == 0 || len(body) == 0 {
		return -1
	}
	off := int(uintptr(unsafe.Pointer(unsafe.SliceData(sub))) - uintptr(unsafe.Pointer(unsafe.SliceData(body))))
	if off < 0 || off+len(sub) > len(body) {
		return -1
	}
	return off
}
