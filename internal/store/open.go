package store

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Open connects to the store named by rawURL: redis://, rediss://, unix://, redis+sentinel://,
// redis+cluster://, bolt:PATH, bolt: or memory:, with options as in docs/store.md. An
// unreachable Redis yields an error satisfying errors.Is(err, ErrUnavailable).
func Open(ctx context.Context, rawURL string) (Store, error) { return open(ctx, rawURL, false) }

// OpenReadOnly opens the store named by rawURL (the forms of Open) for inspection: reads change
// nothing, writes fail with ErrReadOnly, and a missing bolt file is ErrNotFound, not created.
func OpenReadOnly(ctx context.Context, rawURL string) (Store, error) { return open(ctx, rawURL, true) }

func open(ctx context.Context, rawURL string, readOnly bool) (Store, error) {
	scheme, rest, ok := strings.Cut(rawURL, ":")
	if !ok {
		return nil, invalidArg("store URL %q has no scheme", rawURL)
	}
	switch scheme {
	case "memory":
		q, err := queryOf(rest)
		if err != nil {
			return nil, err
		}
		ttl, err := takeTTL(q)
		if err != nil {
			return nil, err
		}
		if err := noExtra(q); err != nil {
			return nil, err
		}
		return newEmbedded(newMemDB(), ttl, readOnly), nil
	case "bolt":
		path, query, _ := strings.Cut(rest, "?")
		path = strings.TrimPrefix(path, "//")
		q, err := url.ParseQuery(query)
		if err != nil {
			return nil, invalidArg("store URL query: %v", err)
		}
		ttl, err := takeTTL(q)
		if err != nil {
			return nil, err
		}
		if err := noExtra(q); err != nil {
			return nil, err
		}
		if path == "" {
			if path, err = DefaultBoltPath(); err != nil {
				return nil, err
			}
		}
		if readOnly {
			return openBoltReadOnly(path, ttl)
		}
		return OpenBolt(path, ttl)
	case "redis", "rediss", "unix", "redis+sentinel", "rediss+sentinel", "redis+cluster", "rediss+cluster":
		return openRedis(ctx, rawURL, readOnly)
	default:
		return nil, invalidArg("unknown store URL scheme %q (want redis, rediss, redis+sentinel, redis+cluster, bolt or memory)", scheme)
	}
}

func queryOf(rest string) (url.Values, error) {
	_, query, _ := strings.Cut(rest, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, invalidArg("store URL query: %v", err)
	}
	return q, nil
}

func takeTTL(q url.Values) (time.Duration, error) {
	v := q.Get("ttl")
	q.Del("ttl")
	if v == "" {
		return DefaultTTL, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, invalidArg("ttl %q is not a non-negative duration", v)
	}
	return d, nil
}

func noExtra(q url.Values) error {
	for k := range q {
		return invalidArg("unknown store URL option %q", k)
	}
	return nil
}

func openRedis(ctx context.Context, rawURL string, readOnly bool) (Store, error) {
	rdb, prefix, ttl, err := RedisClient(rawURL)
	if err != nil {
		return nil, err
	}
	s, err := NewRedisStore(ctx, rdb, prefix, ttl)
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	s.readOnly = readOnly
	return s, nil
}

// RedisClient opens the go-redis client a Redis store URL names, tuned as Open's (no command
// retries, one dial attempt, a 2 s dial timeout unless the URL says otherwise), and returns
// the URL's key prefix ("" for the default) and idle TTL.
func RedisClient(rawURL string) (rdb redis.UniversalClient, prefix string, ttl time.Duration, err error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, "", 0, invalidArg("store URL: %v", err)
	}
	q := u.Query()
	if ttl, err = takeTTL(q); err != nil {
		return nil, "", 0, err
	}
	prefix = q.Get("prefix")
	q.Del("prefix")
	u.RawQuery = q.Encode()
	base, mode, _ := strings.Cut(u.Scheme, "+")
	switch base {
	case "redis", "rediss", "unix":
	default:
		return nil, "", 0, invalidArg("store URL scheme %q is not a Redis one", u.Scheme)
	}
	u.Scheme = base
	switch mode {
	case "":
		o, err := redis.ParseURL(u.String())
		if err != nil {
			return nil, "", 0, invalidArg("redis URL: %v", err)
		}
		tune(&o.ContextTimeoutEnabled, &o.MaxRetries, &o.DialerRetries, &o.DialTimeout)
		return redis.NewClient(o), prefix, ttl, nil
	case "sentinel":
		o, err := redis.ParseFailoverURL(u.String())
		if err != nil {
			return nil, "", 0, invalidArg("redis sentinel URL: %v", err)
		}
		tune(&o.ContextTimeoutEnabled, &o.MaxRetries, &o.DialerRetries, &o.DialTimeout)
		return redis.NewFailoverClient(o), prefix, ttl, nil
	case "cluster":
		o, err := redis.ParseClusterURL(u.String())
		if err != nil {
			return nil, "", 0, invalidArg("redis cluster URL: %v", err)
		}
		tune(&o.ContextTimeoutEnabled, &o.MaxRetries, &o.DialerRetries, &o.DialTimeout)
		return redis.NewClusterClient(o), prefix, ttl, nil
	}
	return nil, "", 0, invalidArg("unknown redis mode %q", mode)
}

func tune(ctxTimeout *bool, retries, dialRetries *int, dial *time.Duration) {
	*ctxTimeout = true
	if *retries == 0 {
		*retries = -1
	}
	if *dialRetries == 0 { // fail open fast: one dial attempt per command unless the URL says otherwise
		*dialRetries = 1
	}
	if *dial == 0 {
		*dial = 2 * time.Second
	}
}

// Describe returns rawURL with any password replaced by "xxxxx", for logs.
func Describe(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.User == nil {
		return rawURL
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return fmt.Sprint(u)
}
