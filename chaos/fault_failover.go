package chaos

import (
	"time"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/contract"
)

func failoverFault() Fault {
	return Fault{Name: contract.FaultFailover, Doc: "the master cut off from its replicas and Sentinels (split brain) until Sentinel promotes a replica; writes in the replication gap are lost", Matrix: true,
		Scope: ScopeFresh, Duration: 6 * time.Second,
		strike: func(s *striking) (armed, error) {
			return armed{fault: failover(s), window: s.sc.TTL}, nil
		}}
}

// failover is the nemesis of a failover: it isolates the master from its
// replicas and Sentinels; clients keep using it until they follow
// Sentinel's switch, so leases taken there since the partition are lost.
// Without replication proxies (bring your own), it asks Sentinel.
func failover(s *striking) *nemesis.Failover {
	mode := nemesis.FailoverPartition
	if m, err := env.Master(s.ctx, s.env.Topology()); err == nil && m.ReplProxy == "" {
		mode = nemesis.FailoverCommand
	}
	return &nemesis.Failover{Env: s.env, Mode: mode,
		ReplLatency: 20 * time.Millisecond, ReplLag: s.sc.TTL, Promote: s.sc.Duration}
}
