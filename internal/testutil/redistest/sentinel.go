package redistest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Sentinel is a running redis-server in Sentinel mode monitoring one master.
type Sentinel struct {
	// Server is the Sentinel process (Addr, Port, Kill, Restart, Do).
	*Server
	// MasterName is the name the master is monitored under.
	MasterName string
	// Master is the monitored master.
	Master *Server
}

// URL returns redis+sentinel://127.0.0.1:PORT?master_name=NAME, the store.Open form.
func (s *Sentinel) URL() string {
	return "redis+sentinel://" + s.Addr + "?master_name=" + s.MasterName
}

// StartSentinel starts a Sentinel on a free loopback port that monitors master under the
// name "condense" (quorum 1) and waits until it reports the master's address. It skips when
// redis-server is absent.
func StartSentinel(tb testing.TB, master *Server) *Sentinel {
	tb.Helper()
	requireBinary(tb)
	const name = "condense"
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort(false)
		if err != nil {
			tb.Fatalf("redistest: find a free port: %v", err)
		}
		dir := tb.TempDir()
		conf := filepath.Join(dir, "sentinel.conf")
		cfg := fmt.Sprintf("port %d\nbind 127.0.0.1\nprotected-mode no\ndaemonize no\ndir %s\nlogfile %s\n"+
			"sentinel monitor %s 127.0.0.1 %d 1\nsentinel down-after-milliseconds %s 2000\nsentinel failover-timeout %s 10000\n",
			port, dir, filepath.Join(dir, "redis-"+strconv.Itoa(port)+".log"), name, master.Port, name, name)
		if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
			tb.Fatalf("redistest: write sentinel config: %v", err)
		}
		s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), Port: port, Dir: dir, tb: tb, args: []string{conf, "--sentinel"}}
		if lastErr = s.start(); lastErr != nil {
			continue
		}
		tb.Cleanup(s.Kill)
		deadline := time.Now().Add(10 * time.Second)
		for {
			addr, err := s.Do("SENTINEL", "get-master-addr-by-name", name)
			if err == nil && strings.Replace(addr, "\n", ":", 1) == master.Addr {
				return &Sentinel{Server: s, MasterName: name, Master: master}
			}
			if time.Now().After(deadline) {
				tb.Fatalf("redistest: sentinel does not report master %s: %q, %v", master.Addr, addr, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	tb.Fatalf("redistest: start sentinel: %v", lastErr)
	return nil
}
