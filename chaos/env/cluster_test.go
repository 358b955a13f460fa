package env_test

import (
	"testing"
	"time"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/internal/chaostest"
)

// TestProcessCluster starts a Redis Cluster of processes behind proxies
// and checks it as every environment's cluster is checked
// (chaostest.CheckCluster): the proxies carry every link, a cut master
// loses its write to a takeover, refusing proxies refuse, a restarted
// node is itself again.
func TestProcessCluster(t *testing.T) {
	chaostest.CheckCluster(t, chaostest.StartProcess(t, env.Spec{Cluster: &env.ClusterSpec{NodeTimeout: time.Second}}))
}
