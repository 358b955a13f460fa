package etcdproc_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"

	"github.com/lockproof/lockproof/internal/etcdproc"
	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/internal/toxitest"
)

func TestMain(m *testing.M) { toxitest.Main(m) }

// proxied starts a 3-member cluster whose peer links each pass one
// Toxiproxy proxy in front of the member (its inbound peer proxy, as a
// chaos environment puts them), and returns it with the proxies by member.
// Everything is stopped when the test ends.
func proxied(t *testing.T) (*etcdproc.Cluster, []*toxiclient.Proxy) {
	t.Helper()
	if _, err := etcdproc.Binary(); err != nil {
		if redistest.InCI() {
			t.Fatalf("CI=true but %v", err)
		}
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	toxi := toxitest.Server(t)
	client := toxiclient.NewClient(toxi.URL)
	proxies := make([]*toxiclient.Proxy, 3)
	c, err := etcdproc.StartCluster(ctx, etcdproc.ClusterConfig{
		Advertise: func(i int, peer, cl string) (string, string, error) {
			p, err := client.CreateProxy(fmt.Sprintf("peer-%d", i), "127.0.0.1:0", peer)
			if err != nil {
				return "", "", err
			}
			proxies[i] = p
			return p.Listen, cl, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
		for _, m := range c.Members {
			if m.Running() {
				t.Errorf("%s still runs after Stop", m.Name)
			}
		}
	})
	return c, proxies
}

// TestClusterElectsAndStops: three members behind their peer proxies
// agree on a leader, a write commits through any of them, and Stop ends
// every process.
func TestClusterElectsAndStops(t *testing.T) {
	c, _ := proxied(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := c.WaitLeader(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	for i := range c.Members {
		rev, err := c.Put(ctx, i, "k", fmt.Sprint(i))
		if err != nil {
			t.Fatalf("put through %s: %v", c.Members[i].Name, err)
		}
		if rev <= last {
			t.Errorf("put through %s: revision %d after %d", c.Members[i].Name, rev, last)
		}
		last = rev
	}
	t.Logf("leader %s; revision %d", c.Members[l].Name, last)
}

// TestBlackholeIsolatesTheLeader: a blackhole on the leader's inbound
// peer proxy (bytes accepted and dropped, both ways) cuts it off: the
// other two elect a new leader, and a write through the old one does not
// commit while the blackhole lasts. Once it is lifted, the old leader
// follows the new one and the cluster takes writes through every member.
func TestBlackholeIsolatesTheLeader(t *testing.T) {
	c, proxies := proxied(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	old, err := c.WaitLeader(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	before, err := c.Status(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	for _, stream := range []string{"upstream", "downstream"} {
		if _, err := proxies[old].AddToxic("blackhole-"+stream, "timeout", stream, 1, toxiclient.Attributes{"timeout": 0}); err != nil {
			t.Fatal(err)
		}
	}
	next, err := c.WaitLeader(ctx, []int{old})
	if err != nil {
		t.Fatalf("no new leader among the other two: %v", err)
	}
	if next == old {
		t.Fatalf("%s still leads", c.Members[old].Name)
	}
	after, err := c.Status(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	if after.Term <= before.Term {
		t.Errorf("new leader %s in term %d, not after the old one's %d", c.Members[next].Name, after.Term, before.Term)
	}
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	rev, err := c.Put(pctx, old, "cut", "off")
	pcancel()
	if err == nil {
		t.Errorf("a write through the cut-off %s committed (revision %d)", c.Members[old].Name, rev)
	}
	for _, stream := range []string{"upstream", "downstream"} {
		if err := proxies[old].RemoveToxic("blackhole-" + stream); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.WaitLeader(ctx, nil); err != nil {
		t.Fatalf("after the blackhole: %v", err)
	}
	// The streams the blackhole swallowed bytes of are torn; the member
	// takes a while to drop and redial them (seconds, under load).
	start := time.Now()
	for {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := c.Put(pctx, old, "healed", "yes")
		pcancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("after the blackhole, no write through %s commits: %v", c.Members[old].Name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("healed: a write through %s commits %v after the blackhole's end", c.Members[old].Name, time.Since(start).Round(time.Millisecond))
}

// TestKillAndRestartTheLeader: the leader crashed, the other two elect
// one of them; restarted on its data, it rejoins and follows.
func TestKillAndRestartTheLeader(t *testing.T) {
	c, _ := proxied(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	old, err := c.WaitLeader(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, old, "before", "kill"); err != nil {
		t.Fatal(err)
	}
	if err := c.Members[old].Kill(); err != nil {
		t.Fatal(err)
	}
	if c.Members[old].Running() {
		t.Fatalf("%s runs after Kill", c.Members[old].Name)
	}
	next, err := c.WaitLeader(ctx, nil) // the killed member is not asked
	if err != nil {
		t.Fatal(err)
	}
	if next == old {
		t.Fatalf("the killed %s leads", c.Members[old].Name)
	}
	if err := c.Members[old].Launch(); err != nil {
		t.Fatal(err)
	}
	l, err := c.WaitLeader(ctx, nil)
	if err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	if _, err := c.Put(ctx, old, "after", "restart"); err != nil {
		t.Errorf("a write through the restarted %s: %v", c.Members[old].Name, err)
	}
	if err := c.Members[l].Launch(); err == nil {
		t.Errorf("Launch of the running %s: no error", c.Members[l].Name)
	}
}

// TestNotInstalled: without etcd on PATH the cluster does not start, with
// an error that names the package to install.
func TestNotInstalled(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := etcdproc.StartCluster(context.Background(), etcdproc.ClusterConfig{})
	if !errors.Is(err, etcdproc.ErrNotInstalled) {
		t.Fatalf("StartCluster without etcd: %v; want ErrNotInstalled", err)
	}
}
