package nemesis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/contract"
)

// FailoverMode says how Failover makes Sentinel promote a replica.
type FailoverMode string

// The failover modes.
const (
	// FailoverPartition blackholes the master's replication proxy: replicas
	// and Sentinels lose it and promote a replica while clients still reach
	// the old master through their own proxies (a split brain) until they
	// follow Sentinel's switch. Stop heals the partition; Sentinel then makes
	// the old master a replica, and its writes since the partition are lost.
	FailoverPartition FailoverMode = "partition"
	// FailoverKill kills the master with SIGKILL; Stop restarts it (empty),
	// and Sentinel makes it a replica.
	FailoverKill FailoverMode = "kill"
	// FailoverCommand asks Sentinel to fail over (SENTINEL FAILOVER), or
	// on a Redis Cluster the replica (CLUSTER FAILOVER, env.ClusterFailover): a
	// coordinated switch, the gentlest mode, and the one of a deployment
	// lockproof does not run (bring your own).
	FailoverCommand FailoverMode = "command"
	// FailoverTakeover, on a Redis Cluster, makes the master's replica
	// take its slots at once (CLUSTER FAILOVER TAKEOVER), without the
	// other masters' votes and while the master still serves: the old
	// master learns of it from its next exchange with the new one and
	// becomes its replica, and its writes the replica had not received
	// are lost.
	FailoverTakeover FailoverMode = "takeover"
)

// Failover makes Sentinel promote a replica of the current master or, on
// a Redis Cluster (env.Topology.Cluster), makes the cluster promote a
// replica of the master serving Slot:
//
//   - FailoverKill: the master is killed; the other masters fail it after
//     the node timeout and its replica is elected. Stop restarts it
//     (empty, with its nodes.conf): it rejoins as the new master's replica.
//   - FailoverPartition: the master is cut off from the other nodes
//     (env.CutClusterNode) and serves its clients alone for NodeTimeout,
//     its writes lost; then its replica takes over (env.Takeover), as the
//     majority would have promoted it (the cut cannot stop the master's
//     own outgoing links, so the majority never fails it on its own: see
//     env.CutClusterNode). Stop heals the cut.
//   - FailoverTakeover: the replica takes over at once.
//
// With ReplLatency > 0, Start first slows the master's replication proxy by
// that much (each way) for ReplLag, so that writes the master acknowledged
// are not yet on the replicas when it fails: the window in which a failover
// loses a lock. Keep 2×ReplLatency well below Sentinel's DownAfter, or the
// slowness alone fails the master over.
type Failover struct {
	Env  env.Env
	Mode FailoverMode
	// ReplLatency slows the master's replication link before the failover.
	ReplLatency time.Duration
	// ReplLag is how long the link is slowed before the master fails.
	ReplLag time.Duration
	// Promote bounds the wait for the promotion; 0 means 30s.
	Promote time.Duration
	// Kind is the fault kind the window's name starts with; "" means
	// contract.FaultFailover.
	Kind string
	// Slot is, on a Redis Cluster, the hash slot whose master fails.
	Slot int
	// NodeTimeout is, on a Redis Cluster, how long a partitioned master
	// serves alone before its replica takes over (FailoverPartition).
	NodeTimeout time.Duration

	mu       sync.Mutex
	old      env.Node
	promoted env.Node
	slow     *Network
	cut      *Network
	heal     func(context.Context) error // a cluster node's cut
	killed   bool
}

// Name implements Fault.
func (f *Failover) Name() string {
	m := f.Mode
	if m == "" {
		m = FailoverPartition
	}
	kind := f.Kind
	if kind == "" {
		kind = contract.FaultFailover
	}
	return kind + " " + string(m)
}

// Old returns the master that was failed (after Start).
func (f *Failover) Old() env.Node { f.mu.Lock(); defer f.mu.Unlock(); return f.old }

// Promoted returns the master Sentinel promoted (after a successful Start).
func (f *Failover) Promoted() env.Node { f.mu.Lock(); defer f.mu.Unlock(); return f.promoted }

// Start fails the current master and waits until Sentinel promotes another.
func (f *Failover) Start(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	topo := f.Env.Topology()
	if len(topo.Cluster) > 0 {
		return f.startCluster(ctx, topo)
	}
	old, err := env.Master(ctx, topo)
	if err != nil {
		return fmt.Errorf("%s: %w", f.Name(), err)
	}
	f.old = old
	var repl *toxiclient.Proxy
	if old.ReplProxy != "" {
		if repl, err = f.Env.Proxies().API.Proxy(old.ReplProxy); err != nil {
			return fmt.Errorf("%s: replication proxy %s: %w", f.Name(), old.ReplProxy, err)
		}
	}
	if f.ReplLatency > 0 && repl != nil {
		if err := f.slowReplication(ctx, repl); err != nil {
			return err
		}
	}
	switch f.Mode {
	case FailoverPartition, "":
		if repl == nil {
			return fmt.Errorf("%s: master %s has no replication proxy: %w", f.Name(), old.ID, env.ErrUnsupported)
		}
		f.cut = Partition("isolate master", []*toxiclient.Proxy{repl})
		if err := f.cut.Start(ctx); err != nil {
			return err
		}
	case FailoverKill:
		if err := f.Env.Kill(ctx, old.ID); err != nil {
			return fmt.Errorf("%s: %w", f.Name(), err)
		}
		f.killed = true
	case FailoverCommand:
		if err := env.Failover(ctx, topo); err != nil {
			return fmt.Errorf("%s: %w", f.Name(), err)
		}
	default:
		return fmt.Errorf("failover: Mode %q: want partition, kill or command", f.Mode)
	}
	wctx, cancel := f.promotion(ctx)
	defer cancel()
	n, err := env.WaitMaster(wctx, topo, old.ID)
	if err != nil {
		return fmt.Errorf("%s: %w", f.Name(), err)
	}
	f.promoted = n
	return nil
}

// Stop heals: it removes the slow link and the partition, and restarts a
// killed master. Sentinel then makes the old master a replica.
func (f *Failover) Stop(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	if f.heal != nil {
		errs = append(errs, f.heal(ctx))
		f.heal = nil
	}
	if f.slow != nil {
		errs = append(errs, f.slow.Stop(ctx))
		f.slow = nil
	}
	if f.cut != nil {
		errs = append(errs, f.cut.Stop(ctx))
		f.cut = nil
	}
	if f.killed {
		errs = append(errs, f.Env.Restart(ctx, f.old.ID))
		f.killed = false
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s: heal: %w", f.Name(), err)
	}
	return nil
}

// ErrFailedOverAgain: after the failover, Sentinel promoted yet another
// node (a false failover: down-after too short for the machine). The run
// then saw three masters, not the two its failover stands for.
var ErrFailedOverAgain = errors.New("the Sentinels failed over again")

// Check reports whether the master is still the node Start saw promoted
// (ErrFailedOverAgain if not); call it when the run's ops are done.
func (f *Failover) Check(ctx context.Context) error {
	f.mu.Lock()
	promoted := f.promoted
	f.mu.Unlock()
	if promoted.ID == "" {
		return nil // nothing promoted: the evidence says so
	}
	if topo := f.Env.Topology(); len(topo.Cluster) > 0 {
		v, err := env.WaitClusterAgreed(ctx, topo)
		if err != nil {
			return fmt.Errorf("%s: who serves slot %d after it: %w", f.Name(), f.Slot, err)
		}
		if o := v.Owner(f.Slot); o != promoted.ID {
			return fmt.Errorf("%s: %w: slot %d is served by %s, not %s", f.Name(), ErrFailedOverAgain, f.Slot, o, promoted.ID)
		}
		return nil
	}
	m, err := env.Master(ctx, f.Env.Topology())
	if err != nil {
		return fmt.Errorf("%s: who is master after it: %w", f.Name(), err)
	}
	if m.ID != promoted.ID {
		return fmt.Errorf("%s: %w: the master is %s, not %s", f.Name(), ErrFailedOverAgain, m.ID, promoted.ID)
	}
	return nil
}

// startCluster fails the master of f.Slot (see Failover) and waits until
// every other node agrees that another serves the slot. f.mu is held.
func (f *Failover) startCluster(ctx context.Context, topo env.Topology) error {
	v, err := env.WaitClusterAgreed(ctx, topo)
	if err != nil {
		return fmt.Errorf("%s: %w", f.Name(), err)
	}
	if f.old, err = topo.Node(v.Owner(f.Slot)); err != nil {
		return fmt.Errorf("%s: master of slot %d: %w", f.Name(), f.Slot, err)
	}
	replicas := v.Replicas(f.old.ID)
	if len(replicas) == 0 {
		return fmt.Errorf("%s: master %s has no replica to promote", f.Name(), f.old.ID)
	}
	if f.ReplLatency > 0 && f.old.ReplProxy != "" {
		repl, err := f.Env.Proxies().API.Proxy(f.old.ReplProxy)
		if err != nil {
			return fmt.Errorf("%s: replication proxy %s: %w", f.Name(), f.old.ReplProxy, err)
		}
		if err := f.slowReplication(ctx, repl); err != nil {
			return err
		}
	}
	switch f.Mode {
	case FailoverKill:
		// A dead process's port refuses (env.Crash says why); the heal
		// restarts it.
		if f.heal, err = env.Crash(ctx, f.Env, f.old.ID); err != nil {
			return fmt.Errorf("%s: %w", f.Name(), err)
		}
	case FailoverPartition, "":
		if f.heal, err = env.CutClusterNode(ctx, f.Env, f.old.ID); err != nil {
			return fmt.Errorf("%s: %w", f.Name(), err)
		}
		if err := sleep(ctx, f.NodeTimeout); err != nil {
			return fmt.Errorf("%s: %w", f.Name(), err)
		}
		if err := env.Takeover(ctx, topo, replicas[0]); err != nil {
			return fmt.Errorf("%s: %w", f.Name(), err)
		}
	case FailoverTakeover:
		if err := env.Takeover(ctx, topo, replicas[0]); err != nil {
			return fmt.Errorf("%s: %w", f.Name(), err)
		}
	case FailoverCommand:
		if err := env.ClusterFailover(ctx, topo, replicas[0]); err != nil {
			return fmt.Errorf("%s: %w", f.Name(), err)
		}
	default:
		return fmt.Errorf("failover on a cluster: Mode %q: want kill, partition, takeover or command", f.Mode)
	}
	wctx, cancel := f.promotion(ctx)
	defer cancel()
	var others []string
	for _, n := range topo.Cluster {
		if n.ID != f.old.ID {
			others = append(others, n.ID)
		}
	}
	for {
		v, err := env.WaitClusterAgreed(wctx, topo, others...)
		if err != nil {
			return fmt.Errorf("%s: wait for a new master of slot %d: %w", f.Name(), f.Slot, err)
		}
		o := v.Owner(f.Slot)
		if o != "" && o != f.old.ID {
			f.promoted, err = topo.Node(o)
			return err
		}
		if err := sleep(wctx, 20*time.Millisecond); err != nil {
			return fmt.Errorf("%s: wait for a new master of slot %d: %w (the other nodes still agree it is %q's; %s's replicas: %v)",
				f.Name(), f.Slot, err, o, f.old.ID, v.Replicas(f.old.ID))
		}
	}
}

// slowReplication slows the master's replication link repl by
// ReplLatency and lets ReplLag pass, so that the master's latest writes
// are not yet on its replicas when it fails. f.mu is held.
func (f *Failover) slowReplication(ctx context.Context, repl *toxiclient.Proxy) error {
	f.slow = Latency("slow replication", []*toxiclient.Proxy{repl}, f.ReplLatency, 0)
	if err := f.slow.Start(ctx); err != nil {
		return err
	}
	if err := sleep(ctx, f.ReplLag); err != nil {
		return fmt.Errorf("%s: %w", f.Name(), err)
	}
	return nil
}

// promotion bounds the wait for the promotion: Promote, 30s when unset.
func (f *Failover) promotion(ctx context.Context) (context.Context, context.CancelFunc) {
	wait := f.Promote
	if wait <= 0 {
		wait = 30 * time.Second
	}
	return context.WithTimeout(ctx, wait)
}

func sleep(ctx context.Context, d time.Duration) error { return env.Sleep(ctx, d) }
