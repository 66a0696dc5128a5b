package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/condense-dev/condense/internal/sessionindex"
	"github.com/condense-dev/condense/internal/store"
)

// storeAddressMap maps Redis host:port addresses in the store URLs the operator opens (FROM=TO,
// --store-address-map) so that `condense manager` outside the cluster reaches a managed Redis's
// in-cluster Service through a local address. Empty: URLs are opened unchanged.
type storeAddressMap map[string]string

// parseStoreAddressMap parses FROM=TO pairs, both host:port.
func parseStoreAddressMap(pairs []string) (storeAddressMap, error) {
	m := storeAddressMap{}
	for _, p := range pairs {
		from, to, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok {
			return nil, fmt.Errorf("--store-address-map %q: want FROM=TO with host:port on both sides", p)
		}
		for _, a := range []string{from, to} {
			if _, _, err := net.SplitHostPort(a); err != nil {
				return nil, fmt.Errorf("--store-address-map %q: %q is not host:port: %w", p, a, err)
			}
		}
		m[from] = to
	}
	return m, nil
}

// rewrite replaces every mapped address in a store URL: the URL's host and each addr= query
// value (the extra seed nodes of the redis+cluster:// and redis+sentinel:// forms). URLs that
// do not parse are returned unchanged so the store reports its own error.
func (m storeAddressMap) rewrite(raw string) string {
	if len(m) == 0 {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	if to, ok := m[u.Host]; ok {
		u.Host = to
	}
	q := u.Query()
	if addrs, ok := q["addr"]; ok {
		for i, a := range addrs {
			if to, ok := m[a]; ok {
				addrs[i] = to
			}
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// opener wraps next so that it opens rewritten URLs.
func (m storeAddressMap) opener(next sessionindex.Opener) sessionindex.Opener {
	if len(m) == 0 {
		return next
	}
	return func(ctx context.Context, raw string) (store.Store, error) {
		return next(ctx, m.rewrite(raw))
	}
}
