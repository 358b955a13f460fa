package rediscmd

import (
	"context"
	"fmt"
	"log/slog"
)

// SlogLogger is a go-redis logger (redis.SetLogger) that writes to L at
// debug level: go-redis logs every reconnect and Sentinel switch through
// its own package logger, to stderr by default, which floods a run's output
// (114 lines for 16 scenarios). Runs route it to their logger instead.
type SlogLogger struct{ L *slog.Logger }

// Printf logs one go-redis message.
func (r SlogLogger) Printf(ctx context.Context, format string, v ...any) {
	r.L.DebugContext(ctx, fmt.Sprintf(format, v...), "from", "go-redis")
}
