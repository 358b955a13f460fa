package env_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/internal/chaostest"
)

func TestProcessTopology(t *testing.T) {
	e := chaostest.StartProcess(t, env.Spec{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topo := e.Topology()
	if len(topo.Data) != 3 || len(topo.Sentinels) != 3 || topo.Fenced.ID != "fenced" {
		t.Fatalf("topology = %+v; want 3 data nodes, 3 sentinels, a fenced node", topo)
	}
	m, err := env.Master(ctx, topo)
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != "data-0" {
		t.Fatalf("master = %s; want data-0", m.ID)
	}
	// Sentinel knows the replicas by their replication proxies.
	rs, err := env.Replicas(ctx, topo.Auth, topo.Sentinels[0], topo.MasterName)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range topo.Data[1:] {
		if n.Addr == n.Upstream {
			t.Fatalf("node %s is not behind a replication proxy: %+v", n.ID, n)
		}
		if _, ok := rs[n.Addr]; !ok {
			t.Errorf("sentinel replicas %v lack %s at its proxy %s", rs, n.ID, n.Addr)
		}
	}
	// Every server and Sentinel asks the environment's password (issue 47
	// item 12): a local stranger without it is refused, and cannot read
	// it off a configuration file.
	chaostest.AsksPassword(t, e)
	proc, err := e.Process("data-0")
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(proc.Dir, "redis.conf")); err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("data-0's redis.conf: %v; want it its owner's alone", err)
	}
	// A client's traffic goes through its own proxy.
	l := chaostest.Links(t, e, "c1")
	c := chaostest.FailoverClient(t, e, l, time.Second)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	p, err := l.Proxy("data-0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.AddToxic("cut", "timeout", "upstream", 1, map[string]any{"timeout": 0}); err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(ctx, 500*time.Millisecond)
	err = c.Ping(sctx).Err()
	scancel()
	if err == nil {
		t.Fatal("PING through a cut client proxy succeeded")
	}
	if err := p.RemoveToxic("cut"); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after the cut healed: %v", err)
	}
}

// TestProcessFailoverKill kills the master; Sentinel promotes a replica and
// the client follows through its own proxy to the new master.
func TestProcessFailoverKill(t *testing.T) {
	e := chaostest.StartProcess(t, env.Spec{DownAfter: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topo := e.Topology()
	l := chaostest.Links(t, e, "c1")
	c := chaostest.FailoverClient(t, e, l, time.Second)
	if err := c.Set(ctx, "before", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, "WAIT", 2, 2000).Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.Kill(ctx, "data-0"); err != nil {
		t.Fatal(err)
	}
	m, err := env.WaitMaster(ctx, topo, "data-0")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("new master %s at %s", m.ID, m.Addr)
	// The client follows (its dial maps the new master to its own proxy).
	var got string
	for {
		got, err = c.Get(ctx, "before").Result()
		if err == nil && c.Set(ctx, "after", "2", 0).Err() == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("client did not follow the failover: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if got != "1" {
		t.Fatalf("replicated key = %q; want 1", got)
	}
	// The traffic passed the client's proxy to the new master: cutting it stops the client.
	p, err := l.Proxy(m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Disable(); err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
	err = c.Ping(sctx).Err()
	scancel()
	if err == nil {
		t.Fatalf("PING succeeded with the client's proxy to the new master %s down", m.ID)
	}
	if err := p.Enable(); err != nil {
		t.Fatal(err)
	}
	// The killed node comes back, and the Sentinels settle with every other
	// node a replica, up, of the master they agree on: ask them, rather than
	// assume the first new master is still it (on a loaded machine Sentinel
	// may fail over twice).
	if err := e.Restart(ctx, "data-0"); err != nil {
		t.Fatal(err)
	}
	cur, err := env.WaitConverged(ctx, topo)
	if err != nil {
		t.Fatal(err)
	}
	admin := env.AdminClient(topo.Auth, topo.Data[0].Upstream)
	defer admin.Close()
	if cur.ID != "data-0" {
		info, _ := admin.Info(ctx, "replication").Result()
		if !strings.Contains(info, "role:slave") {
			t.Fatalf("restarted data-0 is not a replica of %s: %s", cur.ID, info)
		}
	}
}

// TestProcessFailoverPartition cuts the master's replication proxy: Sentinels
// and replicas lose it and promote a replica.
func TestProcessFailoverPartition(t *testing.T) {
	e := chaostest.StartProcess(t, env.Spec{DownAfter: 500 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topo := e.Topology()
	p, err := e.Proxies().API.Proxy(topo.Data[0].ReplProxy)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"upstream", "downstream"} {
		if _, err := p.AddToxic("part-"+s, "timeout", s, 1, map[string]any{"timeout": 0}); err != nil {
			t.Fatal(err)
		}
	}
	m, err := env.WaitMaster(ctx, topo, "data-0")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("new master %s", m.ID)
}
