package redistest

import (
	"strings"
	"testing"
)

func TestStartKillRestartKeepsAOF(t *testing.T) {
	s := Start(t, &Options{AOF: true})
	if _, err := s.Do("SET", "k", "v1"); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	if s.Running() {
		t.Fatal("server still running after Kill")
	}
	if _, err := s.Do("PING"); err == nil {
		t.Fatal("PING succeeded on a killed server")
	}
	s.Restart()
	got, err := s.Do("GET", "k")
	if err != nil || got != "v1" {
		t.Fatalf("after restart GET k = %q, %v; want v1", got, err)
	}
}

func TestStartWithoutAOFLosesData(t *testing.T) {
	s := Start(t, nil)
	if _, err := s.Do("SET", "k", "v1"); err != nil {
		t.Fatal(err)
	}
	s.Restart()
	got, err := s.Do("EXISTS", "k")
	if err != nil || got != "0" {
		t.Fatalf("EXISTS k after restart without persistence = %q, %v; want 0", got, err)
	}
	if !strings.HasPrefix(s.URL(), "redis://127.0.0.1:") {
		t.Fatalf("URL = %q", s.URL())
	}
}

func TestCluster(t *testing.T) {
	c := StartCluster(t)
	if len(c.Nodes) != 3 {
		t.Fatalf("%d nodes", len(c.Nodes))
	}
	// A key lands on exactly one master; the others redirect with MOVED.
	moved := 0
	for _, n := range c.Nodes {
		if _, err := n.Do("SET", "{tag}k", "v"); err != nil {
			if !strings.HasPrefix(err.Error(), "MOVED ") {
				t.Fatalf("SET on %s: %v", n.Addr, err)
			}
			moved++
		}
	}
	if moved != 2 {
		t.Fatalf("%d nodes answered MOVED, want 2", moved)
	}
	if !strings.HasPrefix(c.URL(), "redis+cluster://127.0.0.1:") || strings.Count(c.URL(), "addr=") != 2 {
		t.Fatalf("URL = %q", c.URL())
	}
}

func TestSentinel(t *testing.T) {
	m := Start(t, nil)
	s := StartSentinel(t, m)
	if got := s.URL(); !strings.HasPrefix(got, "redis+sentinel://127.0.0.1:") || !strings.HasSuffix(got, "?master_name=condense") {
		t.Fatalf("URL = %q", got)
	}
	addr, err := s.Do("SENTINEL", "get-master-addr-by-name", "condense")
	if err != nil || addr != "127.0.0.1\n"+strings.TrimPrefix(m.Addr, "127.0.0.1:") {
		t.Fatalf("master addr = %q, %v", addr, err)
	}
}
