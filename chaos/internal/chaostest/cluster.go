package chaostest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/internal/rediscmd"
)

// CheckCluster checks a running Redis Cluster environment of the
// default shape (3 shards, a replica each), on any environment that can
// kill and restart nodes: a client reaches every shard through its own
// proxies only. Cutting one master off from the other nodes
// (CutClusterNode) stops its replication while the client still writes
// to it; promoting its replica (Takeover) moves its slots, and the write
// the cut master acknowledged is lost once it rejoins as the new
// master's replica. A node whose proxies refuse gives a refused dial. A
// killed node restarts as itself.
func CheckCluster(tb testing.TB, e env.Env) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topo := e.Topology()
	if topo.Name() != "cluster" || len(topo.Cluster) != 6 || len(topo.Data) != 0 || len(topo.Sentinels) != 0 || topo.Fenced.ID != "fenced" {
		tb.Fatalf("topology = %+v; want 6 cluster nodes, no Sentinel, a fenced node", topo)
	}
	v, err := env.WaitClusterAgreed(ctx, topo)
	if err != nil {
		tb.Fatal(err)
	}
	for i, n := range topo.Cluster {
		if n.Addr == n.Upstream || n.ReplProxy == "" || n.BusProxy == "" {
			tb.Fatalf("node %s is not behind its proxies: %+v", n.ID, n)
		}
		if i < 3 {
			if len(v.Masters[n.ID]) == 0 {
				tb.Fatalf("node %s serves no slot: %+v", n.ID, v)
			}
		} else if m := v.ReplicaOf[n.ID]; m != topo.Cluster[n.Shard].ID {
			tb.Fatalf("node %s (shard %d) replicates %q; want %s", n.ID, n.Shard, m, topo.Cluster[n.Shard].ID)
		}
	}
	// Formation gave each node its own config epoch (redisproc.FormCluster
	// says why): no collision bumped any, so the current epoch is the
	// node count and master i's epoch i+1; and every node knows every
	// replica's master, which a failover right after formation asks.
	for i, n := range topo.Cluster {
		admin := env.AdminClient(topo.Auth, n.Upstream)
		info, err := admin.ClusterInfo(ctx).Result()
		admin.Close()
		if err != nil {
			tb.Fatal(err)
		}
		want := fmt.Sprintf("cluster_current_epoch:%d\r\n", len(topo.Cluster))
		if i < 3 {
			want += fmt.Sprintf("cluster_my_epoch:%d\r\n", i+1)
		}
		for line := range strings.Lines(want) {
			if !strings.Contains(info, line) {
				tb.Errorf("node %s: CLUSTER INFO lacks %q:\n%s", n.ID, strings.TrimSpace(line), info)
			}
		}
		w, err := env.View(ctx, topo, n.ID)
		if err != nil {
			tb.Fatal(err)
		}
		for _, r := range topo.Cluster[3:] {
			if m := w.ReplicaOf[r.ID]; m != topo.Cluster[r.Shard].ID {
				tb.Errorf("node %s says %s replicates %q; want %s", n.ID, r.ID, m, topo.Cluster[r.Shard].ID)
			}
		}
	}
	// The client's keys land on every shard, through its own proxies:
	// with them cut, nothing gets through.
	l := Links(tb, e, "c1")
	c := ClusterClient(tb, e, l, time.Second)
	owners := map[string]bool{}
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		if err := c.Set(ctx, k, "before", 0).Err(); err != nil {
			tb.Fatal(err)
		}
		s, err := env.KeySlot(ctx, topo, k)
		if err != nil {
			tb.Fatal(err)
		}
		owners[v.Owner(s)] = true
	}
	if len(owners) != 3 {
		tb.Fatalf("8 keys landed on %d shards; want 3", len(owners))
	}
	slot, err := env.KeySlot(ctx, topo, "a")
	if err != nil {
		tb.Fatal(err)
	}
	victim, err := topo.Node(v.Owner(slot))
	if err != nil {
		tb.Fatal(err)
	}
	p, err := l.Proxy(victim.ID)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := p.AddToxic("cut", "timeout", "upstream", 1, map[string]any{"timeout": 0}); err != nil {
		tb.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(ctx, 500*time.Millisecond)
	err = c.Get(sctx, "a").Err()
	scancel()
	if err == nil {
		tb.Fatal("GET through a cut client proxy succeeded")
	}
	if err := p.RemoveToxic("cut"); err != nil {
		tb.Fatal(err)
	}

	// Cut the master of key "a" off from the other nodes: the client
	// still writes to it, and the write is not replicated.
	replica := v.Replicas(victim.ID)[0]
	heal, err := env.CutClusterNode(ctx, e, victim.ID)
	if err != nil {
		tb.Fatal(err)
	}
	healed := false
	defer func() {
		if !healed {
			_ = heal(context.Background())
		}
	}()
	if err := c.Set(ctx, "a", "lost", 0).Err(); err != nil {
		tb.Fatalf("SET on the cut master: %v", err)
	}
	if err := env.Takeover(ctx, topo, replica); err != nil {
		tb.Fatal(err)
	}
	var others []string
	for _, n := range topo.Cluster {
		if n.ID != victim.ID {
			others = append(others, n.ID)
		}
	}
	after, err := env.WaitClusterAgreed(ctx, topo, others...)
	for err == nil && after.Owner(slot) != replica {
		time.Sleep(50 * time.Millisecond)
		after, err = env.WaitClusterAgreed(ctx, topo, others...)
	}
	if err != nil {
		tb.Fatal(err)
	}
	// Heal: the old master follows the new one, and its write is gone.
	healed = true
	if err := heal(ctx); err != nil {
		tb.Fatal(err)
	}
	view, err := env.WaitClusterAgreed(ctx, topo)
	for err == nil && view.ReplicaOf[victim.ID] != replica {
		time.Sleep(50 * time.Millisecond)
		view, err = env.WaitClusterAgreed(ctx, topo)
	}
	if err != nil {
		tb.Fatal(err)
	}
	got, err := c.Get(ctx, "a").Result()
	if err != nil {
		tb.Fatalf("GET after the heal: %v", err)
	}
	if got != "before" {
		tb.Fatalf("GET a after the heal = %q; want %q (the cut master's write lost)", got, "before")
	}

	// A node whose proxies refuse (a killed process's port): the
	// client's dial is refused, so it knows the command was never sent;
	// undone, the node answers again.
	master, err := topo.Node(view.Owner(slot))
	if err != nil {
		tb.Fatal(err)
	}
	undo, err := env.RefuseNode(ctx, e, master.ID)
	if err != nil {
		tb.Fatal(err)
	}
	c2 := ClusterClient(tb, e, l, time.Second) // no pooled connection
	err = c2.Get(ctx, "a").Err()
	if !rediscmd.SurelyNoEffect(err) || !strings.Contains(err.Error(), "refused") {
		tb.Errorf("GET through refusing proxies: %v; want a refused dial (surely no effect)", err)
	}
	if err := undo(ctx); err != nil {
		tb.Fatal(err)
	}
	if err := c2.Get(ctx, "a").Err(); err != nil {
		tb.Errorf("GET after the proxies accept again: %v", err)
	}

	// A node killed and restarted keeps its identity (its nodes.conf)
	// and its place: it comes back as the same node, replicating the
	// same master.
	rep := view.Replicas(master.ID)
	if len(rep) == 0 {
		tb.Fatalf("master %s has no replica: %+v", master.ID, view)
	}
	before := view.RedisIDs[rep[0]]
	if err := e.Kill(ctx, rep[0]); err != nil {
		tb.Fatal(err)
	}
	if err := e.Restart(ctx, rep[0]); err != nil {
		tb.Fatal(err)
	}
	view, err = env.WaitClusterAgreed(ctx, topo)
	for err == nil && view.ReplicaOf[rep[0]] != master.ID {
		time.Sleep(50 * time.Millisecond)
		view, err = env.WaitClusterAgreed(ctx, topo)
	}
	if err != nil {
		tb.Fatal(err)
	}
	if got := view.RedisIDs[rep[0]]; got != before {
		tb.Errorf("%s came back as cluster node %s; want %s (its nodes.conf kept)", rep[0], got, before)
	}
}
