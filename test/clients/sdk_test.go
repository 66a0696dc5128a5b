package clients

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/condense-dev/condense/internal/upstreamfake"
)

// sdkTools are the tools of the SDK agents: read a file, run a shell command.
var sdkTools = toolSet{
	read: func(p string) upstreamfake.ToolCall {
		return upstreamfake.ToolCall{Name: "read", Input: jsonArgs("path", p)}
	},
	shell: func(c string) upstreamfake.ToolCall {
		return upstreamfake.ToolCall{Name: "bash", Input: jsonArgs("command", c)}
	},
}

const sdkSystem = "You are a coding agent. Use the read and bash tools to look at the repository."

var sdkSchemas = map[string]map[string]any{
	"read": {"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}, "required": []string{"path"}},
	"bash": {"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}, "required": []string{"command"}},
}

// runTool executes one tool call of an SDK agent in repo, as an agent harness would.
func runTool(repo, name string, input []byte) (out string, isErr bool) {
	var args struct{ Path, Command string }
	if err := json.Unmarshal(input, &args); err != nil {
		return "bad arguments: " + err.Error(), true
	}
	switch name {
	case "read":
		b, err := os.ReadFile(args.Path)
		if err != nil {
			return err.Error(), true
		}
		return string(b), false
	case "bash":
		cmd := exec.Command("sh", "-c", args.Command)
		cmd.Dir = repo
		b, err := cmd.CombinedOutput()
		if err != nil {
			return string(b) + "\n" + err.Error(), true
		}
		return string(b), false
	}
	return "unknown tool " + name, true
}

func sdkContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestAnthropicSDK runs a three-prompt agent loop with anthropic-sdk-go through the proxy,
// streaming the second prompt.
func TestAnthropicSDK(t *testing.T) {
	repo := scratchRepo(t)
	m := newModel(t, repo, sdkTools)
	r := startRig(t, m.respond)
	r.tap.onFirst = m.release
	ctx := sdkContext(t)
	c := anthropic.NewClient(aoption.WithBaseURL(r.URL()), aoption.WithAPIKey("sk-ant-condense-test"), aoption.WithMaxRetries(0))
	var tools []anthropic.ToolUnionParam
	for _, name := range []string{"read", "bash"} {
		tools = append(tools, anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: name,
			InputSchema: anthropic.ToolInputSchemaParam{Properties: sdkSchemas[name]["properties"], Required: sdkSchemas[name]["required"].([]string)}}})
	}
	var msgs []anthropic.MessageParam
	for n := 1; n <= len(plan); n++ {
		msgs = append(msgs, anthropic.NewUserMessage(anthropic.NewTextBlock(prompt(n))))
		for round := 0; ; round++ {
			if round > 20 {
				t.Fatalf("P%d does not end", n)
			}
			params := anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 1024, Tools: tools, Messages: msgs,
				System: []anthropic.TextBlockParam{{Text: sdkSystem}}}
			var msg anthropic.Message
			if n == 2 {
				st := c.Messages.NewStreaming(ctx, params)
				for st.Next() {
					if err := msg.Accumulate(st.Current()); err != nil {
						t.Fatal(err)
					}
				}
				if err := st.Err(); err != nil {
					t.Fatal(err)
				}
			} else {
				got, err := c.Messages.New(ctx, params)
				if err != nil {
					t.Fatal(err)
				}
				msg = *got
			}
			msgs = append(msgs, msg.ToParam())
			if msg.StopReason != anthropic.StopReasonToolUse {
				break
			}
			var results []anthropic.ContentBlockParamUnion
			for _, b := range msg.Content {
				if b.Type == "tool_use" {
					out, isErr := runTool(repo, b.Name, b.Input)
					results = append(results, anthropic.NewToolResultBlock(b.ID, out, isErr))
				}
			}
			msgs = append(msgs, anthropic.NewUserMessage(results...))
		}
	}
	checkSession(t, r, m)
}

// TestOpenAIChatSDK runs a three-prompt agent loop with openai-go's Chat Completions client
// through the proxy, streaming the second prompt.
func TestOpenAIChatSDK(t *testing.T) {
	repo := scratchRepo(t)
	m := newModel(t, repo, sdkTools)
	r := startRig(t, m.respond)
	r.tap.onFirst = m.release
	ctx := sdkContext(t)
	c := openai.NewClient(ooption.WithBaseURL(r.URL()+"/v1/"), ooption.WithAPIKey("sk-condense-test"), ooption.WithMaxRetries(0))
	var tools []openai.ChatCompletionToolUnionParam
	for _, name := range []string{"read", "bash"} {
		tools = append(tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: name, Parameters: sdkSchemas[name]}))
	}
	msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(sdkSystem)}
	for n := 1; n <= len(plan); n++ {
		msgs = append(msgs, openai.UserMessage(prompt(n)))
		for round := 0; ; round++ {
			if round > 20 {
				t.Fatalf("P%d does not end", n)
			}
			msg, finish := chatTurn(ctx, t, &c, openai.ChatCompletionNewParams{Model: "gpt-5.4", Tools: tools, Messages: msgs}, n == 2)
			msgs = append(msgs, msg.ToParam())
			if finish != "tool_calls" {
				break
			}
			for _, tc := range msg.ToolCalls {
				out, _ := runTool(repo, tc.Function.Name, []byte(tc.Function.Arguments))
				msgs = append(msgs, openai.ToolMessage(out, tc.ID))
			}
		}
	}
	checkSession(t, r, m)
}

// chatTurn sends one Chat Completions request, streamed (with the usage chunk) or not, and
// returns the first choice's message and finish reason as the SDK gives them.
func chatTurn(ctx context.Context, t *testing.T, c *openai.Client, params openai.ChatCompletionNewParams, stream bool) (openai.ChatCompletionMessage, string) {
	t.Helper()
	if !stream {
		got, err := c.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		return got.Choices[0].Message, got.Choices[0].FinishReason
	}
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	st := c.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	for st.Next() {
		acc.AddChunk(st.Current())
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	return acc.Choices[0].Message, acc.Choices[0].FinishReason
}

// TestOpenAIResponsesSDK runs a four-prompt agent loop with openai-go's Responses client through
// the proxy, streaming the second prompt; the model's output items go back as input as sent.
func TestOpenAIResponsesSDK(t *testing.T) {
	repo := scratchRepo(t)
	m := newModel(t, repo, sdkTools)
	r := startRig(t, m.respond)
	r.tap.onFirst = m.release
	ctx := sdkContext(t)
	c := openai.NewClient(ooption.WithBaseURL(r.URL()+"/v1/"), ooption.WithAPIKey("sk-condense-test"), ooption.WithMaxRetries(0))
	var tools []responses.ToolUnionParam
	for _, name := range []string{"read", "bash"} {
		tools = append(tools, responses.ToolParamOfFunction(name, sdkSchemas[name], false))
	}
	var input responses.ResponseInputParam
	for n := 1; n <= len(plan); n++ {
		input = append(input, responses.ResponseInputItemParamOfMessage(prompt(n), responses.EasyInputMessageRoleUser))
		for round := 0; ; round++ {
			if round > 20 {
				t.Fatalf("P%d does not end", n)
			}
			params := responses.ResponseNewParams{Model: "gpt-5.4", Tools: tools, Instructions: openai.String(sdkSystem),
				Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}}
			var resp responses.Response
			if n == 2 {
				st := c.Responses.NewStreaming(ctx, params)
				for st.Next() {
					if ev := st.Current(); ev.Type == "response.completed" {
						resp = ev.Response
					}
				}
				if err := st.Err(); err != nil {
					t.Fatal(err)
				}
			} else {
				got, err := c.Responses.New(ctx, params)
				if err != nil {
					t.Fatal(err)
				}
				resp = *got
			}
			calls := 0
			for _, item := range resp.Output {
				var in responses.ResponseInputItemUnionParam
				if err := json.Unmarshal([]byte(item.RawJSON()), &in); err != nil {
					t.Fatalf("output item as input: %v", err)
				}
				input = append(input, in)
				if item.Type == "function_call" {
					calls++
					out, _ := runTool(repo, item.Name, []byte(item.Arguments.OfString))
					o := responses.ResponseInputItemParamOfFunctionCallOutput(out)
					o.OfFunctionCallOutput.CallID = openai.String(item.CallID)
					input = append(input, o)
				}
			}
			if calls == 0 {
				break
			}
		}
	}
	checkSession(t, r, m)
}
