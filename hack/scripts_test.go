// Package hack_test checks what the set-up scripts tell a user on a fresh machine, with fake
// go and apt-get commands in PATH.
package hack_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// fakeBin returns a directory for PATH holding the scripts given (name → body) and links to
// the real commands named.
func fakeBin(t *testing.T, scripts map[string]string, real ...string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/bash\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range real {
		p, err := exec.LookPath(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := os.Symlink(p, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// run runs a script of this directory with env and returns its standard output and error.
func run(t *testing.T, env []string, script string, args ...string) (string, string) {
	t.Helper()
	cmd := exec.Command("/bin/bash", append([]string{script}, args...)...)
	cmd.Env = env
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\nstdout: %s\nstderr: %s", script, args, err, out.String(), errOut.String())
	}
	return out.String(), errOut.String()
}

// TestInstallK8sToolsReportsEachTool: the tools missing from the cache are announced, then
// each is built with its own progress line and its measured time; a second run builds and
// says nothing, and standard output is only the bin directory.
func TestInstallK8sToolsReportsEachTool(t *testing.T) {
	stages := t.TempDir()
	for _, f := range []string{"node/fast/node-initialize.yaml", "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
		"pod/fast/pod-ready.yaml", "pod/fast/pod-complete.yaml", "pod/fast/pod-delete.yaml"} {
		p := filepath.Join(stages, "kustomize", "stage", f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("kind: Stage\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// go build -o OUT writes OUT; go list prints the stages' module directory.
	fakeGo := `case $1 in
build) while [ $# -gt 0 ]; do if [ "$1" = -o ]; then printf 'bin\n' >"$2"; chmod +x "$2"; fi; shift; done ;;
mod) ;;
list) echo "` + stages + `" ;;
esac
`
	path := fakeBin(t, map[string]string{"go": fakeGo}) + ":" + os.Getenv("PATH")
	env := []string{"PATH=" + path, "HOME=" + t.TempDir(), "CONDENSE_TOOLS_DIR=" + t.TempDir()}
	out, stderr := run(t, env, "install-k8s-tools.sh", "kwok", "helm")
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	want := []*regexp.Regexp{
		regexp.MustCompile(`^hack: building 2 of 2 tools from Go modules into \S+ \(cached afterwards\): kwok helm$`),
		regexp.MustCompile(`^hack: \[1/2\] building kwok$`),
		regexp.MustCompile(`^hack: \[1/2\] built kwok in \d+s$`),
		regexp.MustCompile(`^hack: \[2/2\] building helm$`),
		regexp.MustCompile(`^hack: \[2/2\] built helm in \d+s$`),
		regexp.MustCompile(`^hack: built 2 tools in \d+s$`),
		regexp.MustCompile(`^hack: fetching kwok's stage definitions`),
	}
	if len(lines) != len(want) {
		t.Fatalf("stderr:\n%s", stderr)
	}
	for i, re := range want {
		if !re.MatchString(lines[i]) {
			t.Errorf("line %d = %q, want %s", i+1, lines[i], re)
		}
	}
	bin := strings.TrimSpace(out)
	if _, err := os.Stat(filepath.Join(bin, "helm")); err != nil || strings.Contains(out, "\n"+"hack") {
		t.Fatalf("stdout %q: %v", out, err)
	}
	if out2, stderr2 := run(t, env, "install-k8s-tools.sh", "kwok", "helm"); out2 != out || stderr2 != "" {
		t.Fatalf("second run: stdout %q, stderr %q", out2, stderr2)
	}
}

// TestAptInstallsAreAnnounced: when redis-server or chromium is missing, each apt-get run is
// preceded by a line saying what it installs, and the install's time is reported.
func TestAptInstallsAreAnnounced(t *testing.T) {
	for script, pkgs := range map[string]string{"install-redis.sh": "redis-server redis-tools", "install-chromium.sh": "chromium"} {
		t.Run(script, func(t *testing.T) {
			// apt-get install creates each package as a command next to itself.
			fakeApt := `echo "fake-apt-get $*" >&2
if [ "$1" = install ]; then for p in "$@"; do case $p in -*|install) ;; *) printf '#!/bin/true\n' >"${BASH_SOURCE[0]%/*}/$p"; chmod +x "${BASH_SOURCE[0]%/*}/$p" ;; esac; done; fi
`
			dir := fakeBin(t, map[string]string{"apt-get": fakeApt, "sudo": `exec "$@"` + "\n"}, "bash", "env", "id", "chmod", "dirname")
			_, stderr := run(t, []string{"PATH=" + dir}, script)
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			first := strings.Fields(pkgs)[0]
			want := []*regexp.Regexp{
				regexp.MustCompile(`^hack: ` + first + ` not found: apt-get update$`),
				regexp.MustCompile(`^fake-apt-get update -qq$`),
				regexp.MustCompile(`^hack: apt-get update took \d+s; apt-get install -y ` + pkgs + `$`),
				regexp.MustCompile(`^fake-apt-get install -y -qq ` + pkgs + `$`),
				regexp.MustCompile(`^hack: installed ` + pkgs + ` in \d+s$`),
			}
			if len(lines) != len(want) {
				t.Fatalf("stderr:\n%s", stderr)
			}
			for i, re := range want {
				if !re.MatchString(lines[i]) {
					t.Errorf("line %d = %q, want %s", i+1, lines[i], re)
				}
			}
			if _, stderr := run(t, []string{"PATH=" + dir}, script); stderr != "" {
				t.Fatalf("second run, %s installed: %q", first, stderr)
			}
		})
	}
}
