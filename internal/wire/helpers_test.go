package wire

import (
	"bytes"
	"encoding/json"
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
	return wrapMessages(corpus.ClaudeCodeMessages(tb, path))
}

// wrapMessages builds a request body around message objects.
func wrapMessages(msgs []json.RawMessage) []byte { return corpus.AnthropicRequest(msgs) }

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

// twoMBRequest is a deterministic, realistic ~2 MB Anthropic request from the corpus.
func twoMBRequest(tb testing.TB) []byte { return corpus.TwoMBAnthropicRequest(tb) }

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
