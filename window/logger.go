package window

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"
)

// SetLogger routes the lines go-redis writes of its own, which by default
// go to stderr as plain text ("redis: ... connection pool: failed to dial
// after 5 attempts: ..."), to l instead: each a record at level Warn with
// client=redis, so that a program's log stays in its one format (spool
// consume --log-format json). A nil l discards them. go-redis has one
// logger for the whole process, for every client: a program calls this
// once, at its start, before it opens a window.
func SetLogger(l *slog.Logger) {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	redis.SetLogger(redisLogger{l})
}

// redisLogger is go-redis's logging interface on a slog.Logger.
type redisLogger struct{ l *slog.Logger }

func (r redisLogger) Printf(ctx context.Context, format string, v ...any) {
	// go-redis's text often begins "redis: ", which client= says already.
	msg := strings.TrimPrefix(strings.TrimSpace(fmt.Sprintf(format, v...)), "redis: ")
	r.l.Log(ctx, slog.LevelWarn, msg, "client", "redis")
}
