package etcdlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/internal/etcdproc"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/stores/etcdlock"
)

// TestRefusedWaitLeavesNoKey: a blocking Acquire that is refused by the
// store's authentication after its key was put (it waited in line, and
// the user's permission was revoked while it waited) must not say
// ErrRefused ("surely no effect") while its key is left in the store:
// that key becomes the lock's owner once the holder before it goes, and
// holds the lock until its lease expires, the client having been told
// nothing happened. concurrency.Mutex.Lock returns waitDeletes' Get
// error (permission denied) after its key was created, its Unlock and
// the lease's revoke are refused as well.
func TestRefusedWaitLeavesNoKey(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, eps := cluster(t, ctx, etcdproc.ClusterConfig{Members: 1, ElectionTimeout: 500 * time.Millisecond, BcryptCost: 4})
	const rootPW, bobPW = "root-pw-7a1", "bob-pw-3c9"
	if err := c.EnableAuth(ctx, 0, rootPW); err != nil {
		t.Fatal(err)
	}
	root, err := clientv3.New(clientv3.Config{Endpoints: eps, Username: "root", Password: rootPW, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	const prefix = "refused/"
	for _, step := range []func() error{
		func() error { _, err := root.RoleAdd(ctx, "locker"); return err },
		func() error {
			_, err := root.RoleGrantPermission(ctx, "locker", prefix, clientv3.GetPrefixRangeEnd(prefix), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := root.UserAdd(ctx, "bob", bobPW); return err },
		func() error { _, err := root.UserGrantRole(ctx, "bob", "locker"); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	open := func(user, pw string) locker.Locker {
		l, err := etcdlock.Open(locker.Deps{Store: locker.Store{Kind: contract.TopologyEtcd, Endpoints: eps, Username: user, Password: pw}, Prefix: prefix}, true)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	first := open("root", rootPW)
	held, err := first.TryAcquire(ctx, "k", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	bob := open("bob", bobPW)
	type res struct {
		ls  locker.Lease
		err error
	}
	done := make(chan res, 1)
	go func() {
		actx, acancel := context.WithTimeout(ctx, 20*time.Second)
		defer acancel()
		ls, err := bob.(locker.Waiter).Acquire(actx, "k", 5*time.Second)
		done <- res{ls, err}
	}()
	// bob's key is in line behind the holder's.
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := root.Get(ctx, prefix+"k/", clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Kvs) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bob's key never appeared: %d keys", len(r.Kvs))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := root.RoleRevokePermission(ctx, "locker", prefix, clientv3.GetPrefixRangeEnd(prefix)); err != nil {
		t.Fatal(err)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var r res
	select {
	case r = <-done:
	case <-time.After(25 * time.Second):
		t.Fatal("bob's Acquire never returned")
	}
	t.Logf("bob's Acquire: %v, %v", r.ls, r.err)
	if r.err == nil {
		t.Fatalf("bob's Acquire held after its permission was revoked")
	}
	// Give the lock's background revoke (3s at most) its time.
	time.Sleep(3500 * time.Millisecond)
	left, err := root.Get(ctx, prefix+"k/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if errors.Is(r.err, etcdlock.ErrRefused) && len(left.Kvs) > 0 {
		var ttl int64 = -1
		if tr, err := root.TimeToLive(ctx, clientv3.LeaseID(left.Kvs[0].Lease)); err == nil {
			ttl = tr.TTL
		}
		t.Fatalf("Acquire said %v (ErrRefused: surely no effect), but its key %s (create revision %d, its lease's TTL left %ds) is the lock's owner in the store, %d key(s) under the lock's prefix", r.err, left.Kvs[0].Key, left.Kvs[0].CreateRevision, ttl, len(left.Kvs))
	}
}

// TestWrongPasswordNamesCause: a lock given a wrong password for the
// store's user fails at Open with an error that names the user and the
// cause (authentication failed), never the password; a lock given a
// user that does not exist, the same.
func TestWrongPasswordNamesCause(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, eps := cluster(t, ctx, etcdproc.ClusterConfig{Members: 1, ElectionTimeout: 500 * time.Millisecond, BcryptCost: 4})
	const pw = "right-pw-81f"
	if err := c.EnableAuth(ctx, 0, pw); err != nil {
		t.Fatal(err)
	}
	for _, login := range [][2]string{{"root", "Wr0ng-pw-44e"}, {"nobody", "Wr0ng-pw-44e"}} {
		l, err := etcdlock.Open(locker.Deps{Store: locker.Store{Kind: contract.TopologyEtcd, Endpoints: eps, Username: login[0], Password: login[1]}, Prefix: "wrong/"}, true)
		if err == nil {
			// The client may authenticate at its first request instead.
			_, err = l.TryAcquire(ctx, "k", 2*time.Second)
			_ = l.Close()
		}
		t.Logf("%s: %v", login[0], err)
		switch {
		case err == nil:
			t.Errorf("user %s with a wrong password: no error", login[0])
		case strings.Contains(err.Error(), login[1]) || strings.Contains(err.Error(), pw):
			t.Errorf("the error quotes a password: %v", err)
		case !strings.Contains(err.Error(), "authentication failed") || !strings.Contains(err.Error(), login[0]):
			t.Errorf("user %s with a wrong password: %v; want the user and the cause named", login[0], err)
		}
	}
}
