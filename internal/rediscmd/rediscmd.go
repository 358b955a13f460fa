// Package rediscmd holds the Redis command plumbing that lockproof's lock,
// resources and specimens share: commands go-redis must send at most once,
// Lua scripts run with EVALSHA and then EVAL, a Sender that honours ctx on
// clients that ignore it (the lock's and fenced-v1's way to Redis), and the
// line between "surely had no effect" and "may have taken effect".
package rediscmd

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"reflect"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// noRetryCmd is a command go-redis must not resend after a network error: a
// resent script whose first reply was lost could take effect twice, or
// report a refusal for something it did.
type noRetryCmd struct{ *redis.Cmd }

// NoRetry tells go-redis not to resend the command.
func (noRetryCmd) NoRetry() bool { return true }

// newCmd returns the command args, to be sent at most once.
func newCmd(ctx context.Context, args ...any) noRetryCmd {
	return noRetryCmd{redis.NewCmd(ctx, args...)}
}

// processor sends one command: a client, or a Sender. An interface, not a
// func: a method value passed as a func is a heap allocation per call.
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// Do sends one command once, whatever the client's MaxRetries, and returns
// it with its error.
func Do(ctx context.Context, rdb redis.UniversalClient, args ...any) (*redis.Cmd, error) {
	return doVia(ctx, rdb, args...)
}

// doVia is Do through send.
func doVia(ctx context.Context, send processor, args ...any) (*redis.Cmd, error) {
	cmd := newCmd(ctx, args...)
	err := send.Process(ctx, cmd)
	return cmd.Cmd, err
}

// Script is a Lua script and the SHA1 digest EVALSHA names it by.
type Script struct {
	src, sha string
	// the same, as command arguments: boxed once, not on every run
	evalsha, eval [2]any
}

// NewScript returns the Script of src.
func NewScript(src string) *Script {
	h := sha1.Sum([]byte(src))
	sha := hex.EncodeToString(h[:])
	return &Script{src: src, sha: sha, evalsha: [2]any{"evalsha", sha}, eval: [2]any{"eval", src}}
}

// head is the verb and body of EVALSHA (false) or EVAL (true).
func (s *Script) head(eval bool) [2]any {
	if eval {
		return s.eval
	}
	return s.evalsha
}

// args are the arguments of verb (EVALSHA with the digest, EVAL with the
// source) on keys and args.
func (s *Script) args(eval bool, keys []string, args []any) []any {
	h := s.head(eval)
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, h[0], h[1], len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	return append(a, args...)
}

// Head is how many leading elements of the slice Sender.RunArgs takes
// are its own (the verb, the body and the key count).
const Head = 3

// Run runs s once: EVALSHA, and EVAL when Redis does not have it cached (a
// NOSCRIPT reply means EVALSHA did nothing). Neither is resent.
func (s *Script) Run(ctx context.Context, rdb redis.UniversalClient, keys []string, args ...any) (*redis.Cmd, error) {
	return s.runVia(ctx, rdb, keys, args...)
}

// runVia is Run through send.
func (s *Script) runVia(ctx context.Context, send processor, keys []string, args ...any) (*redis.Cmd, error) {
	cmd, err := doVia(ctx, send, s.args(false, keys, args)...)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		cmd, err = doVia(ctx, send, s.args(true, keys, args)...)
	}
	return cmd, err
}

// Sender sends commands over one client, each at most once, and honours
// ctx even when the client ignores context deadlines (ContextTimeoutEnabled
// false, go-redis's default): the lock's and fenced-v1's way to Redis.
type Sender struct {
	rdb redis.UniversalClient
	// ctxDeadlines: rdb applies context deadlines to its sockets
	// (ContextTimeoutEnabled), so a command with a deadline needs no
	// helper goroutine.
	ctxDeadlines bool
}

// NewSender returns the Sender of rdb.
func NewSender(rdb redis.UniversalClient) *Sender {
	s := &Sender{rdb: rdb}
	switch r := rdb.(type) {
	case *redis.Client:
		s.ctxDeadlines = r.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		s.ctxDeadlines = r.Options().ContextTimeoutEnabled
	}
	return s
}

// honour runs do (one round trip) so that ctx is honoured even when the
// client ignores context deadlines: do runs in a helper goroutine, and when
// ctx ends first the command is abandoned to finish in the background and
// ctx's cause is returned; whether the command took effect is then
// unknown. A client with ContextTimeoutEnabled enforces a ctx deadline
// itself, so do runs directly (faster); a cancellation without deadline
// then takes effect at the end of the round trip, or at the client's
// ReadTimeout.
func (s *Sender) honour(ctx context.Context, do func() error) error {
	if s.direct(ctx) {
		return do()
	}
	done := make(chan error, 1)
	go func() { done <- do() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("reply abandoned: %w", context.Cause(ctx))
	}
}

// direct reports whether a command under ctx can be sent without a helper
// goroutine: ctx never ends, or the client enforces its deadline.
func (s *Sender) direct(ctx context.Context) bool {
	if ctx.Done() == nil {
		return true
	}
	_, ok := ctx.Deadline()
	return ok && s.ctxDeadlines
}

// Process sends cmd, honouring ctx.
func (s *Sender) Process(ctx context.Context, cmd redis.Cmder) error {
	if s.direct(ctx) {
		return s.rdb.Process(ctx, cmd) // no closure: the usual path allocates nothing here
	}
	return s.honour(ctx, func() error { return s.rdb.Process(ctx, cmd) })
}

// Run runs script once (Script.Run), honouring ctx, and returns its reply.
func (s *Sender) Run(ctx context.Context, script *Script, keys []string, args ...any) (any, error) {
	cmd, err := s.RunCmd(ctx, script, keys, args...)
	if err != nil {
		return nil, err
	}
	return cmd.Val(), nil
}

// RunCmd is Run returning the command, for its typed accessors.
func (s *Sender) RunCmd(ctx context.Context, script *Script, keys []string, args ...any) (*redis.Cmd, error) {
	return script.runVia(ctx, s, keys, args...)
}

// RunArgs runs script once, as Run, on a: Head elements it fills itself,
// then numKeys keys, then the script's arguments, boxed by the caller
// (who can box once what it sends often, and build the slice once).
func (s *Sender) RunArgs(ctx context.Context, script *Script, numKeys int, a []any) (any, error) {
	h := script.head(false)
	a[0], a[1], a[2] = h[0], h[1], numKeys
	cmd, err := doVia(ctx, s, a...)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		h = script.head(true)
		b := slices.Clone(a) // the first command keeps its own
		b[0], b[1] = h[0], h[1]
		cmd, err = doVia(ctx, s, b...)
	}
	if err != nil {
		return nil, err
	}
	return cmd.Val(), nil
}

// Do is the package's Do through s: sent once, within ctx.
func (s *Sender) Do(ctx context.Context, args ...any) (*redis.Cmd, error) {
	return doVia(ctx, s, args...)
}

// RunWithWait runs script (one EVAL: a NOSCRIPT could not be answered with
// a resend in a pipeline) and WAIT n timeout in one pipeline, on one
// connection, so that WAIT counts the replicas that acknowledged the
// script's writes, honouring ctx. It returns the script's reply and WAIT's
// count; waitErr says that WAIT failed after the script ran (the count is
// then unknown: 0).
func (s *Sender) RunWithWait(ctx context.Context, script *Script, n int, timeout time.Duration, keys []string, args ...any) (reply any, acks int64, waitErr, err error) {
	cmd := newCmd(ctx, script.args(true, keys, args)...)
	wait := newCmd(ctx, "wait", n, timeout.Milliseconds())
	var pipe redis.Pipeliner
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		// WAIT has no key: send both to the slot's master ourselves.
		node, err := cc.MasterForKey(ctx, keys[0])
		if err != nil {
			return nil, 0, nil, err
		}
		pipe = node.Pipeline()
	} else {
		pipe = s.rdb.Pipeline()
	}
	_ = pipe.Process(ctx, cmd)
	_ = pipe.Process(ctx, wait)
	err = s.honour(ctx, func() error {
		if _, err := pipe.Exec(ctx); err != nil && cmd.Err() != nil {
			return cmd.Err()
		}
		return nil
	})
	if err != nil {
		return nil, 0, nil, err
	}
	acks, waitErr = wait.Int64()
	if waitErr != nil {
		acks = 0
	}
	return cmd.Val(), acks, waitErr, nil
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
