package env_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/internal/chaostest"
	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/internal/alone"
	"github.com/lockproof/lockproof/internal/redistest"
)

// startStore starts the store environment of topology, or skips (fails
// in CI) when this machine lacks its binaries; Close is checked to stop
// every process and proxy.
func startStore(t *testing.T, topology string) *env.StoreEnv {
	t.Helper()
	alone.Take(t) // a store's servers start beside no test that needs the cores

	if err := env.StoreMissing(topology); err != nil {
		if redistest.InCI() {
			t.Fatalf("CI=true but %v", err)
		}
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	e, err := env.Open(ctx, env.Options{Kind: env.Process, Spec: env.Spec{Store: topology}})
	if err != nil {
		t.Fatal(err)
	}
	se := e.(*env.StoreEnv)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := se.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
		for _, n := range se.Topology().Nodes() {
			if c, err := net.DialTimeout("tcp", n.Upstream, time.Second); err == nil {
				c.Close()
				t.Errorf("%s still listens at %s after Close", n.ID, n.Upstream)
			}
		}
	})
	return se
}

// ask sends one plain request to a member's client port through the
// links' proxy for it: etcd's /version over HTTP, ZooKeeper's ruok.
func ask(ctx context.Context, l *env.Links, topology string, n env.Node) (string, error) {
	c, err := l.Dial(ctx, "tcp", n.Addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if topology == contract.TopologyZooKeeper {
		if _, err := io.WriteString(c, "ruok"); err != nil {
			return "", err
		}
		b, err := io.ReadAll(c)
		return string(b), err
	}
	if _, err := fmt.Fprintf(c, "GET /version HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", n.Addr); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// serves waits (30s at most) until member n answers through l as want
// says, after what happened to it (after).
func serves(t *testing.T, ctx context.Context, l *env.Links, topology string, n env.Node, want, after string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		got, err := ask(actx, l, topology, n)
		acancel()
		if err == nil && strings.Contains(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after %s: %q, %v", n.ID, after, got, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestStoreEnvironments: each consensus store runs as 3 processes with
// the fenced Redis beside them; a client reaches every member through
// its own proxy (a cut there cuts it off); the leader, cut off from its
// peers (nemesis.Leader), is replaced by one the others elect, and the
// heal leaves one leader; a killed member restarts and serves again, and
// so does one wiped of its data.
func TestStoreEnvironments(t *testing.T) {
	for _, topology := range contract.StoreTopologies() {
		t.Run(topology, func(t *testing.T) {
			e := startStore(t, topology)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			topo := e.Topology()
			if topo.Name() != topology || len(topo.Store) != 3 || topo.Fenced.ID != "fenced" || len(topo.Data)+len(topo.Cluster)+len(topo.Sentinels) != 0 {
				t.Fatalf("topology %s: %+v; want 3 members of the store and the fenced node, no Redis deployment", topo.Name(), topo)
			}
			chaostest.StoreAsksALogin(t, ctx, topo)
			want := map[string]string{contract.TopologyEtcd: "etcdserver", contract.TopologyZooKeeper: "imok"}[topology]
			l := chaostest.Links(t, e, "c1")
			for _, n := range topo.Store {
				if len(n.PeerProxies) == 0 {
					t.Errorf("%s has no peer proxy", n.ID)
				}
				actx, acancel := context.WithTimeout(ctx, 5*time.Second)
				got, err := ask(actx, l, topology, n)
				acancel()
				if err != nil || !strings.Contains(got, want) {
					t.Fatalf("%s through c1's proxy: %q, %v; want %q", n.ID, got, err, want)
				}
			}
			p, err := l.Proxy(topo.Store[0].ID)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.AddToxic("cut", "timeout", "upstream", 1, map[string]any{"timeout": 0}); err != nil {
				t.Fatal(err)
			}
			actx, acancel := context.WithTimeout(ctx, 500*time.Millisecond)
			if got, err := ask(actx, l, topology, topo.Store[0]); err == nil && strings.Contains(got, want) {
				t.Errorf("%s answered through a cut proxy: %q", topo.Store[0].ID, got)
			}
			acancel()
			if err := p.RemoveToxic("cut"); err != nil {
				t.Fatal(err)
			}

			old, err := env.StoreLeader(ctx, e)
			if err != nil {
				t.Fatal(err)
			}
			f := &nemesis.Leader{Env: e, Mode: nemesis.LeaderIsolate, Label: contract.FaultMinorityPartition}
			if err := f.Start(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(3 * time.Second)
			if err := f.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			if ev := f.Evidence(); !ev.Bit || !strings.Contains(ev.Text, old.ID) {
				t.Errorf("leader %s cut off: evidence %+v; want another leader elected", old.ID, ev)
			}

			lead, err := env.StoreLeader(ctx, e)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Kill(ctx, lead.ID); err != nil {
				t.Fatal(err)
			}
			if next, err := env.StoreLeader(ctx, e); err != nil || next.ID == lead.ID {
				t.Errorf("after the leader %s was killed: leader %v, %v; want another", lead.ID, next.ID, err)
			}
			if err := e.Restart(ctx, lead.ID); err != nil {
				t.Fatal(err)
			}
			if err := e.Restart(ctx, lead.ID); err == nil {
				t.Error("a second Restart of a running member succeeded")
			}
			if err := e.Kill(ctx, "fenced"); err == nil {
				t.Error("Kill of the fenced resources' Redis succeeded; the store's faults are the store's")
			}
			serves(t, ctx, l, topology, lead, want, "its restart")
			if _, err := env.StoreLeader(ctx, e); err != nil {
				t.Errorf("after the restart: %v", err)
			}

			// The leader killed and back with its data wiped: it rejoins
			// (etcd: as a new member) and serves again.
			lead, err = env.StoreLeader(ctx, e)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Kill(ctx, lead.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := env.StoreLeader(ctx, e); err != nil {
				t.Fatalf("after the leader %s was killed: %v", lead.ID, err)
			}
			if err := e.Wipe(ctx, lead.ID); err != nil {
				t.Fatal(err)
			}
			serves(t, ctx, l, topology, lead, want, "its wipe")
			if _, err := env.StoreLeader(ctx, e); err != nil {
				t.Errorf("after the wipe: %v", err)
			}
		})
	}
}
