package store

import "github.com/redis/go-redis/v9"

// Client returns the underlying go-redis client (the benchmarks add instrumentation hooks);
// the store still owns it.
func (s *RedisStore) Client() redis.UniversalClient { return s.rdb }
