// Package proxy is the condense pruning proxy: an HTTP server speaking the Anthropic Messages
// and OpenAI Chat Completions APIs that loads a session's pruning state, renders a pruned
// request, forwards it to the provider, relays the response (SSE event by event), answers
// context_tree_query calls itself, and starts flushes. Everything that can fail fails open:
// the client's request is then forwarded unchanged. See docs/proxy.md.
package proxy
