package proxy

import (
	"bytes"
	"encoding/json"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/wire"
)

// outItem is one output item of a Responses API answer: a message, a reasoning item, a call.
type outItem struct {
	raw          json.RawMessage // the item as the provider sent it (nil until it is whole)
	typ, name    string
	callID, args string
	hidden       bool // a context_tree_query call, or a reasoning item right before one
}

// readOutItem reads an output item (as announced or whole).
func readOutItem(v gjson.Result) outItem {
	it := outItem{typ: v.Get("type").Str, name: v.Get("name").Str}
	it.whole(v)
	return it
}

// whole takes the item as it ended (response.output_item.done, the response's output).
func (it *outItem) whole(v gjson.Result) {
	it.raw = json.RawMessage(v.Raw)
	if n := v.Get("name").Str; n != "" {
		it.name = n
	}
	it.callID = v.Get("call_id").Str
	switch it.typ {
	case "function_call":
		it.args = v.Get("arguments").Str
	case "custom_tool_call":
		it.args = v.Get("input").Str
	}
}

// isQuery reports whether the item is a context_tree_query call.
func (it *outItem) isQuery() bool {
	return it.typ == "function_call" && it.name == pruner.QueryToolName
}

// clientCallTypes are the output items the client executes (a hosted tool's call, such as
// web_search_call, runs at the provider and is no call of the client's).
var clientCallTypes = map[string]bool{"function_call": true, "custom_tool_call": true, "local_shell_call": true,
	"shell_call": true, "apply_patch_call": true, "computer_call": true, "mcp_approval_request": true}

// call returns the item as a tool call, if it is one the client or the proxy answers.
func (it *outItem) call() (call, bool) {
	if !clientCallTypes[it.typ] {
		return call{}, false
	}
	id := it.callID
	if id == "" {
		id = gjson.GetBytes(it.raw, "id").Str
	}
	return call{id: id, name: it.name, input: []byte(it.args)}, true
}

// hideQueries marks the context_tree_query calls hidden, with the reasoning items right before
// each: a reasoning item is never separated from the item it precedes.
func hideQueries(items []outItem) {
	for i := range items {
		if !items[i].isQuery() {
			continue
		}
		items[i].hidden = true
		for j := i - 1; j >= 0 && items[j].typ == "reasoning"; j-- {
			items[j].hidden = true
		}
	}
}

// itemCalls returns the tool calls of items.
func itemCalls(items []outItem) []call {
	var calls []call
	for i := range items {
		if c, ok := items[i].call(); ok {
			calls = append(calls, c)
		}
	}
	return calls
}

// storeOff reports whether the request asks the provider not to store its items ("store":
// false). Their ids then name nothing the provider knows, and an input item carrying one is
// refused ("Item with id … not found"), so the model's view of them goes without (modelView).
func storeOff(t *turn) bool {
	v, ok := t.client.Field("store")
	return ok && bytes.Equal(bytes.TrimSpace(v), []byte("false"))
}

// modelView returns output items as one Responses assistant message of the model's view (a
// JSON array, which parseMessages spreads), each as the provider sent it; with stripIDs
// (storeOff) without top-level "id", and reasoning items without encrypted_content left out.
func modelView(raws []json.RawMessage, stripIDs bool) json.RawMessage {
	if stripIDs {
		out := make([]json.RawMessage, 0, len(raws))
		for _, r := range raws {
			v := gjson.ParseBytes(r)
			if v.Get("type").Str == "reasoning" && v.Get("encrypted_content").Str == "" {
				continue
			}
			if v.Get("id").Exists() {
				if b, err := sjson.DeleteBytes(r, "id"); err == nil {
					r = b
				}
			}
			out = append(out, r)
		}
		raws = out
	}
	return joinRaw("[", raws, "]")
}

// responsesDigest is the digest of the assistant message the client holds once it sends back
// the output items it saw: as messageDigest reads that message.
func responsesDigest(items []json.RawMessage) digester {
	var dg digester
	msgs, err := parseMessages(wire.Responses, items)
	if err != nil {
		return dg
	}
	for _, m := range msgs {
		if m.Role == wire.RoleAssistant {
			dg.message(m)
		}
	}
	return dg
}

// hiddenOnlyItem is the assistant message item the client gets, and the model's view holds,
// in place of an answer whose every item the proxy hid (hiddenOnlyText). It has no id: one
// the provider did not make would fail the request that sends the item back.
func hiddenOnlyItem() json.RawMessage {
	return json.RawMessage(`{"type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"text":` +
		string(jsonStr(hiddenOnlyText)) + `}]}`)
}

// hiddenOnlyView is the model's view of an answer whose every item the proxy hid.
var hiddenOnlyView = modelView([]json.RawMessage{hiddenOnlyItem()}, false)

// responsesUsage reads a Responses usage object; input_tokens includes the cached tokens,
// which usage.input does not.
func responsesUsage(v gjson.Result) usage {
	cached := int(v.Get("input_tokens_details.cached_tokens").Int())
	return usage{input: int(v.Get("input_tokens").Int()) - cached, output: int(v.Get("output_tokens").Int()), cacheRead: cached,
		reasoning: int(v.Get("output_tokens_details.reasoning_tokens").Int())}
}

func setResponsesUsage(b []byte, path string, u usage) []byte {
	b, _ = sjson.SetBytes(b, path+".input_tokens", u.input+u.cacheRead)
	b, _ = sjson.SetBytes(b, path+".input_tokens_details.cached_tokens", u.cacheRead)
	b, _ = sjson.SetBytes(b, path+".output_tokens", u.output)
	b, _ = sjson.SetBytes(b, path+".output_tokens_details.reasoning_tokens", u.reasoning)
	b, _ = sjson.SetBytes(b, path+".total_tokens", u.input+u.cacheRead+u.output)
	return b
}
