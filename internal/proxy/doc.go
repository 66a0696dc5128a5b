// Package proxy is the condense pruning proxy for the Anthropic Messages, OpenAI Chat and
// Responses APIs: it renders each request against its session's pruning state, relays the
// answer and fails open. Behaviour: docs/proxy.md; files and rationale: docs/design/proxy.md.
package proxy
