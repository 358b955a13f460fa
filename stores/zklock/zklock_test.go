package zklock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/internal/alone"
	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/internal/zkproc"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/stores/internal/holdtest"
	"github.com/lockproof/lockproof/stores/zklock"
)

// TestRecipePaths drives every path of the ZooKeeper lock on a real
// 3-server ensemble (holdtest.Paths), its hold stolen by deleting its
// node; and a second TTL on one client's session is refused by name.
func TestRecipePaths(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	eps := ensemble(t, ctx, zkproc.ClusterConfig{})
	open := func(t *testing.T, obs locker.Observer) locker.Locker {
		l, err := zklock.Open(locker.Deps{Store: locker.Store{Kind: contract.TopologyZooKeeper, Endpoints: eps}, Observer: obs, Prefix: t.Name() + "/"}, true)
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
	one := open(t, nil)
	if _, err := one.TryAcquire(ctx, "a", time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := one.TryAcquire(ctx, "b", 2*time.Second); !errors.Is(err, locker.ErrInvalid) || !strings.Contains(err.Error(), "one session per client") {
		t.Fatalf("TryAcquire for another TTL on the same session: %v; want ErrInvalid", err)
	}
	conn, _, err := zk.Connect(eps, 5*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	holdtest.Paths(t, holdtest.Lock{Open: open, TTL: time.Second,
		Steal: func(t *testing.T, ctx context.Context, key string) {
			dir := "/lockproof/" + strings.ReplaceAll(t.Name()+"/"+key, "/", "_")
			kids, _, err := conn.Children(dir)
			if err != nil || len(kids) != 1 {
				t.Fatalf("the lock's node: %v, %v", kids, err)
			}
			if err := conn.Delete(dir+"/"+kids[0], -1); err != nil {
				t.Fatal(err)
			}
		}})
}

// TestFenceSurvivesContainerReap: the lock's node is a container the
// server deletes once empty, and the next node's sequence starts at 0
// again. A hold taken after the reap must still carry a higher fence than
// one taken before it, or a holder paused across the reap (its write not
// yet made) would pass the resource's check after a newer holder wrote.
// With fences by sequence number this fails: both holds are node 0.
func TestFenceSurvivesContainerReap(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	eps := ensemble(t, ctx, zkproc.ClusterConfig{Servers: 1, ContainerCheck: 200 * time.Millisecond})
	l, err := zklock.Open(locker.Deps{Store: locker.Store{Kind: contract.TopologyZooKeeper, Endpoints: eps}, Prefix: "reap/"}, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	conn, _, err := zk.Connect(eps, 5*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const dir = "/lockproof/reap_k"
	hold := func() (uint64, string) {
		t.Helper()
		ls, err := l.TryAcquire(ctx, "k", 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		children, _, err := conn.Children(dir)
		if err != nil || len(children) != 1 {
			t.Fatalf("children of %s: %v, %v; want the hold's node", dir, children, err)
		}
		fence, ok := ls.Fence()
		if !ok {
			t.Fatal("zk-fenced lease without a fence")
		}
		if err := ls.Release(ctx); err != nil {
			t.Fatal(err)
		}
		return fence, children[0]
	}
	before, node := hold()
	// The server reaps the empty container within a few checks.
	for {
		ok, _, err := conn.Exists(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s was not reaped: %v", dir, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	after, again := hold()
	if !strings.HasSuffix(node, "lock-0000000000") || !strings.HasSuffix(again, "lock-0000000000") {
		t.Fatalf("nodes %s, %s: the test wants both numbered 0 (a sequence restarted by the reap)", node, again)
	}
	if after <= before {
		t.Fatalf("fence after the reap %d, before %d: the fence went back", after, before)
	}
}

// ensemble starts a ZooKeeper ensemble of cfg for t, stopped when t
// ends, and returns its servers' client addresses; without ZooKeeper
// it skips t (fails it in CI).
func ensemble(t *testing.T, ctx context.Context, cfg zkproc.ClusterConfig) []string {
	t.Helper()
	if _, err := zkproc.Java(); err != nil {
		if redistest.InCI() {
			t.Fatalf("CI=true but %v", err)
		}
		t.Skip(err)
	}
	alone.Take(t) // JVMs start beside no test that needs the cores
	c, err := zkproc.StartCluster(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	var eps []string
	for _, s := range c.Servers {
		eps = append(eps, s.ClientAddr)
	}
	return eps
}
