package main

import (
	"context"
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/store"
)

func TestStoreAddressMapRewrite(t *testing.T) {
	m, err := parseStoreAddressMap([]string{"default-redis.agents.svc:6379=127.0.0.1:7000", "n2:6379=127.0.0.1:7001"})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"redis://default-redis.agents.svc:6379/0":                 "redis://127.0.0.1:7000/0",
		"rediss://user:pw@default-redis.agents.svc:6379/2?ttl=1h": "rediss://user:pw@127.0.0.1:7000/2?ttl=1h",
		"redis+cluster://n1:6379?addr=n2:6379&addr=n3:6379":       "redis+cluster://n1:6379?addr=127.0.0.1%3A7001&addr=n3%3A6379",
		"redis://other.svc:6379/0":                                "redis://other.svc:6379/0",
	}
	for in, want := range cases {
		if got := m.rewrite(in); got != want {
			t.Errorf("rewrite(%q) = %q, want %q", in, got, want)
		}
	}
	var opened string
	open := m.opener(func(_ context.Context, u string) (store.Store, error) { opened = u; return nil, nil })
	_, _ = open(context.Background(), "redis://default-redis.agents.svc:6379/0")
	if opened != "redis://127.0.0.1:7000/0" {
		t.Fatalf("opener opened %q", opened)
	}
	if got := storeAddressMap(nil).rewrite("redis://default-redis.agents.svc:6379/0"); got != "redis://default-redis.agents.svc:6379/0" {
		t.Fatalf("empty map changed the URL: %q", got)
	}
}

func TestStoreAddressMapRejectsBadPairs(t *testing.T) {
	for _, bad := range []string{"no-equals", "host=127.0.0.1:1", "a:1=b"} {
		if _, err := parseStoreAddressMap([]string{bad}); err == nil || !strings.Contains(err.Error(), "--store-address-map") {
			t.Errorf("%q: err = %v", bad, err)
		}
	}
}
