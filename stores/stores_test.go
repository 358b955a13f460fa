package stores_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/chaos"
	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/internal/alone"
	"github.com/lockproof/lockproof/internal/etcdproc"
	"github.com/lockproof/lockproof/internal/keeprun"
	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/internal/toxitest"
	"github.com/lockproof/lockproof/runner"
	"github.com/lockproof/lockproof/stores"
)

// matrix runs locks × faults × seeds on topology as `lockproof run
// --topology` does (runner.Prepare, runner.Run), and wants every verdict
// as predicted, every scenario conclusive (its fault bit), and status 0.
func matrix(t *testing.T, topology string, locks, faults []string, seeds []uint64) *contract.Summary {
	t.Helper()
	sum, _ := matrixOn(t, topology, env.Options{Kind: env.Process}, locks, faults, seeds)
	return sum
}

// matrixOn is matrix on the environment eo, and returns the faults the
// default matrix left out, with why (faults nil: the default matrix).
func matrixOn(t *testing.T, topology string, eo env.Options, locks, faults []string, seeds []uint64) (*contract.Summary, []error) {
	t.Helper()
	// Three store servers (JVMs for ZooKeeper) and a workload: not beside
	// a test whose verdicts need the cores (internal/alone).
	alone.Take(t)
	reg, err := stores.Registry()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	out := keeprun.Dir(t)
	if d := os.Getenv("LOCKPROOF_TEST_OUT"); d != "" {
		out = d + "/" + t.Name()
	}
	cfg := runner.Config{Locks: locks, Faults: faults, Seeds: seeds, Topology: topology, Registry: reg, Out: out, NoReport: true}
	if os.Getenv("LOCKPROOF_TEST_LOG") != "" {
		cfg.Logger = slog.Default()
	}
	left, err := runner.Prepare(ctx, &cfg, eo)
	if err != nil {
		if !redistest.InCI() && errorsIsUnavailable(err) {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	sum, err := runner.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(locks) * len(cfg.Faults) * len(seeds); len(sum.Scenarios) != want {
		t.Errorf("%d scenarios; want %d", len(sum.Scenarios), want)
	}
	for _, s := range sum.Scenarios {
		t.Logf("%s × %s seed %d: %v; fault %q", s.Lock, s.Fault, s.Seed, s.Verdicts, s.FaultEvidence)
		if s.Error != "" || s.FaultError != "" || len(s.Mismatches) > 0 || !s.Conclusive() || s.Ops == 0 {
			t.Errorf("%s × %s seed %d: error %q, fault error %q, mismatches %v, conclusive %v, %d ops (history %s)",
				s.Lock, s.Fault, s.Seed, s.Error, s.FaultError, s.Mismatches, s.Conclusive(), s.Ops, s.History)
		}
	}
	if st := sum.Status(); st != 0 {
		t.Errorf("status %d; want 0", st)
	}
	return sum, left
}

// TestEtcdLocksUnderPauseAndFailover: etcd's mutex and its fenced variant
// on a real etcd cluster of 3 processes, every link behind Toxiproxy,
// under pause-client (the holder's session expires while it is frozen:
// the unfenced lock's late write is accepted, the fenced one's refused)
// and failover (the leader killed: every lease holds).
func TestEtcdLocksUnderPauseAndFailover(t *testing.T) {
	if _, err := etcdproc.Binary(); err != nil {
		if redistest.InCI() {
			t.Fatalf("CI=true but %v", err)
		}
		t.Skip(err)
	}
	matrix(t, contract.TopologyEtcd, []string{"etcd-mutex", "etcd-fenced"},
		[]string{contract.FaultPauseClient, contract.FaultFailover}, []uint64{1})
}

// errorsIsUnavailable reports whether err says the environment cannot run here.
func errorsIsUnavailable(err error) bool { return errors.Is(err, env.ErrUnavailable) }

// TestZooKeeperLocksUnderPauseAndFailover: ZooKeeper's lock recipe and
// its fenced variant on a real ensemble of 3 servers, every link behind
// Toxiproxy, under pause-client (the holder's session expires while it is
// frozen: the article's GC pause; the unfenced lock's late write is
// accepted, the fenced one's refused) and failover (the leader killed:
// every lease holds).
func TestZooKeeperLocksUnderPauseAndFailover(t *testing.T) {
	if err := env.StoreMissing(contract.TopologyZooKeeper); err != nil {
		if redistest.InCI() {
			t.Fatalf("CI=true but %v", err)
		}
		t.Skip(err)
	}
	matrix(t, contract.TopologyZooKeeper, []string{"zk-lock", "zk-fenced"},
		[]string{contract.FaultPauseClient, contract.FaultFailover}, []uint64{1})
}

// TestEtcdLocksOnYourOwnCluster: lockproof run --topology etcd --provider
// byo on an etcd cluster it did not start (processes started here, known
// to the run by their client addresses alone, as a user's would be):
// the default matrix runs the clients' faults on it, every verdict as
// predicted, and leaves out, saying why, every fault that would strike
// the store's servers; no proxy is left on the user's Toxiproxy.
func TestEtcdLocksOnYourOwnCluster(t *testing.T) {
	if _, err := etcdproc.Binary(); err != nil {
		if redistest.InCI() {
			t.Fatalf("CI=true but %v", err)
		}
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := etcdproc.StartCluster(ctx, etcdproc.ClusterConfig{ElectionTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	var members []string
	for _, m := range c.Members {
		members = append(members, m.ClientAddr)
	}
	fenced := redistest.Start(t)
	toxi := toxitest.Server(t)
	byo := &env.BYOConfig{ToxiproxyURL: toxi.URL, Etcd: members, Fenced: fenced.Addr}
	sum, left := matrixOn(t, contract.TopologyEtcd, env.Options{Kind: env.BYO, BYO: byo}, []string{"etcd-mutex"}, nil, []uint64{1})
	ran := map[string]bool{}
	for _, s := range sum.Scenarios {
		ran[s.Fault] = true
	}
	for _, f := range []string{contract.FaultNone, contract.FaultPauseClient, contract.FaultCrashClient, contract.FaultPartition} {
		if !ran[f] {
			t.Errorf("%s did not run on the deployment you bring (ran %v)", f, ran)
		}
	}
	for _, f := range []string{contract.FaultFailover, contract.FaultMinorityPartition, contract.FaultPauseServer} {
		found := false
		for _, err := range left {
			found = found || (strings.Contains(err.Error(), f) && errors.Is(err, chaos.ErrNotOurServers))
		}
		if ran[f] || !found {
			t.Errorf("%s: ran %v, left out for not being lockproof's servers %v (left %v)", f, ran[f], found, left)
		}
	}
	if n := toxi.ProxyCount(); n != 0 {
		t.Errorf("%d proxies left on the user's Toxiproxy", n)
	}
}
