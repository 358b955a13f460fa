package docker_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/lockproof/lockproof/chaos"
	"github.com/lockproof/lockproof/chaos/docker"
	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/internal/chaostest"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/internal/keeprun"
	"github.com/lockproof/lockproof/runner"
	"github.com/lockproof/lockproof/stores"
	"github.com/lockproof/lockproof/zoo"
)

// TestFencedMatrixOnDocker runs the fenced lock's scenarios on the Docker
// environment, as `lockproof run --env docker` runs them: the Sentinel
// topology's faults (one of each scope: the clients', the servers', a
// request held in the network, a clock) and the Redis Cluster's faults
// that act on its servers. Every verdict must be what the matrix predicts
// (status 0: no mismatch, nothing inconclusive), and every fault must bite.
// The chaos package runs the same scenarios on processes; this is the one
// place its scenarios meet containers, so it lives with the Docker
// environment, in the module a processes-only user does not import.
//
// It runs when LOCKPROOF_ENV=docker asks for the scenarios on containers
// (.ci/run's Docker step), as the chaos package's did before the split: in
// the test command it would run beside the chaos package's timing-bound
// scenarios, on two cores, for two and a half minutes of containers.
func TestFencedMatrixOnDocker(t *testing.T) {
	if env.Kind(os.Getenv(env.EnvVar)) != env.Docker {
		t.Skipf("the fenced lock's scenarios on containers run with %s=docker", env.EnvVar)
	}
	sharedEnv(t)
	cases := []struct {
		topology string
		faults   []string
	}{
		{contract.TopologySentinel, []string{contract.FaultNone, contract.FaultLatency, contract.FaultPartition, contract.FaultPauseClient,
			contract.FaultPauseServer, contract.FaultCrashClient, contract.FaultClockSkew, contract.FaultLateDelivery}},
		{contract.TopologyCluster, clusterServerFaults()},
	}
	for _, c := range cases {
		t.Run(c.topology, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
			defer cancel()
			do := docker.Options{Image: os.Getenv(docker.ImageEnvVar), Logger: testLogger()}
			cfg := runner.Config{Registry: zoo.Builtin(),
				Locks:    []string{"fenced"},
				Faults:   c.faults,
				Seeds:    []uint64{1},
				Topology: c.topology,
				Out:      keeprun.Dir(t),
				NoReport: true,
			}
			if c.topology == contract.TopologySentinel {
				cfg.Duration = 3 * time.Second // none of these faults needs longer; the cluster's failovers do
			}
			if _, err := runner.Prepare(ctx, &cfg, env.Options{Kind: env.Docker, Docker: docker.With(do), DockerCheck: docker.Check(do)}); err != nil {
				t.Fatal(err)
			}
			sum, err := runner.Run(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(sum.Scenarios) != len(c.faults) {
				t.Errorf("%d scenarios; want %d (one per fault)", len(sum.Scenarios), len(c.faults))
			}
			for _, s := range sum.Scenarios {
				if s.Error != "" || s.FaultError != "" || len(s.Mismatches) > 0 || !s.Conclusive() || s.Ops == 0 {
					t.Errorf("%s: error %q, fault error %q, mismatches %v, conclusive %v, %d ops (history %s)",
						s.Fault, s.Error, s.FaultError, s.Mismatches, s.Conclusive(), s.Ops, s.History)
				}
			}
			if st := sum.Status(); st != 0 {
				t.Errorf("status %d; want 0", st)
			}
		})
	}
}

// clusterServerFaults are the Redis Cluster's faults that run on Docker,
// less those that act on clients alone (the Sentinel case runs them), and
// none.
func clusterServerFaults() []string {
	var out []string
	for _, name := range runner.FaultsOn(contract.TopologyCluster) {
		f, _ := chaos.Lookup(name)
		if f.Available(env.Docker, contract.TopologyCluster) != nil {
			continue
		}
		if f.Scope != chaos.ScopeClients || name == contract.FaultNone {
			out = append(out, name)
		}
	}
	return out
}

// TestStoresAskALoginOnDocker: the consensus stores the Docker
// environment starts refuse a client without their login, and serve one
// with it (issue 62, item 9: their ports are published on loopback).
// Like TestStoresMatrixOnDocker, it runs with LOCKPROOF_ENV=docker.
func TestStoresAskALoginOnDocker(t *testing.T) {
	if env.Kind(os.Getenv(env.EnvVar)) != env.Docker {
		t.Skipf("the stores' containers start with %s=docker", env.EnvVar)
	}
	sharedEnv(t)
	for _, topo := range contract.StoreTopologies() {
		t.Run(topo, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			do := docker.Options{Image: os.Getenv(docker.ImageEnvVar), Logger: testLogger()}
			e, err := env.Open(ctx, env.Options{Kind: env.Docker, Docker: docker.With(do), DockerCheck: docker.Check(do), Spec: env.Spec{Store: topo}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if err := e.Close(ctx); err != nil {
					t.Errorf("close: %v", err)
				}
			})
			chaostest.StoreAsksALogin(t, ctx, e.Topology())
		})
	}
}

// TestStoresMatrixOnDocker runs the consensus stores' locks on clusters
// of containers (lockproof run --topology etcd|zookeeper --provider
// docker): the clients' pause and crash, and every fault of the leader
// (killed, cut off from its peers, frozen), each verdict as predicted and
// each fault biting. Like TestFencedMatrixOnDocker, it runs with
// LOCKPROOF_ENV=docker.
func TestStoresMatrixOnDocker(t *testing.T) {
	if env.Kind(os.Getenv(env.EnvVar)) != env.Docker {
		t.Skipf("the stores' locks' scenarios on containers run with %s=docker", env.EnvVar)
	}
	sharedEnv(t)
	reg, err := stores.Registry()
	if err != nil {
		t.Fatal(err)
	}
	faults := []string{contract.FaultPauseClient, contract.FaultCrashClient, contract.FaultFailover, contract.FaultMinorityPartition, contract.FaultPauseServer}
	for _, topo := range contract.StoreTopologies() {
		t.Run(topo, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
			defer cancel()
			do := docker.Options{Image: os.Getenv(docker.ImageEnvVar), Logger: testLogger()}
			locks := runner.LocksOn(reg, topo)
			cfg := runner.Config{Locks: locks, Faults: faults, Seeds: []uint64{1},
				Topology: topo, Registry: reg, Out: keeprun.Dir(t), NoReport: true}
			if _, err := runner.Prepare(ctx, &cfg, env.Options{Kind: env.Docker, Docker: docker.With(do), DockerCheck: docker.Check(do)}); err != nil {
				t.Fatal(err)
			}
			sum, err := runner.Run(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(locks) != 2 || len(sum.Scenarios) != len(locks)*len(faults) {
				t.Errorf("%d scenarios of %v; want %d", len(sum.Scenarios), locks, 2*len(faults))
			}
			for _, s := range sum.Scenarios {
				t.Logf("%s × %s: %v; %s", s.Lock, s.Fault, s.Verdicts, s.FaultEvidence)
				if s.Error != "" || s.FaultError != "" || len(s.Mismatches) > 0 || !s.Conclusive() || s.Ops == 0 {
					t.Errorf("%s × %s: error %q, fault error %q, mismatches %v, conclusive %v, %d ops (history %s)",
						s.Lock, s.Fault, s.Error, s.FaultError, s.Mismatches, s.Conclusive(), s.Ops, s.History)
				}
			}
			if st := sum.Status(); st != 0 {
				t.Errorf("status %d; want 0", st)
			}
		})
	}
}
