//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/condense-dev/condense/internal/testutil/needs"
)

// toolchain holds the paths of the real binaries the test runs.
type toolchain struct {
	assets     string // KUBEBUILDER_ASSETS: kube-apiserver, etcd, kubectl, kube-controller-manager, kube-scheduler
	kwok       string
	kwokStages string
	helm       string
	kubectl    string
}

// requireToolchain returns the toolchain or skips the test with what is missing.
func requireToolchain(t *testing.T) toolchain {
	t.Helper()
	tc := toolchain{
		assets:     os.Getenv("KUBEBUILDER_ASSETS"),
		kwok:       os.Getenv("KWOK_BIN"),
		kwokStages: os.Getenv("KWOK_STAGES"),
	}
	tools := os.Getenv("CONDENSE_TOOLS_BIN")
	if tc.assets == "" || tc.kwok == "" || tc.kwokStages == "" || tools == "" {
		needs.Missing(t, "the end-to-end test needs KUBEBUILDER_ASSETS (kube-apiserver, etcd, kubectl, kube-controller-manager, "+
			"kube-scheduler), KWOK_BIN, KWOK_STAGES and CONDENSE_TOOLS_BIN (helm, kubectl); `make e2e` sets them "+
			"from hack/install-k8s-tools.sh")
	}
	tc.helm = filepath.Join(tools, "helm")
	tc.kubectl = filepath.Join(tools, "kubectl")
	if _, err := os.Stat(tc.kubectl); err != nil {
		tc.kubectl = filepath.Join(tc.assets, "kubectl")
	}
	for _, p := range []string{
		filepath.Join(tc.assets, "kube-apiserver"), filepath.Join(tc.assets, "etcd"),
		filepath.Join(tc.assets, "kube-controller-manager"), filepath.Join(tc.assets, "kube-scheduler"),
		tc.kwok, tc.kwokStages, tc.helm, tc.kubectl,
	} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("toolchain: %v (run hack/install-k8s-tools.sh)", err)
		}
	}
	return tc
}

// logDir returns the directory child processes log to: $E2E_LOG_DIR, else a new temporary
// directory that is removed after a passing test and kept (and printed) after a failing one.
func logDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("E2E_LOG_DIR"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Logf("child process logs: %s", d)
		return d
	}
	d, err := os.MkdirTemp("", "condense-e2e-logs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("child process logs kept in %s", d)
			return
		}
		_ = os.RemoveAll(d)
	})
	return d
}

// proc is one child process whose output goes to a log file.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// startProc starts a child process logging to dir/name.log; t.Cleanup kills it and waits.
func startProc(t *testing.T, dir, name string, env []string, bin string, args ...string) *proc {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	// Its own process group, so a test binary killed by a signal does not take the terminal's
	// job control with it, and Cleanup can signal the whole group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Cleanup(func() { p.stop() })
	return p
}

// stop sends SIGTERM, then SIGKILL after 5s, to the process group and waits for the exit.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// tail returns the last n lines of the process log.
func (p *proc) tail(n int) string {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// listenAddrs waits until a `condense proxy` log holds its "listening" lines and returns
// what -> address ("proxy", "metrics", "health").
func (p *proc) listenAddrs(t *testing.T, want int, timeout time.Duration) map[string]string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		addrs := map[string]string{}
		if f, err := os.Open(p.log); err == nil {
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				var line struct{ Msg, What, Addr string }
				if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "listening" {
					addrs[line.What] = line.Addr
				}
			}
			f.Close()
		}
		if len(addrs) >= want {
			return addrs
		}
		if p.exited() || time.Now().After(deadline) {
			t.Fatalf("%s did not report %d listeners (exited=%v):\n%s", p.name, want, p.exited(), p.tail(30))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// run runs a command to completion and returns its combined output.
func run(ctx context.Context, env []string, stdin []byte, bin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("%s %s: %w\n%s", filepath.Base(bin), strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// freeAddr returns a loopback address that was free a moment ago (for servers that cannot
// report the port they bound, such as the manager's metrics endpoint).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// eventually polls cond every 100ms until it returns true or timeout passes; the last
// description is reported on failure together with the tails of the given processes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string), procs ...*proc) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		ok, desc := cond()
		if ok {
			return
		}
		last = desc
		for _, p := range procs {
			if p.exited() {
				t.Fatalf("%s: %s exited while waiting: %v\n%s", what, p.name, p.err, p.tail(40))
			}
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, p := range procs {
				fmt.Fprintf(&b, "\n--- %s (last lines) ---\n%s", p.name, p.tail(25))
			}
			t.Fatalf("timed out after %v waiting for %s: %s%s", timeout, what, last, b.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// buildCondense builds the condense binary from this module into dir in the background.
func buildCondense(dir string) (wait func() (string, error)) {
	out := filepath.Join(dir, "condense")
	var (
		once   sync.Once
		result error
		done   = make(chan struct{})
	)
	go func() {
		defer close(done)
		cmd := exec.Command("go", "build", "-o", out, "github.com/condense-dev/condense/cmd/condense")
		if b, err := cmd.CombinedOutput(); err != nil {
			result = fmt.Errorf("go build ./cmd/condense: %w\n%s", err, b)
		}
	}()
	return func() (string, error) {
		once.Do(func() { <-done })
		return out, result
	}
}
