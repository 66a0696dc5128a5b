package wire

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestValidateAnthropic(t *testing.T) {
	u := func(c string) string { return `{"role":"user","content":` + c + `}` }
	a := func(c string) string { return `{"role":"assistant","content":` + c + `}` }
	use := func(id string) string { return `{"type":"tool_use","id":"` + id + `","name":"bash","input":{}}` }
	res := func(id string) string { return `{"type":"tool_result","tool_use_id":"` + id + `","content":"ok"}` }
	cc := `"cache_control":{"type":"ephemeral"}`
	for _, tc := range []struct {
		name, msgs, rule string
		mi               int
	}{
		{"valid", u(`"hi"`) + "," + a(`[`+use("t1")+`,`+use("t2")+`]`) + "," + u(`[`+res("t2")+`,`+res("t1")+`,{"type":"text","text":"more"}]`), "", 0},
		{"valid dangling at end", u(`"hi"`) + "," + a(`[`+use("t1")+`]`), "", 0},
		{"valid prefill empty", u(`"hi"`) + "," + a(`[]`), "", 0},
		// The first-party API accepts a leading assistant message (see Validate's doc comment).
		{"valid leading assistant", a(`"How can I help?"`) + "," + u(`"hi"`), "", 0},
		{"valid leading assistant with calls", a(`[`+use("t1")+`]`) + "," + u(`[`+res("t1")+`]`), "", 0},
		{"leading assistant then assistant", a(`"a"`) + "," + a(`"b"`), RuleRole, 1},
		{"result answering nothing after leading assistant", a(`"a"`) + "," + u(`[`+res("t1")+`]`), RuleOrphanResult, 1},
		{"no messages", ``, RuleNoMessages, -1},
		{"system role first", `{"role":"system","content":"x"}`, RuleRole, 0},
		// Mid-conversation system messages (Claude Code 2.1 sends them after the first prompt
		// and after tool results).
		{"valid mid system after prompt", u(`"hi"`) + `,{"role":"system","content":"env"},` + a(`"ok"`), "", 0},
		{"valid mid system after results, last", u(`"hi"`) + "," + a(`[`+use("t1")+`]`) + "," + u(`[`+res("t1")+`]`) + `,{"role":"system","content":[{"type":"text","text":"keep going"}]}`, "", 0},
		{"valid two mid systems", u(`"hi"`) + `,{"role":"system","content":"a"},{"role":"system","content":"b"},` + a(`"ok"`), "", 0},
		{"mid system after assistant", u(`"hi"`) + "," + a(`"ok"`) + `,{"role":"system","content":"x"}`, RuleRole, 2},
		{"mid system between calls and results", u(`"hi"`) + "," + a(`[`+use("t1")+`]`) + `,{"role":"system","content":"x"},` + u(`[`+res("t1")+`]`), RuleRole, 2},
		{"user system user", u(`"a"`) + `,{"role":"system","content":"x"},` + u(`"b"`), RuleRole, 2},
		{"mid system with an image", u(`"hi"`) + `,{"role":"system","content":[{"type":"image","source":{}}]}`, RuleBlockPlacement, 1},
		{"mid system blank", u(`"hi"`) + `,{"role":"system","content":" "}`, RuleEmptyContent, 1},
		{"consecutive users", u(`"a"`) + "," + u(`"b"`), RuleRole, 1},
		{"result in wrong message", u(`"hi"`) + "," + a(`[`+use("t1")+`]`) + "," + u(`[`+res("t1")+`]`) + "," + a(`"k"`) + "," + u(`[`+res("t1")+`]`), RuleOrphanResult, 4},
		{"result without call", u(`[` + res("t9") + `]`), RuleOrphanResult, 0},
		{"duplicate result", u(`"hi"`) + "," + a(`[`+use("t1")+`]`) + "," + u(`[`+res("t1")+`,`+res("t1")+`]`), RuleDuplicateResult, 2},
		{"dangling before user", u(`"hi"`) + "," + a(`[`+use("t1")+`,`+use("t2")+`]`) + "," + u(`[`+res("t1")+`]`), RuleDanglingCall, 1},
		{"text before result", u(`"hi"`) + "," + a(`[`+use("t1")+`]`) + "," + u(`[{"type":"text","text":"x"},`+res("t1")+`]`), RuleBlockPlacement, 2},
		{"reused id", u(`"hi"`) + "," + a(`[`+use("t1")+`]`) + "," + u(`[`+res("t1")+`]`) + "," + a(`[`+use("t1")+`]`), RuleDuplicateCallID, 3},
		{"bad id", u(`"hi"`) + "," + a(`[`+use("t.1")+`]`), RuleCallID, 1},
		{"input not object", u(`"hi"`) + "," + a(`[{"type":"tool_use","id":"t1","name":"x","input":[1]}]`), RuleInput, 1},
		{"tool_use from user", u(`[` + use("t1") + `]`), RuleBlockPlacement, 0},
		{"empty string", u(`""`), RuleEmptyContent, 0},
		{"whitespace text", u(`[{"type":"text","text":" \n"}]`), RuleEmptyContent, 0},
		{"empty user blocks", u(`[]`), RuleEmptyContent, 0},
		{"prefill trailing space", u(`"hi"`) + "," + a(`"Sure "`), RuleEmptyContent, 1},
		{"prefill trailing space in the last block", u(`"hi"`) + "," + a(`[{"type":"text","text":"a"},{"type":"text","text":"b "}]`), RuleEmptyContent, 1},
		{"valid prefill trailing space before a call", u(`"hi"`) + "," + a(`[{"type":"text","text":"a "},`+use("t1")+`]`), "", 0},
		{"web search without server use", u(`"hi"`) + "," + a(`[{"type":"web_search_tool_result","tool_use_id":"s1","content":[]}]`), RuleOrphanResult, 1},
		{"thinking in user", u(`[{"type":"thinking","thinking":"x","signature":"s"}]`), RuleBlockPlacement, 0},
		{"five cache markers", u(`[{"type":"text","text":"a",` + cc + `},{"type":"text","text":"b",` + cc + `},{"type":"text","text":"c",` + cc + `},{"type":"text","text":"d",` + cc + `},{"type":"text","text":"e",` + cc + `}]`), RuleCacheControl, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustParse(t, Anthropic, `{"model":"m","messages":[`+tc.msgs+`]}`)
			err := Validate(r)
			checkRule(t, err, tc.rule, tc.mi)
		})
	}
}

func checkRule(t *testing.T, err error, rule string, mi int) {
	t.Helper()
	if rule == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("want %s error, got %v", rule, err)
	}
	if ve.Rule != rule || ve.Message != mi {
		t.Fatalf("got rule %s at message %d (%v), want %s at %d", ve.Rule, ve.Message, err, rule, mi)
	}
	if !strings.Contains(err.Error(), rule) {
		t.Fatalf("message %q lacks rule", err)
	}
}

func TestValidateOpenAI(t *testing.T) {
	call := func(ids ...string) string {
		var parts []string
		for _, id := range ids {
			parts = append(parts, fmt.Sprintf(`{"id":%q,"type":"function","function":{"name":"f","arguments":"{}"}}`, id))
		}
		return `{"role":"assistant","content":null,"tool_calls":[` + strings.Join(parts, ",") + `]}`
	}
	tool := func(id string) string { return fmt.Sprintf(`{"role":"tool","tool_call_id":%q,"content":"r"}`, id) }
	u := `{"role":"user","content":"go"}`
	for _, tc := range []struct {
		name, msgs, rule string
		mi               int
	}{
		{"valid", `{"role":"system","content":"s"},` + u + "," + call("c1", "c2") + "," + tool("c2") + "," + tool("c1") + `,{"role":"assistant","content":"done"},` + u, "", 0},
		{"valid dangling at end", u + "," + call("c1"), "", 0},
		{"tool without call", u + "," + tool("c1"), RuleOrphanResult, 1},
		{"tool after user", u + "," + call("c1") + "," + tool("c1") + "," + u + "," + tool("c1"), RuleOrphanResult, 4},
		{"unknown id", u + "," + call("c1") + "," + tool("c2"), RuleOrphanResult, 2},
		{"duplicate tool", u + "," + call("c1") + "," + tool("c1") + "," + tool("c1"), RuleDuplicateResult, 3},
		{"dangling", u + "," + call("c1", "c2") + "," + tool("c1") + "," + u, RuleDanglingCall, 1},
		{"reused id across turns", u + "," + call("c1") + "," + tool("c1") + "," + call("c1") + "," + tool("c1"), "", 0},
		{"reused id in one message", u + "," + call("c1", "c1"), RuleDuplicateCallID, 1},
		{"empty assistant", u + `,{"role":"assistant","content":null}`, RuleEmptyContent, 1},
		{"null user", `{"role":"user","content":null}`, RuleEmptyContent, 0},
		{"bad role", `{"role":"robot","content":"x"}`, RuleRole, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustParse(t, OpenAI, `{"model":"m","messages":[`+tc.msgs+`]}`)
			checkRule(t, Validate(r), tc.rule, tc.mi)
		})
	}
}

func TestValidateConstructedToolMessageWithoutBlocks(t *testing.T) {
	r := mustParse(t, OpenAI, `{"messages":[{"role":"user","content":"u"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"x"}]}`)
	msgs := append([]*Message(nil), r.Messages...)
	msgs[2] = msgs[2].WithBlocks(nil)
	checkRule(t, Validate(r.WithMessages(msgs)), RuleEmptyContent, 2)
}
