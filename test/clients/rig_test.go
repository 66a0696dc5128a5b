package clients

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/condense-dev/condense/internal/testutil/needs"
	"github.com/condense-dev/condense/internal/upstreamfake"
)

// EnvClientsBin names the directory holding the agent CLIs (hack/install-clients.sh prints it).
const EnvClientsBin = "CONDENSE_CLIENTS_BIN"

// condenseBin is the condense binary TestMain builds from this checkout.
var condenseBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "condense-clients-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	condenseBin = filepath.Join(dir, "condense")
	build := exec.Command("go", "build", "-o", condenseBin, "./cmd/condense")
	build.Dir = filepath.Join("..", "..")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building condense:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// clientBin returns the path of an agent CLI, or skips (fails under CONDENSE_REQUIRE_TOOLS=1).
func clientBin(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv(EnvClientsBin)
	if dir == "" {
		needs.Missing(t, "the agent CLIs are not installed: run hack/install-clients.sh and set $%s to the directory it prints", EnvClientsBin)
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		needs.Missing(t, "%s not found in $%s (%s)", name, EnvClientsBin, dir)
	}
	return p
}

// rig is one agent session's world: the fake provider, a condense proxy process in front of
// it, and a tap between the agent and the proxy that records what the agent sent.
type rig struct {
	t        *testing.T
	up       *upstreamfake.Server
	tap      *tap
	store    string // bolt file of the proxy's store
	health   string // http://host:port of the proxy's health and admin listener
	proc     *exec.Cmd
	procLog  *syncBuffer
	stopOnce sync.Once
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startRig starts the fake provider answering with model, a proxy with the extractive
// summarizer and a flush at every final answer, and the tap; the agent talks to rig.URL().
func startRig(t *testing.T, model upstreamfake.Responder) *rig {
	t.Helper()
	return startRigEngine(t, model, "")
}

// startRigEngine is startRig with more lines of the proxy's engine block (indented by two).
func startRigEngine(t *testing.T, model upstreamfake.Responder, engine string) *rig {
	t.Helper()
	r := &rig{t: t, up: upstreamfake.Start(), procLog: &syncBuffer{}}
	t.Cleanup(r.up.Close)
	r.up.SetResponder(model)
	dir := t.TempDir()
	r.store = filepath.Join(dir, "sessions.db")
	proxyAddr, healthAddr := freePort(t), freePort(t)
	r.health = "http://" + healthAddr
	cfg := fmt.Sprintf(`apiVersion: condense.dev/config/v1
kind: ProxyConfig
listen: {proxy: %q, health: %q, metrics: ""}
upstreams: {anthropic: %q, openai: %q}
store: {url: "bolt:%s"}
engine:
  trigger: {mode: agent-message, cacheAware: false, midRun: false}
%slimits: {flushWaitTimeout: 10s}
`, proxyAddr, healthAddr, r.up.URL, r.up.URL+"/v1", r.store, engine)
	cfgPath := filepath.Join(dir, "condense.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	r.proc = exec.Command(condenseBin, "proxy", "--config", cfgPath)
	r.proc.Stdout, r.proc.Stderr = r.procLog, r.procLog
	if err := r.proc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(r.health + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the proxy did not become ready: %v\n%s", err, r.procLog.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.tap = startTap(t, "http://"+proxyAddr)
	return r
}

// URL is the base URL the agent is pointed at (the tap in front of the proxy).
func (r *rig) URL() string { return r.tap.srv.URL }

// stop ends the proxy process (SIGTERM, as Kubernetes does) and waits for it.
func (r *rig) stop() {
	r.stopOnce.Do(func() {
		if r.proc.Process == nil {
			return
		}
		_ = r.proc.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- r.proc.Wait() }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = r.proc.Process.Kill()
			<-done
			r.t.Errorf("the proxy did not exit within 20 s of SIGTERM\n%s", r.procLog.String())
		}
	})
}

// sessionInfo is one line of `condense store ls --json`.
type sessionInfo struct {
	Session string           `json:"session"`
	Version uint64           `json:"version"`
	Stats   map[string]int64 `json:"stats"`
}

// sessions stops the proxy and lists the sessions its store holds, with `condense store ls`.
func (r *rig) sessions() []sessionInfo {
	r.t.Helper()
	r.stop()
	out, err := exec.Command(condenseBin, "store", "ls", "--json", "--store", "bolt:"+r.store).Output()
	if err != nil {
		r.t.Fatalf("condense store ls: %v", err)
	}
	var infos []sessionInfo
	if err := json.Unmarshal(out, &infos); err != nil {
		r.t.Fatalf("condense store ls --json: %v\n%s", err, out)
	}
	return infos
}

// run runs an agent CLI to its end in dir with env, and returns its combined output.
func (r *rig) run(dir string, env []string, bin string, args ...string) string {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("%s %s: %v\n%s\nproxy log:\n%s", filepath.Base(bin), strings.Join(args, " "), err, out, r.procLog.String())
	}
	return string(out)
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a process's two streams.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// HeaderSeq numbers each agent request; the proxy forwards unknown headers, so the provider
// sees which agent request each of its requests belongs to (continuations share one).
const HeaderSeq = "X-Clients-Test-Seq"

// exchange is one agent request as the tap saw it, with its response as it arrived.
type exchange struct {
	Seq    int
	Method string
	Path   string
	Header http.Header
	Body   []byte
	Status int
	// Response is the response body; FirstByte is when its first bytes reached the tap.
	Response  []byte
	FirstByte time.Time
}

// tap forwards every agent request to the proxy and records both directions. Responses are
// relayed as they arrive, so a stream stays a stream.
type tap struct {
	srv    *httptest.Server
	target string
	mu     sync.Mutex
	ex     []*exchange
	// onFirst is called with a request's seq when the first bytes of its response arrive.
	onFirst func(seq int)
}

func startTap(t *testing.T, target string) *tap {
	tp := &tap{target: target}
	tp.srv = httptest.NewServer(http.HandlerFunc(tp.serve))
	t.Cleanup(tp.srv.Close)
	return tp
}

func (tp *tap) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	tp.mu.Lock()
	ex := &exchange{Seq: len(tp.ex) + 1, Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	tp.ex = append(tp.ex, ex)
	onFirst := tp.onFirst
	tp.mu.Unlock()
	up, err := http.NewRequestWithContext(r.Context(), r.Method, tp.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	up.Header = r.Header.Clone()
	up.Header.Set(HeaderSeq, fmt.Sprint(ex.Seq))
	up.Header.Del("Accept-Encoding") // the tap reads what it relays
	resp, err := http.DefaultTransport.RoundTrip(up)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		if k == "Content-Length" {
			continue
		}
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	fl, _ := w.(http.Flusher)
	var got bytes.Buffer
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if got.Len() == 0 {
				tp.mu.Lock()
				ex.FirstByte = time.Now()
				tp.mu.Unlock()
				if onFirst != nil {
					onFirst(ex.Seq)
				}
			}
			got.Write(buf[:n])
			_, _ = w.Write(buf[:n])
			if fl != nil {
				fl.Flush()
			}
		}
		if err != nil {
			break
		}
	}
	tp.mu.Lock()
	ex.Status, ex.Response = resp.StatusCode, got.Bytes()
	tp.mu.Unlock()
}

// exchanges returns what the tap recorded so far.
func (tp *tap) exchanges() []*exchange {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([]*exchange(nil), tp.ex...)
}
