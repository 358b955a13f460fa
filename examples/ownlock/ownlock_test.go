package ownlock

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/locker"
)

// myLock is your lock: here SET NX PX with a random token, and Lua scripts
// that release and extend only while the token still holds the key.
type myLock struct {
	rdb    redis.UniversalClient
	prefix string
}

var (
	unlockScript = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
	extendScript = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0`)
)

func (l *myLock) Name() string { return "mylock" }
func (l *myLock) Close() error { return nil } // the Redis client belongs to the harness

func (l *myLock) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	token, start := rand.Text(), time.Now()
	ok, err := l.rdb.SetNX(ctx, l.prefix+key, token, ttl).Result()
	switch {
	case err != nil:
		return nil, outcome(err)
	case !ok:
		return nil, fmt.Errorf("acquire %q: %w", key, locker.ErrNotAcquired)
	}
	return &myLease{l: l, key: key, token: token, ttl: ttl, valid: start.Add(ttl)}, nil
}

type myLease struct {
	l     *myLock
	key   string
	token string
	ttl   time.Duration
	valid time.Time // counted from before the request: Redis's TTL starts later
}

func (m *myLease) Key() string           { return m.key }
func (m *myLease) TTL() time.Duration    { return m.ttl }
func (m *myLease) Fence() (uint64, bool) { return 0, false } // no fencing token
func (m *myLease) Lost() <-chan struct{} { return nil }      // never learns of a loss

// ValidUntil (locker.Claimer, optional) is what your lock tells the code
// holding it; the harness holds your lock to it (the claims property).
func (m *myLease) ValidUntil() time.Time { return m.valid }

func (m *myLease) Release(ctx context.Context) error {
	m.valid = time.Time{} // from the first try on: a lost reply may hide a release that happened
	n, err := unlockScript.Run(ctx, m.l.rdb, []string{m.l.prefix + m.key}, m.token).Int()
	if err != nil {
		return outcome(err)
	}
	if n == 0 {
		return fmt.Errorf("release %q: %w", m.key, locker.ErrNotHeld)
	}
	return nil
}

func (m *myLease) Renew(ctx context.Context, ttl time.Duration) error {
	start := time.Now()
	n, err := extendScript.Run(ctx, m.l.rdb, []string{m.l.prefix + m.key}, m.token, ttl.Milliseconds()).Int()
	if err != nil {
		return outcome(err)
	}
	if n == 0 {
		return fmt.Errorf("renew %q: %w", m.key, locker.ErrNotHeld)
	}
	m.valid = start.Add(ttl)
	return nil
}

// outcome tells "surely not" from "maybe" (package locker's rule): a Redis
// error reply, a closed client or a failed dial surely had no effect;
// anything else, a context error included, may have (the command may have
// been sent).
func outcome(err error) error {
	var rerr redis.Error
	var nerr *net.OpError
	if errors.As(err, &rerr) || errors.Is(err, redis.ErrClosed) || errors.As(err, &nerr) && nerr.Op == "dial" {
		return err // surely no effect
	}
	return fmt.Errorf("%w: %w", locker.ErrUnknownOutcome, err)
}

// entry registers the lock: how the harness opens it for each client, and
// what it claims (no fencing tokens: ProfileLease; with them, ProfileFenced).
func entry() locker.Entry {
	return locker.Entry{Name: "mylock", Profile: locker.ProfileLease, Doc: "SET NX PX, owner-checked Lua release",
		Open: func(d locker.Deps) (locker.Locker, error) { return &myLock{rdb: d.Redis, prefix: d.Prefix}, nil }}
}

func TestMyLockUnderChaos(t *testing.T) {
	res, err := lockproof.Run(context.Background(), lockproof.Options{
		Locks:  []locker.Entry{entry()},
		Faults: []string{"none", "pause-client", "crash-client"},
		// Longer than the matrix's 3s, for a loaded CI machine's sake:
		// pause-client's victim must win the lock before it is paused.
		Duration: 6 * time.Second,
		Out:      t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range res.Summary.Scenarios {
		t.Logf("%s: %v", s.ID(), s.Verdicts) // map[claims:violated lease:ok liveness:n/a notice:n/a resource:violated]
	}
	// One verdict: a paused holder's late write gets in (no fencing tokens).
	if v, err := res.Verdict("mylock", "pause-client", 1, lockproof.Resource); err != nil || v != contract.Violated {
		t.Errorf("mylock × pause-client: resource %s, %v; want violated", v, err)
	}
	if res.Status != 0 {
		t.Errorf("verdicts not as the lock's profile predicts (status %d): see %s/report.md", res.Status, res.Dir)
	}
}
