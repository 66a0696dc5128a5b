// Package proxy is the condense pruning proxy: an HTTP server speaking the Anthropic Messages,
// OpenAI Chat Completions and OpenAI Responses APIs that renders each request against its
// session's pruning state, forwards it, relays the answer, answers context_tree_query itself
// and starts flushes. Anything that fails fails open: the client's bytes go upstream
// unchanged. See docs/proxy.md.
//
// The files follow a request in order:
//
//   - request.go: read the body, identify the session (identify.go), parse (parsecache.go)
//   - prepare.go: load and decode the state, build the view, render
//   - forward.go: send upstream under the bounds on the response; passthrough.go: other
//     paths, and Responses requests on history the provider holds, go as they came
//   - relay.go: pick the relay — relay_json.go, or relay_stream.go with
//     relay_stream_anthropic.go, relay_stream_openai.go and relay_stream_responses.go
//     (responses_items.go: a Responses answer's output items)
//   - recovery.go: answer context_tree_query (and text recovery requests), continue upstream,
//     end every relay alike
//   - splice.go: hidden exchanges, re-inserted in the view and stored after the answer
//   - flights.go: flush triggers, flushes in flight, waits
//   - stats.go: the session counters a request writes
//   - warm.go: committed states decoded and rendered before the next request
//
// server.go, options.go, messages.go, boundedmap.go, metrics.go, phases.go, errors.go,
// admin.go (admin API and MCP) and run.go (condense proxy) serve them all. Rationale:
// docs/design/proxy.md.
package proxy
