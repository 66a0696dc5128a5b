// Package packaging checks the release artefacts that cannot be exercised by a Docker engine
// here: the Dockerfile's build command is run as-is outside Docker and its output inspected.
package packaging

import (
	"bufio"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Clean(filepath.Join(wd, "..", ".."))
}

// dockerfileBuildCommand returns the `go build` RUN line of the build stage, with the ARG
// defaults substituted.
func dockerfileBuildCommand(t *testing.T, root string) (cmdline string, args map[string]string) {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	args = map[string]string{}
	argRe := regexp.MustCompile(`^ARG (\w+)=(.*)$`)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if m := argRe.FindStringSubmatch(line); m != nil {
			args[m[1]] = m[2]
		}
		if strings.HasPrefix(line, "RUN ") && strings.Contains(line, "go build") {
			cmdline = strings.TrimPrefix(line, "RUN ")
		}
	}
	if cmdline == "" {
		t.Fatal("Dockerfile has no RUN … go build line")
	}
	return cmdline, args
}

func TestDockerfileBuildsStaticBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the whole binary")
	}
	root := repoRoot(t)
	cmdline, args := dockerfileBuildCommand(t, root)
	if !strings.Contains(cmdline, "CGO_ENABLED=0") {
		t.Fatalf("build command must disable cgo: %s", cmdline)
	}
	out := filepath.Join(t.TempDir(), "condense")
	cmdline = strings.ReplaceAll(cmdline, "/out/condense", out)
	cmd := exec.Command("sh", "-c", cmdline)
	cmd.Dir = root
	cmd.Env = os.Environ()
	for k, v := range args {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("Dockerfile build command failed outside Docker: %v\n%s", err, b)
	}
	ef, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatal("binary has an ELF interpreter: it is dynamically linked")
		}
	}
	if libs, _ := ef.ImportedLibraries(); len(libs) > 0 {
		t.Fatalf("binary imports shared libraries %v", libs)
	}
	v, err := exec.Command(out, "version").Output()
	if err != nil {
		t.Fatalf("condense version: %v", err)
	}
	if !strings.Contains(string(v), "condense dev") {
		t.Fatalf("version output %q lacks the stamped version", v)
	}
}

func TestDockerfileRuntimeIsNonRootDistroless(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	froms := regexp.MustCompile(`(?m)^FROM (\S+)`).FindAllStringSubmatch(s, -1)
	if len(froms) < 2 {
		t.Fatalf("want a multi-stage build, got %d stages", len(froms))
	}
	last := froms[len(froms)-1][1]
	if !strings.Contains(last, "distroless/static") || !strings.HasSuffix(last, ":nonroot") {
		t.Fatalf("runtime stage %q is not distroless static nonroot", last)
	}
	if !regexp.MustCompile(`(?m)^USER 65532`).MatchString(s) {
		t.Fatal("runtime stage must run as a non-root uid")
	}
}
