package zklock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/internal/zkproc"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/stores/zklock"
)

// TestDigestLogin: on a ZooKeeper that wants a digest login of every
// client, a lock with the store's login holds; its node (and the lock's
// parent nodes) carry an ACL that admits that identity alone, not
// world:anyone; a client of another identity can neither delete nor
// read it; and a lock given no login holds nothing. Before (issue 62,
// item 6) the nodes were world:anyone cdrwa, and a login could not be
// given.
func TestDigestLogin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	eps := ensemble(t, ctx, zkproc.ClusterConfig{Servers: 1, EnforceAuth: true})
	const user, pw = "runner", "s3cret-zk-pw"
	open := func(user, pw string) locker.Locker {
		l, err := zklock.Open(locker.Deps{Store: locker.Store{Kind: contract.TopologyZooKeeper, Endpoints: eps, Username: user, Password: pw}, Prefix: "auth/"}, true)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	client := func(auth string) *zk.Conn {
		conn, _, err := zk.Connect(eps, 5*time.Second, zk.WithLogInfo(false))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(conn.Close)
		if auth != "" {
			if err := conn.AddAuth("digest", []byte(auth)); err != nil {
				t.Fatal(err)
			}
		}
		return conn
	}

	ls, err := open(user, pw).TryAcquire(ctx, "k", 2*time.Second)
	if err != nil {
		t.Fatalf("TryAcquire with the login: %v", err)
	}
	const dir = "/lockproof/auth_k"
	own := client(user + ":" + pw)
	kids, _, err := own.Children(dir)
	if err != nil || len(kids) != 1 {
		t.Fatalf("children of %s: %v, %v; want the hold's node", dir, kids, err)
	}
	node := dir + "/" + kids[0]
	want := zk.DigestACL(zk.PermAll, user, pw)
	for _, p := range []string{dir, node} {
		acl, _, err := own.GetACL(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(acl) != 1 || acl[0] != want[0] {
			t.Errorf("ACL of %s: %+v; want %+v alone (not world:anyone)", p, acl, want)
		}
	}
	// The parent every key shares lets any identity create in it, and
	// nothing more (TestTwoLoginsOneEnsemble: other logins' runs).
	if acl, _, err := own.GetACL("/lockproof"); err != nil || len(acl) != 2 || acl[0] != want[0] ||
		acl[1] != (zk.ACL{Perms: zk.PermCreate, Scheme: "world", ID: "anyone"}) {
		t.Errorf("ACL of /lockproof: %+v, %v; want %+v and world:anyone create alone", acl, err, want)
	}
	other := client("intruder:guess")
	if err := other.Delete(node, -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("another identity's Delete of the hold's node: %v; want %v", err, zk.ErrNoAuth)
	}
	if _, _, err := other.Get(node); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("another identity's Get of the hold's node: %v; want %v", err, zk.ErrNoAuth)
	}
	if err := ls.Release(ctx); err != nil {
		t.Fatalf("Release with the login: %v", err)
	}

	// No login: the server closes the connection at the first request.
	actx, acancel := context.WithTimeout(ctx, 3*time.Second)
	defer acancel()
	if ls, err := open("", "").TryAcquire(actx, "k", 2*time.Second); !errors.Is(err, zklock.ErrRefused) {
		t.Fatalf("TryAcquire without a login: %v, %v; want ErrRefused", ls, err)
	} else if strings.Contains(err.Error(), pw) {
		t.Fatalf("error quotes the password: %v", err)
	} else {
		t.Logf("without a login: %v", err)
	}
}
