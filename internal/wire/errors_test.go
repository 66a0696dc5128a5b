package wire

import (
	"errors"
	"strings"
	"testing"
)

func TestMalformedInputTypedErrors(t *testing.T) {
	deep := strings.Repeat("[", MaxDepth+10) + strings.Repeat("]", MaxDepth+10)
	for _, tc := range []struct {
		name   string
		f      Format
		body   string
		syntax bool  // *SyntaxError, else *SchemaError
		offset int64 // expected offset (-1: don't check)
		path   string
	}{
		{"empty", Anthropic, ``, true, 0, ""},
		{"truncated object", Anthropic, `{"model":"x","messages":[{"role":"user","content":"hi`, true, 50, ""},
		{"truncated after comma", OpenAI, `{"model":"x",`, true, 13, ""},
		{"trailing garbage", Anthropic, `{} x`, true, 3, ""},
		{"bad literal", Anthropic, `{"stream":tru}`, true, 10, ""},
		{"bad number", Anthropic, `{"max_tokens":01}`, true, 15, ""},
		{"bad escape", Anthropic, `{"model":"a\qb"}`, true, 11, ""},
		{"control char in string", Anthropic, "{\"model\":\"a\x01\"}", true, 11, ""},
		{"invalid utf8", Anthropic, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\xff\"}]}", true, 40, ""},
		{"invalid utf8 in unknown member", OpenAI, "{\"x\":[\"\xc3\x28\"]}", true, 7, ""},
		{"deep nesting", Anthropic, `{"metadata":` + deep + `}`, true, -1, ""},
		{"deep nesting in input", Anthropic, `{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"b","input":` + deep + `}]}]}`, true, -1, ""},
		{"bad cache_control", OpenAI, `{"messages":[{"role":"user","content":"a","cache_control":x}]}`, true, 58, ""},
		{"missing colon", Anthropic, `{"model" "x"}`, true, 9, ""},
		{"not an object", Anthropic, `[1,2]`, false, 0, "$"},
		{"messages not array", Anthropic, `{"messages":{}}`, false, 12, "messages"},
		{"message not object", OpenAI, `{"messages":[{"role":"user","content":"a"}, 5]}`, false, 44, "messages[1]"},
		{"message string", Anthropic, `{"messages":["hi"]}`, false, 13, "messages[0]"},
		{"role number", Anthropic, `{"messages":[{"role":1,"content":"a"}]}`, false, 21, "messages[0].role"},
		{"no role", OpenAI, `{"messages":[{"content":"a"}]}`, false, 13, "messages[0]"},
		{"content number", Anthropic, `{"messages":[{"role":"user","content":5}]}`, false, 38, "messages[0].content"},
		{"block not object", Anthropic, `{"messages":[{"role":"user","content":["x"]}]}`, false, 39, "messages[0].content[0]"},
		{"block type number", Anthropic, `{"messages":[{"role":"user","content":[{"type":3}]}]}`, false, 47, "messages[0].content[0].type"},
		{"block without type", Anthropic, `{"messages":[{"role":"user","content":[{"text":"a"}]}]}`, false, 39, "messages[0].content[0]"},
		{"text not string", Anthropic, `{"messages":[{"role":"user","content":[{"type":"text","text":[]}]}]}`, false, 61, "messages[0].content[0].text"},
		{"is_error not bool", Anthropic, `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","is_error":"yes"}]}]}`, false, 90, "messages[0].content[0].is_error"},
		{"tool_result content element", Anthropic, `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[1]}]}]}`, false, 90, "messages[0].content[0].content[0]"},
		{"model number", OpenAI, `{"model":4}`, false, 9, "model"},
		{"stream string", OpenAI, `{"stream":"yes"}`, false, 10, "stream"},
		{"system number", Anthropic, `{"system":4}`, false, 10, "system"},
		{"tool not object", Anthropic, `{"tools":[true]}`, false, 10, "tools[0]"},
		{"tool name number", OpenAI, `{"tools":[{"type":"function","function":{"name":7}}]}`, false, -1, "tools[0].function.name"},
		{"tool_calls not array", OpenAI, `{"messages":[{"role":"assistant","tool_calls":{}}]}`, false, 46, "messages[0].tool_calls"},
		{"tool_call not object", OpenAI, `{"messages":[{"role":"assistant","tool_calls":[1]}]}`, false, 47, "messages[0].tool_calls[0]"},
		{"tool_call_id number", OpenAI, `{"messages":[{"role":"tool","tool_call_id":1,"content":"x"}]}`, false, 43, "messages[0].tool_call_id"},
		{"function not object", OpenAI, `{"messages":[{"role":"assistant","tool_calls":[{"id":"a","function":"f"}]}]}`, false, 68, "messages[0].tool_calls[0].function"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Parse(tc.f, []byte(tc.body))
			if err == nil {
				t.Fatalf("no error; parsed %+v", r)
			}
			if r != nil {
				t.Fatal("request returned with error")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not match ErrInvalid", err)
			}
			var se *SyntaxError
			var sc *SchemaError
			switch {
			case tc.syntax:
				if !errors.As(err, &se) {
					t.Fatalf("want *SyntaxError, got %T %v", err, err)
				}
				if tc.offset >= 0 && se.Offset != tc.offset {
					t.Fatalf("offset %d, want %d (%v)", se.Offset, tc.offset, err)
				}
			default:
				if !errors.As(err, &sc) {
					t.Fatalf("want *SchemaError, got %T %v", err, err)
				}
				if tc.offset >= 0 && sc.Offset != tc.offset {
					t.Fatalf("offset %d, want %d (%v)", sc.Offset, tc.offset, err)
				}
				if sc.Path != tc.path {
					t.Fatalf("path %q, want %q", sc.Path, tc.path)
				}
			}
			if !strings.Contains(err.Error(), "byte") {
				t.Fatalf("message without offset: %v", err)
			}
		})
	}
}

func TestUnknownFormat(t *testing.T) {
	if _, err := Parse(Format(9), []byte(`{}`)); err == nil {
		t.Fatal("unknown format accepted")
	}
}

func TestNewToolErrors(t *testing.T) {
	for _, bad := range []string{``, `[1]`, `{"name":1}`, `{"name":"a"} x`, `{"name":"a"`} {
		if _, err := NewTool(Anthropic, []byte(bad)); !errors.Is(err, ErrInvalid) {
			t.Errorf("NewTool(%q): %v", bad, err)
		}
	}
	tl, err := NewTool(OpenAI, []byte(` {"type":"function","function":{"name":"f"}} `))
	if err != nil || tl.Name != "f" || string(tl.Raw()) != `{"type":"function","function":{"name":"f"}}` {
		t.Fatalf("NewTool: %v %+v", err, tl)
	}
}
