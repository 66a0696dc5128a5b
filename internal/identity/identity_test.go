package identity

import (
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/condense-dev/condense/internal/testutil/corpus"
	"github.com/condense-dev/condense/internal/wire"
)

// occurrenceKey is OccurrenceKeyOf over the fields themselves, through the same memo.
func occurrenceKey(id, toolName string, input []byte, resultText string) string {
	mk := occMemoKey(toolName, xxhash.Sum64(input), xxhash.Sum64String(resultText), len(input), len(resultText))
	return keyFor(id, mk, func() [4]byte { return occurrenceSum(toolName, input, resultText) })
}

// occurrence is a tool result with the call it pairs with and its key.
type occurrence struct {
	Key, ID, Name          string
	CallMsg, CallBlock     int
	ResultMsg, ResultBlock int
}

// occurrences pairs every tool result with the call of its id in the nearest preceding
// assistant message (a result without one is skipped), in transcript order.
func occurrences(msgs []*wire.Message) []occurrence {
	var out []occurrence
	for mi, m := range msgs {
		for bi, b := range m.Blocks {
			if m.Role == wire.RoleAssistant || b.Kind != wire.KindToolResult {
				continue
			}
			if cm, cb := findCall(msgs[:mi], b.ID); cm >= 0 {
				call := msgs[cm].Blocks[cb]
				out = append(out, occurrence{OccurrenceKeyOf(call, b), b.ID, call.Name, cm, cb, mi, bi})
			}
		}
	}
	return out
}

// findCall returns the call with id in the last assistant message of msgs that has one.
func findCall(msgs []*wire.Message, id string) (int, int) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != wire.RoleAssistant {
			continue
		}
		for j, b := range msgs[i].Blocks {
			if b.Kind == wire.KindToolUse && b.ID == id {
				return i, j
			}
		}
	}
	return -1, -1
}

var (
	errNoMatch   = errors.New("fingerprint matches no message")
	errAmbiguous = errors.New("fingerprint matches several messages")
)

// resolve returns the index of the one message with fingerprint fp (any ordinal when
// fp.Ordinal < 0): errNoMatch when none has it, errAmbiguous when several do.
func resolve(msgs []*wire.Message, fp Fingerprint) (int, error) {
	found, n := -1, 0
	for i, f := range Fingerprints(msgs) {
		if f.Hash == fp.Hash && (fp.Ordinal < 0 || f.Ordinal == fp.Ordinal) {
			found, n = i, n+1
		}
	}
	switch n {
	case 0:
		return -1, errNoMatch
	case 1:
		return found, nil
	}
	return -1, errAmbiguous
}

func TestCanonicalJSON(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"b":1,"a":{"d":[1, 2],"c":"x"}}`, `{"a":{"c":"x","d":[1,2]},"b":1}`},
		{" {\n \"k\" : \"\\u00e9\\/<>&\" }\n", `{"k":"é/<>&"}`},
		{`{"a":1,"a":2}`, `{"a":2}`},
		{`1.50`, `1.50`},
		{`"s"`, `"s"`},
		{`{bad`, `{bad`},
		{` {"a":1} {"b":2} `, `{"a":1} {"b":2}`},
		{``, ``},
	} {
		if got := string(canonicalJSON([]byte(tc.in))); got != tc.want {
			t.Errorf("canonicalJSON(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

var keyRE = regexp.MustCompile(`^(.+)#[0-9a-f]{8}$`)

func TestOccurrenceKey(t *testing.T) {
	k := occurrenceKey("bash_23", "bash", []byte(`{"cmd":"ls","n":1}`), "a\nb")
	if m := keyRE.FindStringSubmatch(k); m == nil || m[1] != "bash_23" {
		t.Fatalf("key %q", k)
	}
	if BareID(k) != "bash_23" || BareID("x#y") != "x#y" || BareID("plain") != "plain" {
		t.Fatal("BareID")
	}
	if k2 := occurrenceKey("bash_23", "bash", []byte(" { \"n\":1, \"cmd\" : \"ls\" }"), "a\nb"); k2 != k {
		t.Errorf("equivalent input spelling must give the same key: %s %s", k, k2)
	}
	for name, other := range map[string]string{
		"result": occurrenceKey("bash_23", "bash", []byte(`{"cmd":"ls","n":1}`), "a\nc"),
		"input":  occurrenceKey("bash_23", "bash", []byte(`{"cmd":"pwd","n":1}`), "a\nb"),
		"name":   occurrenceKey("bash_23", "sh", []byte(`{"cmd":"ls","n":1}`), "a\nb"),
		"shift":  occurrenceKey("bash_23", "bas", []byte(`h{"cmd":"ls","n":1}`), "a\nb"),
	} {
		if other == k {
			t.Errorf("different %s must give a different key", name)
		}
	}
	if occurrenceKey("bash_24", "bash", []byte(`{"cmd":"ls","n":1}`), "a\nb")[len("bash_24"):] != k[len("bash_23"):] {
		t.Error("hash must not depend on the id")
	}
}

// openAIRequest builds an OpenAI Chat Completions body from simple message specs.
type spec struct {
	role, text string
	calls      [][3]string // id, name, arguments
	callID     string      // tool messages
}

func openAIRequest(t *testing.T, specs []spec) *wire.Request {
	t.Helper()
	var msgs []map[string]any
	for _, s := range specs {
		m := map[string]any{"role": s.role, "content": s.text}
		if len(s.calls) > 0 {
			var calls []map[string]any
			for _, c := range s.calls {
				calls = append(calls, map[string]any{"id": c[0], "type": "function",
					"function": map[string]any{"name": c[1], "arguments": c[2]}})
			}
			m["tool_calls"] = calls
			if s.text == "" {
				m["content"] = nil
			}
		}
		if s.callID != "" {
			m["tool_call_id"] = s.callID
		}
		msgs = append(msgs, m)
	}
	body, err := json.Marshal(map[string]any{"model": "m", "messages": msgs})
	if err != nil {
		t.Fatal(err)
	}
	r, err := wire.Parse(wire.OpenAI, body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestReusedIDIncident reproduces the reference's id-collision incident (§3, §18 2.6.0, #8):
// a provider restarts its counter, so a live turn reuses bash_23 from an older turn.
func TestReusedIDIncident(t *testing.T) {
	r := openAIRequest(t, []spec{
		{role: "user", text: "fix it"},
		{role: "assistant", calls: [][3]string{{"bash_23", "bash", `{"cmd":"ls"}`}, {"bash_24", "bash", `{"cmd":"cat a"}`}}},
		{role: "tool", text: "a b", callID: "bash_23"},
		{role: "tool", text: "OLD 24", callID: "bash_24"},
		{role: "user", text: "continue"},
		{role: "assistant", calls: [][3]string{{"bash_23", "bash", `{"cmd":"make"}`}, {"bash_24", "bash", `{"cmd":"cat a"}`}}},
		{role: "tool", text: "LIVE 23", callID: "bash_23"},
		{role: "tool", text: "OLD 24", callID: "bash_24"},
	})
	if err := wire.Validate(r); err != nil {
		t.Fatalf("OpenAI accepts ids reused across turns: %v", err)
	}
	occ := occurrences(r.Messages)
	if len(occ) != 4 {
		t.Fatalf("occurrences: %d", len(occ))
	}
	old23, live23, old24, again24 := occ[0], occ[2], occ[1], occ[3]
	if old23.ID != "bash_23" || live23.ID != "bash_23" || old23.Key == live23.Key {
		t.Fatalf("reused id with different content must be two occurrences: %+v %+v", old23, live23)
	}
	// Per-turn pairing: each result pairs with the nearest preceding assistant's call.
	if old23.CallMsg != 1 || live23.CallMsg != 5 || live23.ResultMsg != 6 {
		t.Fatalf("pairing: %+v %+v", old23, live23)
	}
	if in := r.Messages[live23.CallMsg].Blocks[live23.CallBlock].Input; string(in) != `{"cmd":"make"}` {
		t.Fatalf("live call input %s", in)
	}
	// Identical triples are one occurrence: safe, their records are identical.
	if old24.Key != again24.Key {
		t.Fatalf("identical (name, input, result) must share a key: %s %s", old24.Key, again24.Key)
	}
	if BareID(live23.Key) != "bash_23" {
		t.Fatal("BareID")
	}
}

// TestReusedIDAnthropicRendering: the same pairing rule in Anthropic form (a transcript
// as an engine sees it before any renaming), where a bare-id map would mis-pair.
func TestReusedIDAnthropicRendering(t *testing.T) {
	body := `{"messages":[
{"role":"user","content":"go"},
{"role":"assistant","content":[{"type":"tool_use","id":"bash_23","name":"bash","input":{"cmd":"ls"}}]},
{"role":"user","content":[{"type":"tool_result","tool_use_id":"bash_23","content":"OLD"}]},
{"role":"assistant","content":[{"type":"tool_use","id":"bash_23","name":"read","input":{"path":"x"}}]},
{"role":"user","content":[{"type":"tool_result","tool_use_id":"bash_23","content":[{"type":"text","text":"LIVE"}]}]}]}`
	r, err := wire.Parse(wire.Anthropic, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	var ve *wire.ValidationError
	if err := wire.Validate(r); !errors.As(err, &ve) || ve.Rule != wire.RuleDuplicateCallID {
		t.Fatalf("Anthropic rejects reused ids in one request: %v", err)
	}
	occ := occurrences(r.Messages)
	if len(occ) != 2 || occ[0].Key == occ[1].Key || occ[1].Name != "read" || occ[0].Name != "bash" {
		t.Fatalf("occurrences %+v", occ)
	}
	if occ[1].Key != occurrenceKey("bash_23", "read", []byte(`{"path":"x"}`), "LIVE") {
		t.Fatal("key must be computed from the paired call")
	}
}

func TestFingerprints(t *testing.T) {
	specs := []spec{
		{role: "user", text: "start"},
		{role: "assistant", text: "ok"},
		{role: "user", text: "continue"},
		{role: "assistant", text: "ok"},
		{role: "user", text: "continue"},
	}
	r := openAIRequest(t, specs)
	fps := Fingerprints(r.Messages)
	if fps[2].Hash != fps[4].Hash || fps[2].Ordinal != 0 || fps[4].Ordinal != 1 || fps[3].Ordinal != 1 {
		t.Fatalf("ordinals: %v", fps)
	}
	seen := map[Fingerprint]bool{}
	for i, fp := range fps {
		if seen[fp] {
			t.Fatalf("duplicate fingerprint %v", fp)
		}
		seen[fp] = true
		if got, err := resolve(r.Messages, fp); err != nil || got != i {
			t.Fatalf("resolve(%v) = %d, %v", fp, got, err)
		}
	}
	// Stable while the transcript grows.
	grown := openAIRequest(t, append(specs, spec{role: "assistant", text: "ok"}, spec{role: "user", text: "continue"}))
	g := Fingerprints(grown.Messages)
	for i := range fps {
		if g[i] != fps[i] {
			t.Fatalf("fingerprint %d changed on growth: %v -> %v", i, fps[i], g[i])
		}
	}
	if g[6].Ordinal != 2 {
		t.Fatalf("third continue ordinal %d", g[6].Ordinal)
	}
	// Rewritten history (an earlier "continue" dropped): the last fingerprint no longer
	// resolves — fail closed instead of pointing at the wrong message.
	rewritten := openAIRequest(t, []spec{specs[0], specs[1], specs[3], specs[4]})
	if _, err := resolve(rewritten.Messages, fps[4]); !errors.Is(err, errNoMatch) {
		t.Fatalf("want errNoMatch, got %v", err)
	}
	if _, err := resolve(r.Messages, Fingerprint{Hash: fps[2].Hash, Ordinal: -1}); !errors.Is(err, errAmbiguous) {
		t.Fatalf("hash-only lookup of a repeated message: want errAmbiguous, got %v", err)
	}
	if _, err := resolve(r.Messages, Fingerprint{Hash: fps[0].Hash, Ordinal: -1}); err != nil {
		t.Fatalf("hash-only lookup of a unique message: %v", err)
	}
}

func TestMessageHashIgnoresEncodingAndCacheMarkers(t *testing.T) {
	parse := func(msg string) *wire.Message {
		r, err := wire.Parse(wire.Anthropic, []byte(`{"messages":[`+msg+`]}`))
		if err != nil {
			t.Fatal(err)
		}
		return r.Messages[0]
	}
	base := MessageHash(parse(`{"role":"user","content":"hello"}`))
	same := []string{
		`{"role":"user","content":[{"type":"text","text":"hello"}]}`,
		`{"role":"user","content":[{"text":"hello","type":"text","cache_control":{"type":"ephemeral"}}]}`,
		`{ "content" : [ { "type" : "text" , "text" : "hell\u006f" } ] , "role" : "user" }`,
	}
	for _, s := range same {
		if h := MessageHash(parse(s)); h != base {
			t.Errorf("%s hashes differently", s)
		}
	}
	for _, s := range []string{
		`{"role":"assistant","content":"hello"}`,
		`{"role":"user","content":"hello!"}`,
		`{"role":"user","content":[{"type":"text","text":"hello"},{"type":"text","text":"x"}]}`,
	} {
		if h := MessageHash(parse(s)); h == base {
			t.Errorf("%s must hash differently", s)
		}
	}
	tr1 := MessageHash(parse(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"x","cache_control":{"type":"ephemeral"}}]}`))
	tr2 := MessageHash(parse(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"x"}]}`))
	if tr1 != tr2 {
		t.Error("moving a cache marker must not change the hash")
	}
}

// TestSWEAgentReusedIDs reads the history of the corpus trajectory whose tool-call ids are
// reused (call_5iDd… on 4 calls, call_ahTo… on 2) and checks that every call/result pair
// gets its own occurrence and every message its own fingerprint.
func TestSWEAgentReusedIDs(t *testing.T) {
	path := corpus.File(t, "sweagent_marshmallow-code__marshmallow-1867.traj")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var traj struct {
		History []struct {
			Role      string          `json:"role"`
			Content   json.RawMessage `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
			ToolCallIDs []string `json:"tool_call_ids"`
		} `json:"history"`
	}
	if err := json.Unmarshal(data, &traj); err != nil {
		t.Fatal(err)
	}
	var msgs []map[string]any
	for _, h := range traj.History {
		m := map[string]any{"role": h.Role, "content": h.Content}
		if len(h.ToolCalls) > 0 {
			var calls []map[string]any
			for _, c := range h.ToolCalls {
				calls = append(calls, map[string]any{"id": c.ID, "type": "function",
					"function": map[string]any{"name": c.Function.Name, "arguments": c.Function.Arguments}})
			}
			m["tool_calls"] = calls
		}
		if len(h.ToolCallIDs) == 1 {
			m["tool_call_id"] = h.ToolCallIDs[0]
		} else if len(h.ToolCallIDs) > 1 {
			t.Fatalf("tool message answering %d calls", len(h.ToolCallIDs))
		}
		msgs = append(msgs, m)
	}
	body, err := json.Marshal(map[string]any{"model": "gpt-4o", "messages": msgs})
	if err != nil {
		t.Fatal(err)
	}
	r, err := wire.Parse(wire.OpenAI, body)
	if err != nil {
		t.Fatal(err)
	}
	if err := wire.Validate(r); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	occ := occurrences(r.Messages)
	perID := map[string][]occurrence{}
	keys := map[string]bool{}
	for _, o := range occ {
		perID[o.ID] = append(perID[o.ID], o)
		keys[o.Key] = true
		if o.CallMsg != o.ResultMsg-1 {
			t.Errorf("%s result in message %d paired with call in message %d", o.ID, o.ResultMsg, o.CallMsg)
		}
	}
	if n := len(perID["call_5iDdbOYybq7L19vqXmR0DPaU"]); n != 4 {
		t.Fatalf("call_5iDd… occurrences: %d, want 4", n)
	}
	if n := len(perID["call_ahToD2vM0aQWJPkRmy5cumru"]); n != 2 {
		t.Fatalf("call_ahTo… occurrences: %d, want 2", n)
	}
	if len(keys) != len(occ) {
		t.Fatalf("%d occurrences but %d distinct keys", len(occ), len(keys))
	}
	// The two "python reproduce.py" runs share id and input but not output: distinct keys.
	var repro []string
	for _, o := range perID["call_5iDdbOYybq7L19vqXmR0DPaU"] {
		if strings.Contains(string(r.Messages[o.CallMsg].Blocks[o.CallBlock].Input), "reproduce.py\"") &&
			strings.Contains(string(r.Messages[o.CallMsg].Blocks[o.CallBlock].Input), "python") {
			repro = append(repro, o.Key)
		}
	}
	if len(repro) != 2 || repro[0] == repro[1] {
		t.Fatalf("reproduce.py runs: %v", repro)
	}
	fps := Fingerprints(r.Messages)
	for i, fp := range fps {
		if got, err := resolve(r.Messages, fp); err != nil || got != i {
			t.Fatalf("resolve(%v) = %d, %v", fp, got, err)
		}
	}
	t.Logf("%d messages, %d occurrences, %d distinct keys", len(r.Messages), len(occ), len(keys))
}
