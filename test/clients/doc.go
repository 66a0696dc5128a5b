// Package clients is the real-client suite: it drives the agent CLIs users run (Claude Code,
// Codex, pi, opencode, installed by hack/install-clients.sh) and the official SDKs through a condense
// proxy process against the fake provider, and checks what the provider received.
package clients
