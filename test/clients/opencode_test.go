package clients

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpencode drives the real opencode CLI (`opencode run`, then `opencode run --continue`
// three times) through the proxy, pointed at it by a provider entry with its baseURL in
// opencode.json, once over Anthropic Messages and once over OpenAI Chat Completions.
func TestOpencode(t *testing.T) {
	bin := clientBin(t, "opencode")
	for _, tc := range []struct {
		name, npm, model, key string
	}{
		{"anthropic", "@ai-sdk/anthropic", "claude-sonnet-4-5", "sk-ant-condense-test"},
		{"openai-compatible", "@ai-sdk/openai-compatible", "gpt-4.1", "sk-condense-test"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo := scratchRepo(t)
			m := newModel(t, repo, readShellTools("read", "filePath", "bash", true))
			r := startRig(t, m.respond)
			r.tap.onFirst = m.release
			home := t.TempDir()
			writeOpencodeConfig(t, home, map[string]any{
				"npm":     tc.npm,
				"name":    "condense",
				"options": map[string]any{"baseURL": r.URL() + "/v1", "apiKey": tc.key},
				"models":  map[string]any{tc.model: map[string]any{"name": tc.model}},
			}, "condense/"+tc.model)
			env := baseEnv(home, opencodeOffline...)
			for n := 1; n <= len(plan); n++ {
				args := []string{"run", "--auto"}
				if n > 1 {
					args = append(args, "--continue")
				}
				r.run(repo, env, bin, append(args, prompt(n))...)
			}
			checkSession(t, r, m)
			for _, s := range r.sessions() {
				if !strings.HasPrefix(s.Session, "opencode-ses_") {
					t.Errorf("session %q is not named by opencode's X-Session-Affinity header", s.Session)
				}
			}
		})
	}
}

// opencodeOffline is the environment that keeps opencode off the network: no update check,
// no models.dev catalogue fetch, no sharing, no LSP download, and npm (which opencode runs to
// install @opencode-ai/plugin into its config directory) offline.
var opencodeOffline = []string{"OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_SHARE=1",
	"OPENCODE_DISABLE_LSP_DOWNLOAD=1", "npm_config_offline=true"}

// writeOpencodeConfig writes home's ~/.config/opencode/opencode.json with provider as the
// "condense" provider and model (provider/model) as the model of every agent.
func writeOpencodeConfig(t *testing.T, home string, provider map[string]any, model string) {
	t.Helper()
	cfg, err := json.Marshal(map[string]any{
		"autoupdate":  false,
		"share":       "disabled",
		"model":       model,
		"small_model": model,
		"provider":    map[string]any{"condense": provider},
	})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(home, ".config", "opencode")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "opencode.json"), cfg, 0o600); err != nil {
		t.Fatal(err)
	}
}
