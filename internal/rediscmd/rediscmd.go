// Package rediscmd holds the Redis command plumbing that lockproof's lock,
// resources and specimens share: commands go-redis must send at most once,
// Lua scripts run with EVALSHA and then EVAL, and the line between "surely
// had no effect" and "may have taken effect".
package rediscmd

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"net"
	"reflect"

	"github.com/redis/go-redis/v9"
)

// noRetryCmd is a command go-redis must not resend after a network error:
// a resent script whose first reply was lost could take effect twice, or
// report a refusal for something it did.
type noRetryCmd struct{ *redis.Cmd }

// NoRetry tells go-redis not to resend the command.
func (noRetryCmd) NoRetry() bool { return true }

// Do sends one command once, whatever the client's MaxRetries, and returns
// it with its error.
func Do(ctx context.Context, rdb redis.UniversalClient, args ...any) (*redis.Cmd, error) {
	cmd := noRetryCmd{redis.NewCmd(ctx, args...)}
	err := rdb.Process(ctx, cmd)
	return cmd.Cmd, err
}

// Script is a Lua script and the SHA1 digest EVALSHA names it by.
type Script struct {
	src, sha string
}

// NewScript returns the Script of src.
func NewScript(src string) *Script {
	h := sha1.Sum([]byte(src))
	return &Script{src: src, sha: hex.EncodeToString(h[:])}
}

// Run runs s once: EVALSHA, and EVAL when Redis does not have it cached (a
// NOSCRIPT reply means EVALSHA did nothing). Neither is resent.
func (s *Script) Run(ctx context.Context, rdb redis.UniversalClient, keys []string, args ...any) (*redis.Cmd, error) {
	build := func(verb, body string) []any {
		a := make([]any, 0, 3+len(keys)+len(args))
		a = append(a, verb, body, len(keys))
		for _, k := range keys {
			a = append(a, k)
		}
		return append(a, args...)
	}
	cmd, err := Do(ctx, rdb, build("evalsha", s.sha)...)
	if redis.HasErrorPrefix(err, "NOSCRIPT") {
		cmd, err = Do(ctx, rdb, build("eval", s.src)...)
	}
	return cmd, err
}

// SurelyNoEffect reports whether err shows that the command had no effect:
// Redis answered with an error (or redis.Nil), the dial failed, the client
// was closed, or no connection was free. Any other error (a timeout, a
// connection lost after sending) leaves the outcome unknown.
func SurelyNoEffect(err error) bool {
	var rerr redis.Error
	var nerr *net.OpError
	return errors.As(err, &rerr) || (errors.As(err, &nerr) && nerr.Op == "dial") ||
		errors.Is(err, redis.ErrClosed) || errors.Is(err, redis.ErrPoolTimeout)
}

// IsNil reports whether v is nil, or an interface holding a nil pointer,
// map, slice, func or channel (a typed nil client passed as an interface).
func IsNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		return rv.IsNil()
	}
	return false
}
