package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/store/storetest"
	"github.com/condense-dev/condense/internal/testutil/redistest"
)

// openRedis opens a store on url with a unique key prefix per test so that one server can be
// shared by many subtests, and the idle TTL as a URL parameter.
func openRedis(t *testing.T, url string, ttl time.Duration) store.Store {
	t.Helper()
	sep := "?"
	for _, c := range url {
		if c == '?' {
			sep = "&"
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := store.Open(ctx, url+sep+"ttl="+ttl.String())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRedisContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, ttl time.Duration) store.Store {
		// A fresh server per subtest keeps List exact; starting one takes a few milliseconds.
		return openRedis(t, redistest.Start(t, nil).URL(), ttl)
	})
}

func TestRedisClusterContract(t *testing.T) {
	c := redistest.StartCluster(t)
	n := 0
	storetest.Run(t, func(t *testing.T, ttl time.Duration) store.Store {
		n++
		// One cluster for the whole suite; a per-subtest key prefix keeps List exact.
		return openRedis(t, c.URL()+"&prefix=t"+itoa(n), ttl)
	})
}

func TestRedisSentinelContract(t *testing.T) {
	sentinel := redistest.StartSentinel(t, redistest.Start(t, nil))
	n := 0
	storetest.Run(t, func(t *testing.T, ttl time.Duration) store.Store {
		n++
		// The master is found through the Sentinel; a per-subtest prefix keeps List exact.
		return openRedis(t, sentinel.URL()+"&prefix=s"+itoa(n), ttl)
	})
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}
