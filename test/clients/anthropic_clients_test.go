package clients

import (
	"os"
	"path/filepath"
	"testing"
)

// baseEnv is a minimal environment for an agent CLI with its own home directory.
func baseEnv(home string, extra ...string) []string {
	return append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "TERM=dumb", "NO_COLOR=1", "LANG=C.UTF-8"}, extra...)
}

// TestClaudeCode drives the real Claude Code CLI (`claude -p`, then `--continue` twice)
// through the proxy, pointed at it by ANTHROPIC_BASE_URL alone.
func TestClaudeCode(t *testing.T) {
	bin := clientBin(t, "claude")
	repo := scratchRepo(t)
	m := newModel(t, repo, readShellTools("Read", "file_path", "Bash", true))
	r := startRig(t, m.respond)
	r.tap.onFirst = m.release
	env := baseEnv(t.TempDir(), "ANTHROPIC_BASE_URL="+r.URL(), "ANTHROPIC_API_KEY=sk-ant-condense-test",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1", "IS_SANDBOX=1")
	for n := 1; n <= len(plan); n++ {
		args := []string{"-p", prompt(n), "--dangerously-skip-permissions"}
		if n > 1 {
			args = append(args, "--continue")
		}
		r.run(repo, env, bin, args...)
	}
	checkSession(t, r, m)
}

// TestPi drives the real pi coding agent (`pi -p`, then `--continue` twice) through the proxy,
// pointed at it by a provider entry with its baseUrl in ~/.pi/agent/models.json.
func TestPi(t *testing.T) {
	bin := clientBin(t, "pi")
	repo := scratchRepo(t)
	m := newModel(t, repo, readShellTools("read", "path", "bash", false))
	r := startRig(t, m.respond)
	r.tap.onFirst = m.release
	home := t.TempDir()
	models := `{"providers":{"condense":{"baseUrl":"` + r.URL() + `","api":"anthropic-messages","apiKey":"sk-ant-condense-test",` +
		`"models":[{"id":"claude-sonnet-4-5","reasoning":false}]}}}`
	if err := os.MkdirAll(filepath.Join(home, ".pi", "agent"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".pi", "agent", "models.json"), []byte(models), 0o600); err != nil {
		t.Fatal(err)
	}
	env := baseEnv(home)
	for n := 1; n <= len(plan); n++ {
		args := []string{"-p", "--provider", "condense", "--model", "claude-sonnet-4-5"}
		if n > 1 {
			args = append(args, "--continue")
		}
		r.run(repo, env, bin, append(args, prompt(n))...)
	}
	checkSession(t, r, m)
}
