package env

import (
	"strings"
	"testing"
)

// TestClusterNodes orders a cluster's nodes as DiscoverCluster says
// (masters by first slot, then shard by shard their replicas), and
// refuses a cluster that is not healthy, saying which node and why.
func TestClusterNodes(t *testing.T) {
	const healthy = `r2 10.0.0.5:7005@17005 slave m1 0 1 2 connected
m2 10.0.0.2:7002@17002 master - 0 1 2 connected 5461-10922
m1 10.0.0.1:7001@17001 myself,master - 0 1 1 connected 0-5460
r1 10.0.0.4:7004@17004 slave m2 0 1 2 connected
m3 10.0.0.3:7003@17003 master - 0 1 3 connected 10923-16383 [77->-m1]`
	nodes, err := clusterNodes(healthy)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		addr  string
		shard int
	}{{"10.0.0.1:7001", 0}, {"10.0.0.2:7002", 1}, {"10.0.0.3:7003", 2}, {"10.0.0.5:7005", 0}, {"10.0.0.4:7004", 1}}
	if len(nodes) != len(want) {
		t.Fatalf("%d nodes: %+v; want %d", len(nodes), nodes, len(want))
	}
	for i, n := range nodes {
		if n.ID != NodeID(RoleCluster, i) || n.Addr != want[i].addr || n.Upstream != n.Addr || n.Shard != want[i].shard || n.Role != RoleCluster {
			t.Errorf("node %d = %+v; want %s at %s, shard %d", i, n, NodeID(RoleCluster, i), want[i].addr, want[i].shard)
		}
	}
	for _, c := range []struct{ text, want string }{
		{strings.Replace(healthy, "slave m1", "slave,fail m1", 1), "r2 at 10.0.0.5:7005 is fail"},
		{strings.Replace(healthy, "myself,master", "myself,master,fail?", 1), "m1 at 10.0.0.1:7001 is fail?"},
		{strings.Replace(healthy, " 10923-16383 [77->-m1]", "", 1), "master m3 at 10.0.0.3:7003 serves no slot"},
		{strings.Replace(healthy, "slave m2", "slave gone", 1), "1 of 5 nodes"},
		{"m1 10.0.0.1:7001 master", "want 8 fields"},
		{strings.Replace(healthy, "0-5460", "0-x", 1), `slots "0-x"`},
	} {
		if _, err := clusterNodes(c.text); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("clusterNodes: %v; want an error saying %q\n%s", err, c.want, c.text)
		}
	}
}
