package etcdlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/internal/etcdproc"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/stores/etcdlock"
)

// TestLogin: on an etcd with authentication on, a lock given no login
// is refused by name (ErrRefused: surely no effect), one with a wrong
// password does not open, and one with the store's login holds and
// releases. Before the lock took a login (issue 62, item 6), none of
// this could be asked, and a BYO etcd's credentials were dropped.
func TestLogin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, eps := cluster(t, ctx, etcdproc.ClusterConfig{Members: 1, ElectionTimeout: 500 * time.Millisecond})
	const pw = "s3cret-etcd-pw"
	if err := c.EnableAuth(ctx, 0, pw); err != nil {
		t.Fatal(err)
	}
	open := func(user, pw string) (locker.Locker, error) {
		return etcdlock.Open(locker.Deps{Store: locker.Store{Kind: contract.TopologyEtcd, Endpoints: eps, Username: user, Password: pw}, Prefix: t.Name() + "/"}, true)
	}

	anon, err := open("", "")
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	if ls, err := anon.TryAcquire(ctx, "k", 2*time.Second); !errors.Is(err, etcdlock.ErrRefused) {
		t.Fatalf("TryAcquire without a login: %v, %v; want ErrRefused", ls, err)
	} else {
		t.Logf("without a login: %v", err)
	}

	if l, err := open("root", "wrong"); err == nil {
		_ = l.Close()
		t.Fatal("Open with a wrong password: no error")
	} else if strings.Contains(err.Error(), "wrong") {
		t.Fatalf("Open's error quotes the password: %v", err)
	}

	l, err := open("root", pw)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ls, err := l.TryAcquire(ctx, "k", 2*time.Second)
	if err != nil {
		t.Fatalf("TryAcquire with the login: %v", err)
	}
	if err := ls.Release(ctx); err != nil {
		t.Fatalf("Release with the login: %v", err)
	}
}
