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
	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/stores/etcdlock"
	"github.com/lockproof/lockproof/stores/internal/holdtest"
)

// TestMutexPaths drives every path of the etcd lock on a real 3-member
// cluster (holdtest.Paths), its hold stolen by revoking its lease; and a
// TTL etcd cannot grant is refused by name.
func TestMutexPaths(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, eps := cluster(t, ctx, etcdproc.ClusterConfig{ElectionTimeout: 500 * time.Millisecond})
	open := func(t *testing.T, obs locker.Observer) locker.Locker {
		l, err := etcdlock.Open(locker.Deps{Store: locker.Store{Kind: contract.TopologyEtcd, Endpoints: eps}, Observer: obs, Prefix: t.Name() + "/"}, true)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := l.Close(); err != nil {
				t.Error(err)
			}
		})
		return l
	}
	if _, err := open(t, nil).TryAcquire(ctx, "k", 500*time.Millisecond); !errors.Is(err, locker.ErrInvalid) || !strings.Contains(err.Error(), "whole seconds") {
		t.Fatalf("TryAcquire for 500ms: %v; want ErrInvalid naming whole seconds", err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	holdtest.Paths(t, holdtest.Lock{Open: open, TTL: time.Second,
		Steal: func(t *testing.T, ctx context.Context, key string) {
			resp, err := cli.Get(ctx, t.Name()+"/"+key, clientv3.WithPrefix())
			if err != nil || len(resp.Kvs) != 1 {
				t.Fatalf("the lock's key: %v, %v", resp, err)
			}
			if _, err := cli.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
				t.Fatal(err)
			}
		}})
}

// cluster starts an etcd cluster of cfg for t, stopped when t ends, and
// returns it with its members' client addresses; without etcd it skips
// t (fails it in CI).
func cluster(t *testing.T, ctx context.Context, cfg etcdproc.ClusterConfig) (*etcdproc.Cluster, []string) {
	t.Helper()
	if _, err := etcdproc.Binary(); err != nil {
		if redistest.InCI() {
			t.Fatalf("CI=true but %v", err)
		}
		t.Skip(err)
	}
	c, err := etcdproc.StartCluster(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	var eps []string
	for _, m := range c.Members {
		eps = append(eps, m.ClientAddr)
	}
	return c, eps
}
