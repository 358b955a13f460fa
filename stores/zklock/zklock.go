// Package zklock puts ZooKeeper's lock recipe under lockproof's matrix:
// ephemeral sequential nodes under the lock's node, the lowest holding the
// lock and each waiter watching the one before it, as go-zookeeper's Lock
// runs it (zk-lock), and the same lock writing through a resource fenced
// by its node's creation zxid (zk-fenced).
//
// The fence is the node's czxid, not its sequence number: the lock's node
// is a container, which the server deletes once its last child is gone
// (every znode.container.checkIntervalMs, 60s by default), and the next
// node's sequence then starts at 0 again, below a fence a paused holder
// may still carry. A zxid only grows over the ensemble's life (its epoch
// in the high 32 bits grows with each leader), and a later node's is
// higher: the lock's order is the nodes' creation order.
//
// go-zookeeper's Lock takes no context and keeps its node to itself, so
// the adapter runs the same recipe step by step, with the library's own
// calls (CreateProtectedEphemeralSequential, Children, GetW, Delete): it
// can then honour a caller's deadline, try once without waiting, release
// only its own node, and fence with its node.
//
// One workload client is one ZooKeeper session, opened at its first
// acquire with the lease's TTL as its timeout; a hold lives as long as
// the session and its node. The client library pings the server every
// third of the timeout; the adapter besides reads its node every TTL/3
// (each request renews the session, as a ping does), which the harness
// sees (locker.Observer) and which tells the holder when its node is gone.
// A holder whose session expired while it was paused wakes believing it
// holds, until the library reconnects and learns of the expiry.
//
// A store with a login (locker.Store's Username and Password) is logged
// in to with digest auth, the session's first request (and, the library
// resending stored credentials before any other request, every
// reconnection's), and every node the lock creates, the lock's parents
// included, carries an ACL that admits that identity alone: another
// client can neither read, steal nor delete a hold. The one exception is
// the parent every key shares (/lockproof), in which any identity may
// also create (only create) its own keys' nodes, so that runs of other
// logins can use one ensemble. Without a login the nodes are
// world:anyone, ZooKeeper's default.
package zklock

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/stores/internal/hold"
)

// The names of the two locks (their locker.Entry names).
const (
	Lock   = "zk-lock"
	Fenced = "zk-fenced"
)

// Entries are the two ZooKeeper locks, each with its profile and
// predictions.
func Entries() []locker.Entry {
	return hold.Pair{Store: contract.TopologyZooKeeper, Plain: Lock, Fenced: Fenced, Open: Open,
		PlainDoc:  "ZooKeeper's lock recipe (ephemeral sequential nodes) as go-zookeeper runs it, no fencing",
		FencedDoc: "ZooKeeper's lock recipe, writing through a resource fenced by its node's creation zxid",
		// Zab: a write commits on a quorum, a leader cut off commits
		// nothing, and sessions outlive a change of leader (their
		// clients reconnect to another server within the timeout).
		Quorum: "a write commits on a quorum and sessions survive the change of leader (G1 holds); until a leader is elected nobody is served, and the new leader gives every session a fresh timeout, so a key may stay taken past its holder's TTL (liveness may break)",
		Lapse:  "the server expires sessions by tick, and each of the library's pings (unrecorded) renews one: a lapsed holder's node outlives its last recorded renewal by up to a third of its TTL and a tick (liveness may break)",
	}.Entries()
}

// codeLoginRequired is ZooKeeper's SESSIONCLOSEDREQUIRESASLAUTH, the
// code a server that enforces authentication (enforce.auth.enabled)
// answers a request of a client that has not logged in with.
const codeLoginRequired = -124

// ErrRefused: the store refused a request for the session's identity (a
// node whose ACL admits another, a server that wants a login); the
// request surely had no effect.
var ErrRefused = errors.New("zklock: refused by the store's ACL or authentication")

// Open opens a Locker of the recipe for one workload client on its store
// (d.Store), fenced by the node's creation zxid when fenced is set. The session
// opens at the first acquire; Close closes it.
func Open(d locker.Deps, fenced bool) (locker.Locker, error) {
	if d.Store.Kind != contract.TopologyZooKeeper || len(d.Store.Endpoints) == 0 {
		return nil, fmt.Errorf("zklock: Deps.Store: want the endpoints of a ZooKeeper ensemble, got kind %q with %d: %w", d.Store.Kind, len(d.Store.Endpoints), locker.ErrInvalid)
	}
	if d.Store.Password != "" && d.Store.Username == "" {
		return nil, fmt.Errorf("zklock: Deps.Store: a password without a user: digest auth is user:password: %w", locker.ErrInvalid)
	}
	if strings.Contains(d.Store.Username, ":") {
		return nil, fmt.Errorf("zklock: Deps.Store: user %q has a colon: digest auth is user:password, split at the first: %w", d.Store.Username, locker.ErrInvalid)
	}
	d = d.Normalize()
	acl := zk.WorldACL(zk.PermAll)
	if d.Store.Username != "" {
		// The run's identity alone may read, change or delete what it
		// creates: another client of the store (another user, or one
		// with no login) cannot steal or read a hold.
		acl = zk.DigestACL(zk.PermAll, d.Store.Username, d.Store.Password)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Locker{d: d, fenced: fenced, acl: acl, ctx: ctx, cancel: cancel, leases: map[*lease]bool{}}, nil
}

// Locker is the recipe for one workload client: one session.
type Locker struct {
	d      locker.Deps
	fenced bool
	// acl is the ACL of every node the lock creates: its login's digest
	// identity when it has one (Deps.Store.Username), else world:anyone.
	acl []zk.ACL
	// ctx ends with Close: the renewal loops and the calls left running
	// after their caller gave up end with it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	conn   *zk.Conn
	ttl    time.Duration
	closed bool
	leases map[*lease]bool
}

// Name implements locker.Locker.
func (l *Locker) Name() string {
	if l.fenced {
		return Fenced
	}
	return Lock
}

// Close implements locker.Locker: it stops the renewals and closes the
// session's connection without ending the session: its nodes live until
// the session expires, as when a process dies.
func (l *Locker) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	conn := l.conn
	l.mu.Unlock()
	l.cancel()
	if conn != nil {
		conn.Close()
	}
	l.wg.Wait()
	return nil
}

// session returns the client's session, opened with timeout ttl at the
// first call (and logged in, within ctx, when the store has a login); a
// later ttl must be the same.
func (l *Locker) session(ctx context.Context, ttl time.Duration) (*zk.Conn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, errors.New("zklock: the locker is closed")
	}
	if l.conn != nil {
		if ttl != l.ttl {
			return nil, fmt.Errorf("zklock: ttl %v: this client's session times out after %v (one session per client): %w", ttl, l.ttl, locker.ErrInvalid)
		}
		return l.conn, nil
	}
	if ttl < 200*time.Millisecond || ttl%time.Millisecond != 0 {
		return nil, fmt.Errorf("zklock: ttl %v: a session's timeout is whole milliseconds, two ticks at least: %w", ttl, locker.ErrInvalid)
	}
	dial := l.d.Store.Dial
	if dial == nil {
		var nd net.Dialer
		dial = nd.DialContext
	}
	conn, _, err := zk.Connect(l.d.Store.Endpoints, ttl,
		zk.WithDialer(func(network, addr string, timeout time.Duration) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(l.ctx, timeout)
			defer cancel()
			return dialTLS(ctx, dial, l.d.Store.TLS, network, addr)
		}),
		zk.WithLogInfo(false), zk.WithLogger(quiet{}),
		zk.WithEventCallback(l.event))
	if err != nil {
		return nil, fmt.Errorf("zklock: session with %v: %w", l.d.Store.Endpoints, err)
	}
	if l.d.Store.Username != "" {
		// The first request of the session: a server that enforces
		// authentication closes a connection whose first request is
		// anything else. The library sends it again on every
		// reconnection, before any other request.
		auth := []byte(l.d.Store.Username + ":" + l.d.Store.Password)
		if err := l.call(ctx, func() error { return conn.AddAuth("digest", auth) }, nil); err != nil {
			conn.Close()
			// err is the library's or ctx's: it never holds the password.
			return nil, fmt.Errorf("zklock: digest auth as %q with %v: %w", l.d.Store.Username, l.d.Store.Endpoints, err)
		}
	}
	l.conn, l.ttl = conn, ttl
	return conn, nil
}

// dialTLS dials addr with dial and, when cfg is set, speaks TLS on the
// connection to the server at addr (its host is the server's name unless
// cfg names one).
func dialTLS(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), cfg *tls.Config, network, addr string) (net.Conn, error) {
	conn, err := dial(ctx, network, addr)
	if err != nil || cfg == nil {
		return conn, err
	}
	cfg = cfg.Clone()
	if cfg.ServerName == "" {
		if h, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = h
		}
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("zklock: TLS handshake with %s: %w", addr, err)
	}
	return tc, nil
}

// event hears the session's events: an expired session took every node
// of it, and so every hold.
func (l *Locker) event(ev zk.Event) {
	if ev.Type != zk.EventSession || ev.State != zk.StateExpired {
		return
	}
	l.mu.Lock()
	var all []*lease
	for ls := range l.leases {
		all = append(all, ls)
	}
	l.mu.Unlock()
	for _, ls := range all {
		ls.Lose()
	}
}

// quiet is a zk.Logger that discards.
type quiet struct{}

func (quiet) Printf(string, ...any) {}

// call runs f, a library call that takes no context, and returns its error,
// or ctx's when ctx ends first; then f finishes in the background, and
// after runs with its outcome (a node created after its caller gave up
// must be deleted).
func (l *Locker) call(ctx context.Context, f func() error, after func(err error)) error {
	done := make(chan error, 1)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		done <- f()
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		if after != nil {
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				after(<-done)
			}()
		}
		return ctx.Err()
	}
}

// TryAcquire implements locker.Locker: the recipe's first step, and its
// node deleted at once when another's is lower.
func (l *Locker) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	return l.acquire(ctx, key, ttl, false)
}

// Acquire implements locker.Waiter: the recipe, watching the node before
// its own until it is the lowest.
func (l *Locker) Acquire(ctx context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	return l.acquire(ctx, key, ttl, true)
}

// dir is the lock node of key: its nodes are its children.
func (l *Locker) dir(key string) string {
	return "/lockproof/" + strings.NewReplacer("/", "_").Replace(l.d.Prefix+key)
}

func (l *Locker) acquire(ctx context.Context, key string, ttl time.Duration, wait bool) (locker.Lease, error) {
	conn, err := l.session(ctx, ttl)
	if err != nil {
		return nil, err
	}
	dir := l.dir(key)
	var path string
	sent := l.d.Clock()
	create := func() error {
		p, err := conn.CreateProtectedEphemeralSequential(dir+"/lock-", nil, l.acl)
		if errors.Is(err, zk.ErrNoNode) {
			if err = l.parents(conn, dir); err == nil {
				p, err = conn.CreateProtectedEphemeralSequential(dir+"/lock-", nil, l.acl)
			}
		}
		path = p
		return err
	}
	// A node created after its caller gave up is deleted when it comes.
	if err := l.call(ctx, create, func(err error) {
		if err == nil {
			_ = conn.Delete(path, -1)
		}
	}); err != nil {
		return nil, fmt.Errorf("zklock: %s: create: %w", key, outcome(err))
	}
	seq, err := sequence(path)
	if err != nil {
		l.drop(conn, path)
		return nil, fmt.Errorf("zklock: %s: %w", key, err)
	}
	// The fence: the node's creation zxid (the package doc says why not
	// its sequence). A node gone already was lost with its session.
	var st *zk.Stat
	var exists bool
	if err := l.call(ctx, func() (err error) { exists, st, err = conn.Exists(path); return err }, nil); err != nil {
		return nil, l.abandon(conn, key, path, err)
	}
	if !exists {
		return nil, fmt.Errorf("zklock: %s: node %s is gone (its session expired): %w", key, path, locker.ErrNotAcquired)
	}
	ls := &lease{Hold: hold.New(ttl, sent), l: l, key: key, path: path, seq: seq, czxid: st.Czxid}
	for {
		var children []string
		if err := l.call(ctx, func() (err error) { children, _, err = conn.Children(dir); return err }, nil); err != nil {
			return nil, l.abandon(conn, key, path, err)
		}
		prev, ok, err := before(children, seq)
		if err != nil {
			return nil, l.abandon(conn, key, path, err)
		}
		if !ok {
			break // the lowest: it holds the lock
		}
		if !wait {
			if err := l.call(ctx, func() error { return conn.Delete(path, -1) }, nil); err != nil {
				return nil, l.abandon(conn, key, path, err)
			}
			return nil, fmt.Errorf("zklock: %s: %s is held: %w", key, dir, locker.ErrNotAcquired)
		}
		var ch <-chan zk.Event
		if err := l.call(ctx, func() (err error) { _, _, ch, err = conn.GetW(dir + "/" + prev); return err }, nil); err != nil {
			if errors.Is(err, zk.ErrNoNode) {
				continue // gone already: look again
			}
			return nil, l.abandon(conn, key, path, err)
		}
		select {
		case ev := <-ch:
			if ev.Err != nil {
				return nil, l.abandon(conn, key, path, ev.Err)
			}
		case <-ctx.Done():
			return nil, l.abandon(conn, key, path, ctx.Err())
		}
	}
	l.mu.Lock()
	l.leases[ls] = true
	l.mu.Unlock()
	l.renew(ls)
	return ls, nil
}

// parents creates dir and its parents, as go-zookeeper's Lock does, but
// as container nodes: the server deletes each once its last child is
// gone, so that a run leaves nothing on a ZooKeeper it does not own.
//
// With a login, the parents above the key's own (the shared /lockproof)
// also let any identity create a node in them, and only that: runs of
// other logins on one ensemble each make their keys' nodes there, under
// ACLs of their own, and none can read, take or delete another's.
func (l *Locker) parents(conn *zk.Conn, dir string) error {
	parts := strings.Split(strings.TrimPrefix(dir, "/"), "/")
	shared := l.acl
	if l.d.Store.Username != "" {
		shared = append(slices.Clone(l.acl), zk.WorldACL(zk.PermCreate)...)
	}
	p := ""
	for i, part := range parts {
		p += "/" + part
		acl := l.acl
		if i < len(parts)-1 {
			acl = shared
		}
		if _, err := conn.CreateContainer(p, nil, zk.FlagContainer, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	return nil
}

// abandon gives up an acquire whose node is path after err: the node is
// deleted (within a second, on its own context); the caller surely holds
// nothing only when that worked.
func (l *Locker) abandon(conn *zk.Conn, key, path string, err error) error {
	ctx, cancel := context.WithTimeout(l.ctx, time.Second)
	defer cancel()
	derr := l.call(ctx, func() error { return conn.Delete(path, -1) }, nil)
	if derr == nil || errors.Is(derr, zk.ErrNoNode) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("zklock: %s: gave up waiting in line: %w: %w", key, locker.ErrNotAcquired, err)
		}
		return fmt.Errorf("zklock: %s: %w: %w", key, locker.ErrNotAcquired, err)
	}
	l.drop(conn, path)
	return fmt.Errorf("zklock: %s: %w: %w (its node %s may remain until its session ends)", key, locker.ErrUnknownOutcome, err, path)
}

// drop deletes path in the background, for as long as the Locker lives.
func (l *Locker) drop(conn *zk.Conn, path string) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for l.ctx.Err() == nil {
			if err := conn.Delete(path, -1); err == nil || errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrClosing) {
				return
			}
			select {
			case <-time.After(100 * time.Millisecond):
			case <-l.ctx.Done():
			}
		}
	}()
}

// sequence is the sequence number ZooKeeper appended to a node's name.
func sequence(path string) (int, error) {
	i := strings.LastIndex(path, "lock-")
	if i < 0 {
		return 0, fmt.Errorf("node %q has no sequence", path)
	}
	return strconv.Atoi(path[i+len("lock-"):])
}

// before returns the child just before seq among children, and whether
// one is.
func before(children []string, seq int) (string, bool, error) {
	prev, prevSeq := "", -1
	for _, c := range children {
		s, err := sequence(c)
		if err != nil {
			return "", false, err
		}
		if s < seq && s > prevSeq {
			prev, prevSeq = c, s
		}
	}
	return prev, prevSeq >= 0, nil
}

// outcome maps a ZooKeeper client error to the harness's outcomes: a
// lost connection or a context's end leave a request's effect unknown;
// an error the server answered with had none.
func outcome(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, zk.ErrConnectionClosed), errors.Is(err, zk.ErrClosing):
		return fmt.Errorf("%w: %w", locker.ErrUnknownOutcome, err)
	case errors.Is(err, zk.ErrSessionExpired), errors.Is(err, zk.ErrNoNode):
		return fmt.Errorf("%w: %w", locker.ErrNotHeld, err)
	case errors.Is(err, zk.ErrNoAuth), errors.Is(err, zk.ErrAuthFailed):
		// The node's ACL (or the server's) refused this identity: the
		// request was not applied.
		return fmt.Errorf("%w: %w", ErrRefused, err)
	case strings.HasSuffix(err.Error(), fmt.Sprint(codeLoginRequired)):
		// The server enforces authentication and the session did not log
		// in: it answered this code and closed the connection, without
		// applying the request. The library knows no such code.
		return fmt.Errorf("%w: the server wants a login (Deps.Store.Username): %w", ErrRefused, err)
	}
	return fmt.Errorf("%w: %w", locker.ErrUnknownOutcome, err)
}

// renew reads ls's node every TTL/3 until the hold ends or the node is
// gone (lost); each read renews the session.
func (l *Locker) renew(ls *lease) {
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
			tok, has := ls.Fence()
			done := l.d.Observe(ls.key, ls.TTL(), tok, has)
			ctx, cancel := context.WithTimeout(l.ctx, every)
			err := ls.touch(ctx)
			cancel()
			done(err)
			if errors.Is(err, locker.ErrNotHeld) {
				ls.Lose()
				return
			}
		}
	}()
}

// lease is one hold: its node.
type lease struct {
	*hold.Hold
	l    *Locker
	key  string
	path string
	seq  int
	// czxid is the node's creation zxid: the fence.
	czxid int64
	once  sync.Once
}

// end ends the hold and forgets it (an expired session loses the holds
// the Locker knows of).
func (ls *lease) end() {
	ls.End()
	ls.once.Do(func() {
		ls.l.mu.Lock()
		delete(ls.l.leases, ls)
		ls.l.mu.Unlock()
	})
}

// touch reads the node: a request that renews the session, and says
// whether the node is still there.
func (ls *lease) touch(ctx context.Context) error {
	sent := ls.l.d.Clock()
	var ok bool
	err := ls.l.call(ctx, func() (err error) { ok, _, err = ls.l.conn.Exists(ls.path); return err }, nil)
	if err != nil {
		return outcome(err)
	}
	if !ok {
		ls.Lose()
		return fmt.Errorf("zklock: %s: node %s is gone (its session expired): %w", ls.key, ls.path, locker.ErrNotHeld)
	}
	ls.Renewed(sent)
	return nil
}

// Key implements locker.Lease.
func (ls *lease) Key() string { return ls.key }

// Fence implements locker.Lease: the node's creation zxid, for
// zk-fenced; none for zk-lock.
func (ls *lease) Fence() (uint64, bool) {
	if !ls.l.fenced {
		return 0, false
	}
	return uint64(ls.czxid), true
}

// Release implements locker.Lease: the node is deleted (any version: it is
// this hold's own).
func (ls *lease) Release(ctx context.Context) error {
	// The renewals stop first: one that found the node deleted would
	// report the hold lost.
	ls.end()
	err := outcome(ls.l.call(ctx, func() error { return ls.l.conn.Delete(ls.path, -1) }, nil))
	if errors.Is(err, locker.ErrUnknownOutcome) {
		// The node may remain, and the session with it: delete it in
		// the background, as a careful caller retries Unlock.
		ls.l.drop(ls.l.conn, ls.path)
	}
	if err != nil {
		return fmt.Errorf("zklock: release %s: %w", ls.key, err)
	}
	return nil
}

// Renew implements locker.Lease: a request on the session (a read of the
// node), which renews the session by its timeout only.
func (ls *lease) Renew(ctx context.Context, ttl time.Duration) error {
	if ttl != ls.TTL() {
		return fmt.Errorf("zklock: renew by %v: a session renews by its timeout, %v: %w", ttl, ls.TTL(), locker.ErrInvalid)
	}
	return ls.touch(ctx)
}
