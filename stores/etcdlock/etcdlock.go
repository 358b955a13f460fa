// Package etcdlock puts etcd's own lock under lockproof's matrix: the
// client library's concurrency.Mutex on a session whose lease has a TTL,
// as its users run it (etcd-mutex), and the same lock writing through a
// resource fenced by the lock key's create revision, as Jepsen's etcd
// 3.4.3 analysis recommends (etcd-fenced).
//
// One hold is one session: TryAcquire and Acquire grant a lease of the
// asked TTL, put the mutex's key under it, and keep it alive until
// Release, Close or its loss. The keep-alives are this package's own
// (one LeaseKeepAlive each TTL/3, as the client's session sends them)
// rather than the session's, so that the harness sees each one
// (locker.Observer) and judges the lease by what was renewed: the
// session here carries the lease's ID alone.
//
// What etcd promises, and what it does not: a key under a lease lives
// until the lease expires on the leader or is revoked; the holder learns
// of the expiry only from a refused or a missing keep-alive. A holder
// paused longer than its TTL wakes believing it holds a lock another
// session took meanwhile (Jepsen: etcd's locks "did not, and can not,
// guarantee mutual exclusion in asynchronous networks"); a fenced
// resource refuses its late write, because the next holder's key was
// created at a higher revision.
//
// A store with a login (locker.Store's Username and Password) is an etcd
// user the client authenticates as, and its TLS (a client certificate
// among it) is spoken on every connection; a request the cluster's
// authentication refuses wraps ErrRefused.
package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/stores/internal/hold"
)

// The names of the two locks (their locker.Entry names).
const (
	Mutex  = "etcd-mutex"
	Fenced = "etcd-fenced"
)

// Entries are the two etcd locks, each with its profile and predictions.
func Entries() []locker.Entry {
	return hold.Pair{Store: contract.TopologyEtcd, Plain: Mutex, Fenced: Fenced, Open: Open,
		PlainDoc:  "etcd's concurrency.Mutex on a session with a TTL (client v3), no fencing",
		FencedDoc: "etcd's concurrency.Mutex, writing through a resource fenced by the lock key's create revision (Jepsen's advice)",
		// Raft: a write commits on a quorum, a leader cut off commits
		// nothing, and a new leader extends every lease it inherits (by
		// an election timeout) instead of letting them lapse.
		Quorum: "a write commits on a quorum and the new leader keeps every lease (G1 holds); until a leader is elected nobody is served, and the new leader extends the leases it inherits, so a key may stay taken past its holder's TTL (liveness may break)",
		// The leader revokes expired leases in a loop (every 500ms)
		// through a Raft proposal.
		Lapse: "the leader revokes expired leases every 500ms, through Raft: a lapsed holder's key outlives its TTL by up to that much (liveness may break)",
	}.Entries()
}

// ErrRefused: the store refused a request for its login (no user given
// to a cluster with authentication, or a user without the rights); the
// request surely had no effect.
var ErrRefused = errors.New("etcdlock: refused by the store's authentication")

// Open opens a Locker of etcd's mutex for one workload client on its
// store (d.Store), fenced by the create revision when fenced is set. Its
// Close closes the etcd client it opened.
func Open(d locker.Deps, fenced bool) (locker.Locker, error) {
	if d.Store.Kind != contract.TopologyEtcd || len(d.Store.Endpoints) == 0 {
		return nil, fmt.Errorf("etcdlock: Deps.Store: want the endpoints of an etcd cluster, got kind %q with %d: %w", d.Store.Kind, len(d.Store.Endpoints), locker.ErrInvalid)
	}
	d = d.Normalize()
	dial := d.Store.Dial
	if dial == nil {
		var nd net.Dialer
		dial = nd.DialContext
	}
	cfg := clientv3.Config{
		Endpoints:   d.Store.Endpoints,
		DialTimeout: 2 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return dial(ctx, "tcp", addr)
		})},
		Logger: zap.NewNop(),
		// The store's login (an etcd user: the client authenticates at
		// its first dial and sends the token with every request) and
		// TLS (gRPC's, over the connection Dial made: the server's name
		// is the endpoint's host, the member's own address).
		Username: d.Store.Username,
		Password: d.Store.Password,
	}
	if d.Store.TLS != nil {
		cfg.TLS = d.Store.TLS.Clone()
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		// The error names no password: the client's never quotes it.
		return nil, fmt.Errorf("etcdlock: client of %v as user %q: %w", d.Store.Endpoints, d.Store.Username, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Locker{d: d, cli: cli, fenced: fenced, ctx: ctx, cancel: cancel}, nil
}

// Locker is etcd's mutex for one workload client.
type Locker struct {
	d      locker.Deps
	cli    *clientv3.Client
	fenced bool
	// ctx ends with Close: the keep-alive loops of the leases end with it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	closed bool
}

// Name implements locker.Locker.
func (l *Locker) Name() string {
	if l.fenced {
		return Fenced
	}
	return Mutex
}

// Close implements locker.Locker: it stops the keep-alives (the leases
// then expire at their TTL) and closes the etcd client.
func (l *Locker) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	l.cancel()
	// The client first: a blocking acquire's cleanup runs on its context.
	err := l.cli.Close()
	l.wg.Wait()
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("etcdlock: close: %w", err)
	}
	return nil
}

// TryAcquire implements locker.Locker: concurrency.Mutex's TryLock on a
// fresh session.
func (l *Locker) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	return l.acquire(ctx, key, ttl, false)
}

// Acquire implements locker.Waiter: concurrency.Mutex's Lock on a fresh
// session, which waits for the deletion of every key before its own.
func (l *Locker) Acquire(ctx context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	return l.acquire(ctx, key, ttl, true)
}

// seconds is ttl in whole seconds, the unit of etcd's leases, or an error
// when it is not one.
func seconds(ttl time.Duration) (int64, error) {
	if ttl < time.Second || ttl%time.Second != 0 {
		return 0, fmt.Errorf("etcdlock: ttl %v: etcd's leases last whole seconds, 1s at least: %w", ttl, locker.ErrInvalid)
	}
	return int64(ttl / time.Second), nil
}

func (l *Locker) acquire(ctx context.Context, key string, ttl time.Duration, wait bool) (locker.Lease, error) {
	secs, err := seconds(ttl)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("etcdlock: acquire %s: the locker is closed", key)
	}
	granted := l.d.Clock()
	g, err := l.cli.Grant(ctx, secs)
	if err != nil {
		// A lease granted and never used expires at its TTL.
		return nil, fmt.Errorf("etcdlock: grant: %w", outcome(err))
	}
	if g.TTL != secs {
		l.revoke(g.ID)
		return nil, fmt.Errorf("etcdlock: ttl %v: the cluster grants %ds at least (its election timeout): %w", ttl, g.TTL, locker.ErrInvalid)
	}
	// The session only carries the lease to the mutex: its own keep-alive
	// stops at once (its context is done), and this package's takes over.
	done, stop := context.WithCancel(context.Background())
	stop()
	s, err := concurrency.NewSession(l.cli, concurrency.WithLease(g.ID), concurrency.WithContext(done))
	if err != nil {
		l.revoke(g.ID)
		return nil, fmt.Errorf("etcdlock: session: %w", outcome(err))
	}
	ls := &lease{Hold: hold.New(ttl, granted), l: l, key: key, id: g.ID}
	ls.lastOK.Store(time.Now().UnixNano())
	m := concurrency.NewMutex(s, l.d.Prefix+key)
	ls.m = m
	// Keep the lease alive while the mutex is taken (a blocking Lock
	// may wait longer than the TTL).
	l.keepAlive(ls)
	if wait {
		err = l.lock(ctx, m)
	} else {
		err = m.TryLock(ctx)
	}
	if err != nil {
		ls.End()
		l.revoke(g.ID) // the key goes with its lease, whatever the outcome
		switch {
		case errors.Is(err, concurrency.ErrLocked), errors.Is(err, concurrency.ErrSessionExpired):
			return nil, fmt.Errorf("etcdlock: %s: %w: %w", key, locker.ErrNotAcquired, err)
		}
		return nil, fmt.Errorf("etcdlock: %s: %w", key, lockOutcome(err))
	}
	ls.rev = createRevision(m)
	ls.held.Store(true)
	return ls, nil
}

// lockGrace is how long past its caller's deadline a blocking acquire
// waits for concurrency.Mutex.Lock's own cleanup (lock).
const lockGrace = 200 * time.Millisecond

// lock is m.Lock bounded by ctx. When its wait fails, Mutex.Lock deletes
// its key under the client's own context (client.Ctx()), which never
// ends while the client lives: a client cut off from the cluster, or
// crashed, would never return. The adapter returns lockGrace after ctx's
// end and leaves that cleanup to the background (the lease's revoke
// deletes the key as well, and Close ends the client).
func (l *Locker) lock(ctx context.Context, m *concurrency.Mutex) error {
	done := make(chan error, 1)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		done <- m.Lock(ctx)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	t := time.NewTimer(lockGrace)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return fmt.Errorf("concurrency.Mutex.Lock still deletes its key: %w", ctx.Err())
	}
}

// createRevision is the revision at which m's key was created: the
// mutex's own ownership condition (IsOwner) holds it.
func createRevision(m *concurrency.Mutex) int64 {
	if c, ok := m.IsOwner().TargetUnion.(*pb.Compare_CreateRevision); ok {
		return c.CreateRevision
	}
	return 0
}

// revoke revokes lease id in the background, within a few seconds: a
// lease of an attempt that failed, or of a hold released, so that its
// key goes at once instead of at its TTL.
func (l *Locker) revoke(id clientv3.LeaseID) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		ctx, cancel := context.WithTimeout(l.ctx, 3*time.Second)
		defer cancel()
		_, _ = l.cli.Revoke(ctx, id)
	}()
}

// keepAlive renews ls's lease every TTL/3 until it ends, is refused (the
// lease is gone: lost) or goes a TTL without a renewal answered (lost, as
// the client's session decides).
func (l *Locker) keepAlive(ls *lease) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		every := ls.TTL() / 3
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
			case <-ls.Ended():
				return
			case <-l.ctx.Done():
				return
			}
			select {
			case <-ls.Ended(): // ended as the tick came
				return
			default:
			}
			// A waiter's lease is kept alive while it waits, unobserved: the
			// harness records the renewals of holds, not of places in line.
			done := func(error) {}
			if ls.held.Load() {
				tok, has := ls.Fence()
				done = l.d.Observe(ls.key, ls.TTL(), tok, has)
			}
			ctx, cancel := context.WithTimeout(l.ctx, every)
			sent := l.d.Clock()
			_, err := l.cli.KeepAliveOnce(ctx, ls.id)
			cancel()
			err = renewOutcome(err)
			done(err)
			switch {
			case err == nil:
				ls.lastOK.Store(time.Now().UnixNano())
				ls.Renewed(sent)
			case errors.Is(err, locker.ErrNotHeld):
				ls.Lose()
				return
			case time.Since(time.Unix(0, ls.lastOK.Load())) > ls.TTL():
				ls.Lose()
				return
			}
		}
	}()
}

// outcome maps an etcd client error to the harness's outcomes: a
// context's end, a lost connection or a server's timeout leave the
// request's effect unknown; a request the server refused had none.
func outcome(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", locker.ErrUnknownOutcome, err)
	}
	switch rpctypes.ErrorDesc(err) {
	case rpctypes.ErrLeaseNotFound.Error(), rpctypes.ErrGRPCLeaseNotFound.Error():
		return fmt.Errorf("%w: %w", locker.ErrNotHeld, err)
	case rpctypes.ErrTooManyRequests.Error(), rpctypes.ErrGRPCNotCapable.Error():
		return err // refused before it was proposed
	}
	if authRefusal(err) {
		// Refused by the store's authentication: no login, or one
		// without the rights, was never applied.
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	return fmt.Errorf("%w: %w", locker.ErrUnknownOutcome, err)
}

// authRefusal reports whether the store's authentication refused the
// request err answers.
func authRefusal(err error) bool {
	switch rpctypes.ErrorDesc(err) {
	case rpctypes.ErrUserEmpty.Error(), rpctypes.ErrPermissionDenied.Error(),
		rpctypes.ErrAuthFailed.Error(), rpctypes.ErrInvalidAuthToken.Error(), rpctypes.ErrAuthNotEnabled.Error(),
		rpctypes.ErrAuthOldRevision.Error():
		return true
	}
	return false
}

// lockOutcome is outcome for the mutex's Lock or TryLock, which send
// several requests (its key's put, the reads of the line, the delete of
// a key that lost). A client with no identity (no user, a wrong
// password) had every one refused, its put too: refused. A refusal of
// an identity's rights (permission denied, rights changed since its
// token, a token gone stale) may come after the put took effect, which
// then holds or waits for the lock until its lease is revoked or runs
// out: the outcome is unknown.
func lockOutcome(err error) error {
	switch rpctypes.ErrorDesc(err) {
	case rpctypes.ErrPermissionDenied.Error(), rpctypes.ErrAuthOldRevision.Error(), rpctypes.ErrInvalidAuthToken.Error():
		return fmt.Errorf("%w: %w", locker.ErrUnknownOutcome, err)
	}
	return outcome(err)
}

// renewOutcome is outcome for a keep-alive: a refused one says the lease
// is gone.
func renewOutcome(err error) error {
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("%w: %w", locker.ErrNotHeld, err)
	}
	return outcome(err)
}

// lease is one hold: its session's lease and its mutex's key.
type lease struct {
	*hold.Hold
	l   *Locker
	key string
	id  clientv3.LeaseID
	m   *concurrency.Mutex
	rev int64

	lastOK atomic.Int64 // UnixNano of the last renewal answered
	held   atomic.Bool  // the mutex is taken: renewals are the hold's
}

// Key implements locker.Lease.
func (ls *lease) Key() string { return ls.key }

// Fence implements locker.Lease: the create revision of the mutex's key,
// for etcd-fenced; none for etcd-mutex.
func (ls *lease) Fence() (uint64, bool) {
	if !ls.l.fenced || ls.rev <= 0 {
		return 0, false
	}
	return uint64(ls.rev), true
}

// Release implements locker.Lease: the mutex's key is deleted if it is
// still this hold's (the mutex's IsOwner condition; Unlock itself deletes
// whatever is there and cannot say), and the lease is revoked.
func (ls *lease) Release(ctx context.Context) error {
	// The keep-alives stop first: one that ran after the key was deleted
	// would renew a lease that holds nothing (and report it renewed), and
	// one refused after the revoke would report the lease lost.
	ls.End()
	resp, err := ls.l.cli.Txn(ctx).If(ls.m.IsOwner()).Then(clientv3.OpDelete(ls.m.Key())).Commit()
	// The session goes either way: its revoke deletes the key if the
	// delete did not land.
	ls.l.revoke(ls.id)
	if err != nil {
		return fmt.Errorf("etcdlock: release %s: %w", ls.key, outcome(err))
	}
	if !resp.Succeeded {
		return fmt.Errorf("etcdlock: release %s: the key is gone (its lease expired): %w", ls.key, locker.ErrNotHeld)
	}
	return nil
}

// Renew implements locker.Lease: one keep-alive of the session's lease,
// which renews it by its own TTL only.
func (ls *lease) Renew(ctx context.Context, ttl time.Duration) error {
	if ttl != ls.TTL() {
		return fmt.Errorf("etcdlock: renew by %v: a lease renews by its TTL, %v: %w", ttl, ls.TTL(), locker.ErrInvalid)
	}
	sent := ls.l.d.Clock()
	if _, err := ls.l.cli.KeepAliveOnce(ctx, ls.id); err != nil {
		err = renewOutcome(err)
		if errors.Is(err, locker.ErrNotHeld) {
			ls.Lose()
		}
		return fmt.Errorf("etcdlock: renew %s: %w", ls.key, err)
	}
	ls.lastOK.Store(time.Now().UnixNano())
	ls.Renewed(sent)
	return nil
}
