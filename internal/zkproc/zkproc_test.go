package zkproc_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"

	"github.com/lockproof/lockproof/internal/proc"
	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/internal/toxitest"
	"github.com/lockproof/lockproof/internal/zkproc"
)

func TestMain(m *testing.M) { toxitest.Main(m) }

// link is the two proxies (quorum, election) one server dials another
// through.
type link struct{ quorum, election *toxiclient.Proxy }

// proxied starts a 3-server ensemble in which every server reaches every
// other through proxies of its own (one per ordered pair, for the quorum
// and the election ports), and returns it with the links by [from][to].
// Everything is stopped when the test ends.
func proxied(t *testing.T) (*zkproc.Cluster, [][]link) {
	t.Helper()
	if _, err := zkproc.Java(); err != nil {
		if redistest.InCI() {
			t.Fatalf("CI=true but %v", err)
		}
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	toxi := toxitest.Server(t)
	client := toxiclient.NewClient(toxi.URL)
	links := make([][]link, 3)
	for i := range links {
		links[i] = make([]link, 3)
	}
	c, err := zkproc.StartCluster(ctx, zkproc.ClusterConfig{
		Route: func(from, to int, quorum, election string) (string, string, error) {
			q, err := client.CreateProxy(fmt.Sprintf("q-%d-%d", from, to), reserved(t), quorum)
			if err != nil {
				return "", "", err
			}
			e, err := client.CreateProxy(fmt.Sprintf("e-%d-%d", from, to), reserved(t), election)
			if err != nil {
				return "", "", err
			}
			links[from][to] = link{q, e}
			return q.Listen, e.Listen, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
		for _, s := range c.Servers {
			if s.Running() {
				t.Errorf("server %d still runs after Stop", s.ID)
			}
		}
	})
	return c, links
}

// reserved is a loopback address whose port is reserved until the test
// ends (proc.ReservePort): a proxy cut off (Disable) closes its listener,
// and on a busy machine an automatic port choice took the port meanwhile
// ("bind: address already in use" on Enable, a flake CI met).
func reserved(t *testing.T) string {
	t.Helper()
	port, release, err := proc.ReservePort(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := release(); err != nil {
			t.Error(err)
		}
	})
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// cut disables (or enables again) every link to and from server i.
func cut(t *testing.T, links [][]link, i int, off bool) {
	t.Helper()
	for a := range links {
		for b := range links[a] {
			if a == b || (a != i && b != i) {
				continue
			}
			for _, p := range []*toxiclient.Proxy{links[a][b].quorum, links[a][b].election} {
				var err error
				if off {
					err = p.Disable()
				} else {
					err = p.Enable()
				}
				if err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// TestLeaderCutOff: the ensemble elects a leader; cut off from the other
// two in both directions, the old leader stops serving (it lost its
// quorum) and the other two elect one of them; healed, it follows.
func TestLeaderCutOff(t *testing.T) {
	c, links := proxied(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	old, err := c.WaitLeader(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	cut(t, links, old, true)
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	next, err := c.WaitLeader(wctx, []int{old})
	if err != nil {
		t.Fatalf("no new leader among the other two: %v", err)
	}
	if next == old {
		t.Fatalf("server %d still leads", c.Servers[old].ID)
	}
	var mode string
	for {
		mode, err = c.Mode(ctx, old)
		if errors.Is(err, zkproc.ErrNotServing) || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !errors.Is(err, zkproc.ErrNotServing) {
		t.Errorf("the cut-off server %d: mode %q, %v; want it to stop serving", c.Servers[old].ID, mode, err)
	}
	cut(t, links, old, false)
	l, err := c.WaitLeader(ctx, nil)
	if err != nil {
		t.Fatalf("healed: %v", err)
	}
	if l == old {
		t.Logf("healed: server %d leads again", c.Servers[old].ID)
	}
}

// TestKillAndRestartTheLeader: the leader crashed, the other two elect
// one of them; restarted on its data, it rejoins as a follower or leads.
func TestKillAndRestartTheLeader(t *testing.T) {
	c, _ := proxied(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	old, err := c.WaitLeader(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Servers[old].Kill(); err != nil {
		t.Fatal(err)
	}
	next, err := c.WaitLeader(ctx, nil) // the killed server is not asked
	if err != nil {
		t.Fatal(err)
	}
	if next == old {
		t.Fatalf("the killed server %d leads", c.Servers[old].ID)
	}
	if err := c.Servers[old].Launch(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitLeader(ctx, nil); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	if err := c.Servers[next].Launch(); err == nil {
		t.Errorf("Launch of the running server %d: no error", c.Servers[next].ID)
	}
}

// TestNotInstalled: without java the ensemble does not start, with an
// error that names the package to install.
func TestNotInstalled(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := zkproc.StartCluster(context.Background(), zkproc.ClusterConfig{})
	if !errors.Is(err, zkproc.ErrNotInstalled) {
		t.Fatalf("StartCluster without java: %v; want ErrNotInstalled", err)
	}
}
