package zklock_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/internal/zkproc"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/stores/zklock"
)

// cutter dials a lock's connections and can cut them all (and refuse
// new ones), or drop the connection right after it carried a create.
type cutter struct {
	mu    sync.Mutex
	conns []net.Conn
	down  bool
	dials int
	// dropAfterCreate, when set, closes the connection when the answer
	// to a create request (opCreate, 1) written on it comes, once, and
	// drops that answer.
	dropAfterCreate atomic.Bool
	dropped         atomic.Bool
}

func (c *cutter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		return nil, errors.New("cutter: cut")
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c.conns = append(c.conns, conn)
	c.dials++
	return &watched{Conn: conn, c: c}, nil
}

func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = true
	for _, conn := range c.conns {
		_ = conn.Close()
	}
	c.conns = nil
}

func (c *cutter) heal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = false
}

type watched struct {
	net.Conn
	c *cutter
	// blackhole: a create was written; whatever the server answers
	// (the create's reply) is dropped with the connection.
	blackhole atomic.Bool
}

func (w *watched) Read(b []byte) (int, error) {
	n, err := w.Conn.Read(b)
	if w.blackhole.Load() {
		_ = w.Conn.Close()
		return 0, errors.New("cutter: the create's reply is lost")
	}
	return n, err
}

func (w *watched) Write(b []byte) (int, error) {
	n, err := w.Conn.Write(b)
	// A request frame: length, xid, opcode.
	if err == nil && len(b) >= 12 && binary.BigEndian.Uint32(b[8:12]) == 1 && w.c.dropAfterCreate.Load() && w.c.dropped.CompareAndSwap(false, true) {
		w.blackhole.Store(true) // the server applies it; its reply is lost
	}
	return n, err
}

// TestDigestLoginAfterExpiry: a lock's session that expires (its
// connections cut for longer than the session's timeout) is replaced by
// the library with a new one; the lock's next acquire on the new
// session must be logged in (the stored credentials resent before it)
// and hold, not be refused by a server that enforces authentication.
func TestDigestLoginAfterExpiry(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, c, _ := openCut(t, ctx, "exp/")
	ls, err := l.TryAcquire(ctx, "k", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.cut()
	time.Sleep(4 * time.Second) // the server expires the session (2s)
	c.heal()
	// The library learns of the expiry when it reconnects (the package
	// doc says so): the hold is lost then.
	select {
	case <-ls.Lost():
	case <-time.After(15 * time.Second):
		t.Fatal("the hold was not lost after its session expired")
	}
	var last error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		actx, acancel := context.WithTimeout(ctx, 3*time.Second)
		ls2, err := l.TryAcquire(actx, "k", 2*time.Second)
		acancel()
		if err == nil {
			t.Logf("after the expiry: held (%v)", ls2.Key())
			if err := ls2.Release(ctx); err != nil {
				t.Fatalf("Release after the expiry: %v", err)
			}
			return
		}
		if errors.Is(err, zklock.ErrRefused) {
			t.Fatalf("TryAcquire on the new session: %v; the session's login was not resent", err)
		}
		last = err
		t.Logf("after the expiry: %v", err)
	}
	t.Fatalf("never held again after the expiry: %v", last)
}

// TestLostCreateReplyFindsOwnNode: a create whose reply is lost (the
// connection closed after the server applied it) on a session with a
// login: the library looks for its protected node among the parent's
// children after it reconnects (read under the digest ACL the lock
// gave the parent); the acquire must hold with exactly one node of its
// own, or say unknown, never ErrRefused or a second node left behind.
func TestLostCreateReplyFindsOwnNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, c, eps := openCut(t, ctx, "lost/")
	// The parents first, so the create dropped is the lock's node's.
	ls, err := l.TryAcquire(ctx, "k", 4*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c.dropAfterCreate.Store(true)
	actx, acancel := context.WithTimeout(ctx, 10*time.Second)
	defer acancel()
	ls, err = l.TryAcquire(actx, "k", 4*time.Second)
	if !c.dropped.Load() {
		t.Fatal("no create was dropped")
	}
	own, _, err2 := zk.Connect(eps, 5*time.Second, zk.WithLogInfo(false))
	if err2 != nil {
		t.Fatal(err2)
	}
	defer own.Close()
	if err := own.AddAuth("digest", []byte(cutUser+":"+cutPassword)); err != nil {
		t.Fatal(err)
	}
	kids, _, kerr := own.Children("/lockproof/lost_k")
	c.mu.Lock()
	dials := c.dials
	c.mu.Unlock()
	t.Logf("TryAcquire with the reply lost: %v; children %v (%v); %d dials", err, kids, kerr, dials)
	if dials < 2 {
		t.Fatal("the lock never reconnected: the create's reply was not lost")
	}
	switch {
	case err == nil:
		if len(kids) != 1 || !strings.HasSuffix(ls.Key(), "k") {
			t.Fatalf("held, but the lock's parent has %d children %v; want its one node", len(kids), kids)
		}
	case errors.Is(err, locker.ErrUnknownOutcome):
	default:
		t.Fatalf("TryAcquire with the create's reply lost: %v; want a hold or an unknown outcome", err)
	}
}

// TestTwoLoginsOneEnsemble: two lock clients of different identities
// (two runs, or a run and another user's, on one BYO ensemble) lock
// different keys. The first creates /lockproof with an ACL that admits
// its identity alone, and the second can then create nothing under it:
// every acquire of the second is refused while any node of the first's
// keeps /lockproof alive. Neither may delete the other's node.
func TestTwoLoginsOneEnsemble(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	eps := ensemble(t, ctx, zkproc.ClusterConfig{Servers: 1, EnforceAuth: true})
	open := func(user, pw, prefix string) locker.Locker {
		l, err := zklock.Open(locker.Deps{Store: locker.Store{Kind: contract.TopologyZooKeeper, Endpoints: eps, Username: user, Password: pw}, Prefix: prefix}, true)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	a, b := open("alice", "pw-a", "a/"), open("bob", "pw-b", "b/")
	lsA, err := a.TryAcquire(ctx, "k", 4*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer lsA.Release(ctx)
	// Bob (logged in as himself, as his lock is) can delete neither
	// alice's node nor its parents.
	bobConn, _, err := zk.Connect(eps, 5*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer bobConn.Close()
	if err := bobConn.AddAuth("digest", []byte("bob:pw-b")); err != nil {
		t.Fatal(err)
	}
	own, _, err := zk.Connect(eps, 5*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	if err := own.AddAuth("digest", []byte("alice:pw-a")); err != nil {
		t.Fatal(err)
	}
	nodes, _, err := own.Children("/lockproof/a_k")
	if err != nil || len(nodes) != 1 {
		t.Fatalf("alice's nodes: %v, %v", nodes, err)
	}
	for _, p := range []string{"/lockproof/a_k/" + nodes[0], "/lockproof/a_k", "/lockproof"} {
		if err := bobConn.Delete(p, -1); !errors.Is(err, zk.ErrNoAuth) && !errors.Is(err, zk.ErrNotEmpty) {
			t.Errorf("bob's Delete of %s: %v; want NoAuth (or NotEmpty)", p, err)
		}
	}
	bctx, bcancel := context.WithTimeout(ctx, 5*time.Second)
	defer bcancel()
	lsB, err := b.TryAcquire(bctx, "k", 4*time.Second)
	if err != nil {
		t.Fatalf("bob's TryAcquire of his own key beside alice's hold: %v; /lockproof carries alice's ACL alone, so no other identity can lock on this ensemble while she holds", err)
	}
	_ = lsB.Release(ctx)
}

// TestUsernameWithColon: ZooKeeper's digest login is user:password,
// split at the first colon, so a user name with a colon in it cannot be
// a digest identity: the lock's DigestACL (user "a:b") is an ACL id
// with two colons, which the server refuses as invalid (InvalidACL)
// before it creates anything. The lock should refuse such a login at
// Open (ErrInvalid), or at least say its acquire surely did nothing;
// it says the outcome is unknown.
func TestUsernameWithColon(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	eps := ensemble(t, ctx, zkproc.ClusterConfig{Servers: 1, EnforceAuth: true})
	l, err := zklock.Open(locker.Deps{Store: locker.Store{Kind: contract.TopologyZooKeeper, Endpoints: eps, Username: "ops:lock", Password: "pw-c"}, Prefix: "colon/"}, true)
	if errors.Is(err, locker.ErrInvalid) {
		return // refused by name
	}
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	actx, acancel := context.WithTimeout(ctx, 5*time.Second)
	defer acancel()
	ls, err := l.TryAcquire(actx, "k", 2*time.Second)
	if err == nil {
		_ = ls.Release(ctx)
		return
	}
	if errors.Is(err, locker.ErrUnknownOutcome) {
		t.Fatalf("TryAcquire as user %q: %v; the server refused the node's ACL before it created anything: want ErrInvalid at Open, not an unknown outcome", "ops:lock", err)
	}
	t.Logf("TryAcquire: %v", err)
}

// openCut opens a fenced lock logged in (cutUser) on an ensemble of one
// that enforces a login, dialling through a cutter the test controls;
// the lock is closed when the test ends. It returns the ensemble's
// endpoints too.
func openCut(t *testing.T, ctx context.Context, prefix string) (locker.Locker, *cutter, []string) {
	t.Helper()
	eps := ensemble(t, ctx, zkproc.ClusterConfig{Servers: 1, EnforceAuth: true})
	c := &cutter{}
	l, err := zklock.Open(locker.Deps{Store: locker.Store{Kind: contract.TopologyZooKeeper, Endpoints: eps, Username: cutUser, Password: cutPassword, Dial: c.dial}, Prefix: prefix}, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l, c, eps
}

// The login of openCut's lock.
const cutUser, cutPassword = "runner", "s3cret-zk-pw"
