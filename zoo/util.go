package zoo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/internal/rediscmd"
	"github.com/lockproof/lockproof/locker"
)

// do sends one command once (rediscmd.Do). A context already done sends
// nothing.
func do(ctx context.Context, rdb redis.UniversalClient, args ...any) (*redis.Cmd, error) {
	if err := ctx.Err(); err != nil {
		return nil, notSent{context.Cause(ctx)}
	}
	return rediscmd.Do(ctx, rdb, args...)
}

// runScript runs the Lua script src once (rediscmd.Script.Run: EVALSHA,
// then EVAL when Redis does not have it cached). A context already done
// sends nothing.
func runScript(ctx context.Context, rdb redis.UniversalClient, src string, keys []string, args ...any) (*redis.Cmd, error) {
	if err := ctx.Err(); err != nil {
		return nil, notSent{context.Cause(ctx)}
	}
	return rediscmd.NewScript(src).Run(ctx, rdb, keys, args...)
}

// notSent marks an error from before anything was sent.
type notSent struct{ err error }

func (e notSent) Error() string { return e.err.Error() }
func (e notSent) Unwrap() error { return e.err }

// unknown reports whether err leaves open whether the command took effect:
// anything but a failure before sending, redis.Nil, or what
// rediscmd.SurelyNoEffect says surely had no effect.
func unknown(err error) bool {
	var ns notSent
	return err != nil && !errors.As(err, &ns) && !rediscmd.SurelyNoEffect(err)
}

// fail wraps a client error of op on key: with locker.ErrUnknownOutcome when the
// command may have taken effect, as is otherwise.
func fail(op, key string, err error) error {
	if unknown(err) {
		return fmt.Errorf("%s %q: %w: %w", op, key, locker.ErrUnknownOutcome, err)
	}
	return fmt.Errorf("%s %q: %w", op, key, err)
}

// newToken returns a fresh 128-bit random owner token, hex encoded.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go >= 1.24)
	return hex.EncodeToString(b[:])
}

// isNil reports whether v is nil or a typed nil (rediscmd.IsNil).
func isNil(v any) bool { return rediscmd.IsNil(v) }

// lease is a locker.Lease made of functions; specimens fill in what they do.
type lease struct {
	key     string
	ttl     time.Duration
	token   uint64
	fenced  bool
	release func(ctx context.Context) error
	renew   func(ctx context.Context, ttl time.Duration) error // nil: locker.ErrUnsupported
	lost    <-chan struct{}
}

func (l *lease) Key() string           { return l.key }
func (l *lease) TTL() time.Duration    { return l.ttl }
func (l *lease) Fence() (uint64, bool) { return l.token, l.fenced }
func (l *lease) Lost() <-chan struct{} { return l.lost }
func (l *lease) Release(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("release %q: ctx is nil: %w", l.key, locker.ErrInvalid)
	}
	return l.release(ctx)
}

func (l *lease) Renew(ctx context.Context, ttl time.Duration) error {
	if ctx == nil {
		return fmt.Errorf("renew %q: ctx is nil: %w", l.key, locker.ErrInvalid)
	}
	if l.renew == nil {
		return fmt.Errorf("renew %q: %w", l.key, locker.ErrUnsupported)
	}
	if err := checkTTL("renew", l.key, ttl); err != nil {
		return err
	}
	return l.renew(ctx, ttl)
}

// claimingLease is a lease that states its validity (locker.Claimer), for
// the specimens whose algorithm computes one (Redlock's validity time).
type claimingLease struct {
	lease
	mu    sync.Mutex
	until time.Time
}

// ValidUntil implements locker.Claimer: the validity the algorithm last
// computed (zero once released).
func (l *claimingLease) ValidUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

// set records the validity the algorithm computed (a later one only: a
// renewal never shortens what was claimed; zero ends the claim).
func (l *claimingLease) set(t time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t.IsZero() || t.After(l.until) {
		l.until = t
	}
}

// ms is a duration in whole milliseconds, at least 1.
func ms(d time.Duration) int64 { return max(d.Milliseconds(), 1) }
