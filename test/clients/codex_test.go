package clients

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/condense-dev/condense/internal/upstreamfake"
)

// TestCodex drives the real Codex CLI (`codex exec`, then `codex exec resume --last` twice)
// through the proxy over the Responses API, pointed at it by a model provider in config.toml;
// every tool call of the model comes after an encrypted reasoning item.
func TestCodex(t *testing.T) {
	bin := clientBin(t, "codex")
	repo := scratchRepo(t)
	exec := func(cmd string) upstreamfake.ToolCall {
		return upstreamfake.ToolCall{Name: "exec_command", Input: jsonArgs("cmd", cmd)}
	}
	m := newModel(t, repo, toolSet{read: func(p string) upstreamfake.ToolCall { return exec("cat " + p) }, shell: exec})
	m.reasoning = true
	r := startRig(t, m.respond)
	r.tap.onFirst = m.release
	home := t.TempDir()
	cfg := `model = "gpt-5.4"
model_provider = "condense"

[model_providers.condense]
name = "condense"
base_url = "` + r.URL() + `/v1"
env_key = "CONDENSE_TEST_OPENAI_KEY"
wire_api = "responses"
`
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	env := baseEnv(t.TempDir(), "CODEX_HOME="+home, "CONDENSE_TEST_OPENAI_KEY=sk-condense-test")
	for n := 1; n <= len(plan); n++ {
		args := []string{"exec", "--skip-git-repo-check"}
		if n > 1 {
			args = append(args, "resume", "--last")
		}
		r.run(repo, env, bin, append(args, prompt(n))...)
	}
	checkShrunk(t, r, 0.40) // issue 25: the last request at most 40 % of what Codex sent
	checkSession(t, r, m)
	checkReasoning(t, collect(t, r))
}
