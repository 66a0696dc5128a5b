// Package redistest starts real redis-server processes for tests on free loopback ports: a
// standalone server (optionally append-only, surviving Kill and Restart) and a three-master
// Cluster, stopped by t.Cleanup. Without redis-server, Start and StartCluster skip the test.
package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/condense-dev/condense/internal/testutil/needs"
)

// Binary is the redis-server executable looked up in PATH.
const Binary = "redis-server"

// Available reports whether redis-server can be found in PATH.
func Available() bool {
	_, err := exec.LookPath(Binary)
	return err == nil
}

// Options configures Start. The zero value (or nil) is a plain in-memory server.
type Options struct {
	// AOF enables the append-only file with appendfsync always, so every acknowledged write
	// survives Kill followed by Restart.
	AOF bool
	// Dir is the server's data directory; empty means a fresh t.TempDir().
	Dir string
	// Args are extra redis-server arguments, e.g. []string{"--maxmemory", "10mb"}.
	Args []string
}

// Server is one running (or killed) redis-server process.
type Server struct {
	// Addr is host:port on 127.0.0.1.
	Addr string
	// Port is the TCP port.
	Port int
	// Dir is the data directory (kept across Restart).
	Dir string

	tb   testing.TB
	args []string
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Start launches redis-server on a free loopback port and waits until it answers PING.
// It skips the test when redis-server is absent and fails it when the server cannot start.
func Start(tb testing.TB, opts *Options) *Server {
	tb.Helper()
	if opts == nil {
		opts = &Options{}
	}
	requireBinary(tb)
	dir := opts.Dir
	if dir == "" {
		dir = tb.TempDir()
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort(false)
		if err != nil {
			tb.Fatalf("redistest: find a free port: %v", err)
		}
		s := newServer(tb, port, dir, opts.AOF, opts.Args)
		if lastErr = s.start(); lastErr == nil {
			tb.Cleanup(s.Kill)
			return s
		}
	}
	tb.Fatalf("redistest: start redis-server: %v", lastErr)
	return nil
}

func requireBinary(tb testing.TB) {
	tb.Helper()
	if !Available() {
		needs.Missing(tb, "redistest: %s not found in PATH (run hack/install-redis.sh)", Binary)
	}
}

func newServer(tb testing.TB, port int, dir string, aof bool, extra []string) *Server {
	args := []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--protected-mode", "no",
		"--daemonize", "no",
		"--dir", dir,
		"--save", "",
		"--logfile", filepath.Join(dir, "redis-"+strconv.Itoa(port)+".log"),
		"--enable-debug-command", "local",
	}
	if aof {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always", "--aof-load-truncated", "yes")
	} else {
		args = append(args, "--appendonly", "no")
	}
	args = append(args, extra...)
	return &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Port: port, Dir: dir, tb: tb, args: args}
}

func (s *Server) start() error {
	cmd := exec.Command(Binary, s.args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-done:
			return fmt.Errorf("redis-server on port %d exited during startup: %s", s.Port, s.LogTail())
		default:
		}
		if r, err := Do(s.Addr, "PING"); err == nil && r == "PONG" {
			return nil // a server still loading its AOF answers LOADING and is retried
		}
		if time.Now().After(deadline) {
			s.Kill()
			return fmt.Errorf("redis-server on port %d not ready after 10s: %s", s.Port, s.LogTail())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// LogTail returns the end of the server's log file, for failure messages.
func (s *Server) LogTail() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "redis-"+strconv.Itoa(s.Port)+".log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// URL returns redis://127.0.0.1:PORT for store.Open and go-redis.
func (s *Server) URL() string { return "redis://" + s.Addr }

// Kill sends SIGKILL (no shutdown save) to the server and any child it forked (an AOF
// rewrite), and waits for the server to exit. Killing a stopped server is a no-op.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // its process group (Setpgid)
	<-done
}

// Restart kills the server if it runs and starts it again on the same port and data
// directory (so an AOF server reloads every acknowledged write). It fails the test when the
// server cannot come back.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Kill()
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond) // the port may linger briefly
	}
	s.tb.Fatalf("redistest: restart redis-server: %v", err)
}

// Do runs one command on the server and returns its reply (see the package-level Do).
func (s *Server) Do(args ...string) (string, error) { return Do(s.Addr, args...) }

// Cluster is a running three-master Redis Cluster on loopback, without replicas.
type Cluster struct {
	// Nodes are the master servers; node i serves slots [i*16384/3, (i+1)*16384/3).
	Nodes []*Server
}

// Addrs returns every node's host:port.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr
	}
	return out
}

// URL returns redis+cluster://FIRST?addr=SECOND&addr=THIRD, the store.Open form for Cluster.
func (c *Cluster) URL() string {
	a := c.Addrs()
	u := "redis+cluster://" + a[0]
	for i, x := range a[1:] {
		if i == 0 {
			u += "?addr=" + x
		} else {
			u += "&addr=" + x
		}
	}
	return u
}

// StartCluster starts three cluster-enabled redis-server processes on free loopback ports,
// assigns the 16384 slots evenly with CLUSTER ADDSLOTSRANGE, joins them with CLUSTER MEET and
// waits until every node reports cluster_state:ok. It skips when redis-server is absent.
func StartCluster(tb testing.TB) *Cluster {
	tb.Helper()
	requireBinary(tb)
	c := &Cluster{}
	for i := 0; i < 3; i++ {
		var s *Server
		var err error
		for attempt := 0; attempt < 5; attempt++ {
			port, perr := freePort(true)
			if perr != nil {
				tb.Fatalf("redistest: find a free port: %v", perr)
			}
			dir := tb.TempDir()
			s = newServer(tb, port, dir, false, []string{
				"--cluster-enabled", "yes",
				"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
				"--cluster-node-timeout", "3000",
				"--cluster-require-full-coverage", "yes",
			})
			if err = s.start(); err == nil {
				break
			}
		}
		if err != nil {
			tb.Fatalf("redistest: start cluster node: %v", err)
		}
		tb.Cleanup(s.Kill)
		c.Nodes = append(c.Nodes, s)
	}
	for i, n := range c.Nodes {
		lo, hi := i*16384/3, (i+1)*16384/3-1
		if _, err := n.Do("CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi)); err != nil {
			tb.Fatalf("redistest: CLUSTER ADDSLOTSRANGE on %s: %v", n.Addr, err)
		}
	}
	for _, n := range c.Nodes[1:] {
		if _, err := c.Nodes[0].Do("CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(n.Port)); err != nil {
			tb.Fatalf("redistest: CLUSTER MEET %s: %v", n.Addr, err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok := true
		for _, n := range c.Nodes {
			info, err := n.Do("CLUSTER", "INFO")
			if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:3") {
				ok = false
				break
			}
		}
		if ok {
			return c
		}
		if time.Now().After(deadline) {
			info, _ := c.Nodes[0].Do("CLUSTER", "INFO")
			tb.Fatalf("redistest: cluster not ready after 30s:\n%s", info)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freePort returns a loopback port that was free a moment ago; with bus it also checks
// port+10000 (the cluster bus port).
func freePort(bus bool) (int, error) {
	for i := 0; i < 50; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !bus {
			return port, nil
		}
		if port+10000 > 65535 {
			continue
		}
		lb, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		if err != nil {
			continue
		}
		_ = lb.Close()
		return port, nil
	}
	return 0, errors.New("no free port pair for a cluster node")
}

// Do opens a connection to addr, sends one command in RESP and returns the reply: simple
// strings, bulk strings and integers as text, arrays flattened with newlines, nil as "".
// An error reply is returned as an error carrying the server's message.
func Do(addr string, args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return "", err
	}
	return readReply(bufio.NewReader(conn))
}

func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("redistest: empty reply line")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", errors.New(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return "", err
		}
		if n < 0 {
			return "", nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return "", err
		}
		parts := make([]string, 0, max(n, 0))
		for i := 0; i < n; i++ {
			p, err := readReply(r)
			if err != nil {
				return "", err
			}
			parts = append(parts, p)
		}
		return strings.Join(parts, "\n"), nil
	default:
		return "", fmt.Errorf("redistest: unexpected reply %q", line)
	}
}
