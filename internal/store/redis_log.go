package store

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"
)

// LogRedisTo routes go-redis's own log lines (a process-wide setting) to log at debug level
// with lib=go-redis, instead of raw lines on standard error; nil discards them. The failures
// they describe (a pool's failed dial, ...) also reach the caller as errors, reported there.
func LogRedisTo(log *slog.Logger) { redis.SetLogger(redisLog{log}) }

// redisLog is go-redis's logging interface over a *slog.Logger.
type redisLog struct{ log *slog.Logger }

// Printf implements go-redis's internal.Logging.
func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	if l.log == nil || !l.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	msg := strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: ")
	l.log.Log(ctx, slog.LevelDebug, msg, "lib", "go-redis")
}
