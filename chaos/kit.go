package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/chaos/workload"
	"github.com/lockproof/lockproof/contract"
)

// The strike kit: what the fault files (fault_<name>.go, one per fault of
// the Catalogue) share, and all they use of the package besides the Fault
// type: the striking a strike gets and the armed fault it returns, the
// topology sets, the waits for a victim, the lock's nodes and keys, and
// the sentinels a fault's Needs return. A helper of one fault lives in
// that fault's file; one that a second fault needs moves here.
//
// The network faults act on the proxies of about half the scenario's
// clients (isolate: of one holder) (Toxiproxy toxics with toxicity 1):
// what they did to those clients' traffic is their evidence
// (networkBite).
//
// The faults of a Redis Cluster alone (Topologies: clusterOnly), and what
// the faults of both topologies strike on a cluster: the lock's shard,
// the master serving the hash slot of the scenario's lock keys, and its
// replicas. Redis Cluster's own failover, a shard's, is the failover
// fault there (the master killed, its replica elected); failover-skew
// promotes a replica whose clock is behind.

// ErrNotOurServers: a bring-your-own deployment's servers are not
// lockproof's processes, so it cannot freeze, kill, restart or reconfigure
// them (the fault's Needs says which).
var ErrNotOurServers = errors.New("lockproof does not run the servers of a bring-your-own deployment")

// needsOwnServers is the Needs of a fault that does to servers what
// (pauses them, restarts them...): not on a bring-your-own deployment,
// whose servers lockproof does not run.
func needsOwnServers(what string) func(env.Kind) error {
	return func(k env.Kind) error {
		if k == env.BYO {
			return fmt.Errorf("%w, so it does not %s", ErrNotOurServers, what)
		}
		return nil
	}
}

// failover is the nemesis of a failover: it isolates the master from its
// replicas and Sentinels; clients keep using it until they follow
// Sentinel's switch, so leases taken there since the partition are lost.
// Without replication proxies (bring your own), it asks Sentinel.
//
// On a Redis Cluster, the master of the lock's slot is killed after the
// same replication lag: the other masters fail it at the node timeout and
// its replica is elected (Redis Cluster's own failover); the heal
// restarts it as the new master's replica.
func failover(s *striking) (*nemesis.Failover, error) {
	if onCluster(s) {
		return shardFailover(s, contract.FaultFailover, nemesis.FailoverKill)
	}
	mode := nemesis.FailoverPartition
	if m, err := env.Master(s.ctx, s.env.Topology()); err == nil && m.ReplProxy == "" {
		mode = nemesis.FailoverCommand
	}
	return &nemesis.Failover{Env: s.env, Mode: mode,
		ReplLatency: 20 * time.Millisecond, ReplLag: s.sc.TTL, Promote: s.sc.Duration}, nil
}

// ErrNeedsProcesses: the fault needs the process environment.
var ErrNeedsProcesses = errors.New("needs the process environment, which starts redis-server with a shifted clock (datefudge)")

// keyDeletion is the Admin of a fault that deletes a holder's lock keys
// (nemesis.KeyLoss).
func keyDeletion(string) []string {
	return []string{
		"SCAN 0 MATCH *<scenario lock key>* COUNT 1000, repeated until the cursor returns, on every master (and Redlock's), while a client works under its lock, until its keys are found (at most the run's duration); after each such look it rests nine times as long as the look took (at least 1ms), so SCANs fill at most a tenth of the search",
		"DEL of the keys that SCAN found (the scenario's lock's own), once per scenario, on the masters holding them",
	}
}

// holderKeys waits for the first client found working under its lock
// (before its lease check) with its keys on the lock's nodes, the master
// (a cluster's masters) and Redlock's masters (a holder that worked briefly may be gone by the
// time we look), and returns its lock's keys and those nodes: waiting for
// one chosen client could outlast the run when holds are long.
func holderKeys(s *striking) (*nemesis.KeyLoss, []env.Node, error) {
	nodes, err := lockNodes(s.ctx, s.env.Topology())
	if err != nil {
		return nil, nil, err
	}
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Upstream
	}
	var found *nemesis.KeyLoss
	// present remembers the clients whose keys a look found: a lock's keys
	// outlive a hold (the fence counter lives on), so once found they need
	// no second SCAN, and the next time such a client works it is taken at
	// once. Before, every look SCANned again and asked the client to be
	// still working after it: with both cores loaded a SCAN of a
	// cluster's masters outlasted the brief holds, and the rest after it
	// (scanRest times as long) outlasted the next ones, so that a run of
	// TestFaultsOnBYOCluster found no holder in 15 s.
	present := map[string]*nemesis.KeyLoss{}
	err = paced(s.ctx, func() (bool, error) {
		for _, c := range s.wl.Clients {
			if kl := present[c.Name]; kl != nil && c.Working() {
				found = kl
				return true, nil
			}
		}
		for _, c := range s.wl.Clients {
			if !c.Working() || present[c.Name] != nil {
				continue
			}
			kl := &nemesis.KeyLoss{Client: c.Name, Key: c.Key, Nodes: addrs, Auth: s.env.Topology().Auth}
			ok, err := kl.Present(s.ctx)
			if err != nil {
				return false, err
			}
			if ok {
				present[c.Name] = kl
				if c.Working() {
					found = kl
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("no client held its lock: %w", err)
	}
	return found, nodes, nil
}

// scanRest is how much longer than a look took paced rests before the
// next: a look SCANs the whole keyspace of every node of the lock, which
// on a large database is heavy, so the search keeps the servers busy
// with it at most 1/(1+scanRest) of its time.
const scanRest = 9

// paced asks look until it says true (or fails, or ctx ends), resting
// after each look scanRest times as long as it took, and at least a
// millisecond: a look every millisecond would keep a large database
// SCANning back to back.
func paced(ctx context.Context, look func() (bool, error)) error {
	for {
		start := time.Now()
		ok, err := look()
		if ok || err != nil {
			return err
		}
		if err := env.Sleep(ctx, max(time.Millisecond, scanRest*time.Since(start))); err != nil {
			return err
		}
	}
}

// shardFailover is the failover of the lock's shard in mode (a window of
// kind): its replica promoted after a replication lag of one TTL, or, cut
// off (nemesis.FailoverPartition), after the node timeout. The election
// follows the node timeout, and on a loaded machine the failure reports
// take a while to reach a majority (seen past 5s on 2 busy cores): the
// promotion is waited for up to 20s, or the run's Duration if longer.
func shardFailover(s *striking, kind string, mode nemesis.FailoverMode) (*nemesis.Failover, error) {
	slot, err := lockSlot(s)
	if err != nil {
		return nil, err
	}
	f := &nemesis.Failover{Env: s.env, Kind: kind, Mode: mode, Slot: slot, Promote: max(s.sc.Duration, 20*time.Second)}
	switch {
	case mode == nemesis.FailoverPartition:
		f.NodeTimeout = s.env.Topology().NodeTimeout
	case s.env.Topology().Cluster[0].ReplProxy == "":
		// Bring your own: its servers are not lockproof's to kill, nor
		// its replication links to slow. The failover is the operator's
		// own (CLUSTER FAILOVER), and a takeover strikes with no lag.
		if mode == nemesis.FailoverKill {
			f.Mode = nemesis.FailoverCommand
		}
	default:
		f.ReplLatency, f.ReplLag = 20*time.Millisecond, s.sc.TTL
	}
	return f, nil
}

// onCluster reports whether the scenario runs on a Redis Cluster, whose
// failovers wait for the node timeout and an election: their windows
// count in the scenario's own context (armed.outer), not in the run's
// Duration, which a failover that struck late could outlast.
func onCluster(s *striking) bool { return len(s.env.Topology().Cluster) > 0 }

// lockNodes are the nodes a lock's keys may be on: Sentinel's master, or
// every master of the cluster as one node sees it now; then Redlock's
// masters.
func lockNodes(ctx context.Context, topo env.Topology) ([]env.Node, error) {
	if topo.StoreKind != "" {
		// A consensus store's lock keeps no key in Redis: its keys live
		// under the store's leases and sessions, and go with them.
		return append([]env.Node(nil), topo.Redlock...), nil
	}
	if len(topo.Cluster) == 0 {
		m, err := env.Master(ctx, topo)
		if err != nil {
			return nil, err
		}
		return append([]env.Node{m}, topo.Redlock...), nil
	}
	v, err := env.WaitClusterAgreed(ctx, topo)
	if err != nil {
		return nil, err
	}
	var out []env.Node
	for _, n := range topo.Cluster {
		if len(v.Masters[n.ID]) > 0 {
			out = append(out, n)
		}
	}
	return append(out, topo.Redlock...), nil
}

// lockSlotWait bounds how long lockSlot looks for a lock's key on the
// cluster before it takes the slot of a client's key name.
const lockSlotWait = 2 * time.Second

// lockSlot is the hash slot of the scenario's lock on a cluster: that of
// the first key of a client's lock found on a master (the lock's key
// layout decides, hash tag and all), else, for a lock that keeps no key
// there (Redlock's are on its own masters) or none yet, that of the first
// client's key name.
func lockSlot(s *striking) (int, error) {
	topo := s.env.Topology()
	if len(topo.Cluster) == 0 {
		return 0, env.ErrNotCluster
	}
	ctx, cancel := context.WithTimeout(s.ctx, lockSlotWait)
	defer cancel()
	var key string
	_ = paced(ctx, func() (bool, error) { // its end: no key found, the key name decides
		nodes, err := lockNodes(ctx, topo)
		if err != nil {
			return false, err
		}
		var addrs []string
		for _, n := range nodes {
			if n.Role == env.RoleCluster {
				addrs = append(addrs, n.Upstream)
			}
		}
		for _, c := range s.wl.Clients {
			keys, err := (&nemesis.KeyLoss{Client: c.Name, Key: c.Key, Nodes: addrs, Auth: topo.Auth}).Keys(ctx)
			if err == nil && len(keys) > 0 {
				key = keys[0]
				return true, nil
			}
		}
		return false, nil
	})
	if key != "" {
		return env.KeySlot(s.ctx, topo, key)
	}
	return env.KeySlot(s.ctx, topo, s.wl.Clients[0].Key)
}

// cut records on n the clients whose proxies it acts on: what it did to
// their traffic is its evidence (see networkBite).
func cut(n *nemesis.Network, clients []string) *nemesis.Network {
	n.Clients = clients
	return n
}

// both are the topologies of a fault that runs on either of Redis's.
var both = []string{contract.TopologySentinel, contract.TopologyCluster}

// everywhere are the topologies of a fault of the clients alone (their
// gates, clocks and proxies), which means the same on any store: both
// of Redis's, and the consensus stores.
var everywhere = append(append([]string(nil), both...), contract.StoreTopologies()...)

// onStore reports whether the scenario's deployment is a consensus store.
func onStore(s *striking) bool { return s.env.Topology().StoreKind != "" }

// clusterOnly are the topologies of a fault of Redis Cluster alone.
var clusterOnly = []string{contract.TopologyCluster}

// striking is what a fault's strike gets: the run, its clients, and the
// choices made for it (a victim, half the clients for network faults).
type striking struct {
	// ctx ends with the run's Duration and bounds a wait for the fault's
	// moment; outer is the scenario's own context, which bounds instead
	// the wait for a victim chosen in advance (strikePauseClient says why).
	ctx, outer context.Context
	env        env.Env
	sc         Scenario
	wl         *workload.Workload
	rng        *rand.Rand
	// victim is one client chosen at random; names and proxies are about
	// half the clients' (for network faults).
	victim  *workload.Client
	names   []string
	proxies []*toxiclient.Proxy
}

// armed is a fault ready to apply: the nemesis, how long its window stays
// open, and whether that window is counted in the scenario's own context
// (outer) because it opened late, at a strike.
type armed struct {
	fault  nemesis.Fault
	window time.Duration
	outer  bool
}

// stillStands is a fault that can say, once the run's ops are done, whether
// what it did still stands (nemesis.Failover: no second failover).
type stillStands interface {
	Check(ctx context.Context) error
}

// strikeWait bounds how long a fault waits for its moment (a client
// holding, or waiting in line): long enough for a busy workload to get
// there, short enough that a fault which cannot strike says so.
const strikeWait = 5 * time.Second

// bounded runs wait (a wait for a fault's moment) bounded by strikeWait.
func bounded(ctx context.Context, wait func(context.Context) error) error {
	wctx, cancel := context.WithTimeout(ctx, strikeWait)
	defer cancel()
	return wait(wctx)
}

// firstHolder waits, bounded by strikeWait in ctx, for the first client to
// hold its lock with its write ahead (workload.Client.Holding), and
// returns it; when several hold at one look (several keys), the seed's
// victim first, then the others in order. Faults that strike a holder take
// whoever holds rather than wait for one client chosen beforehand: the
// waiters of a polling lock starve, and a victim fixed by the seed may not
// win the lock again within a short run.
func (s *striking) firstHolder(ctx context.Context) (*workload.Client, error) {
	order := append([]*workload.Client{s.victim}, without(s.wl.Clients, s.victim)...)
	var v *workload.Client
	err := bounded(ctx, func(ctx context.Context) (err error) {
		v, err = workload.FirstHolding(ctx, order)
		return err
	})
	return v, err
}

// without returns cs without c.
func without(cs []*workload.Client, c *workload.Client) []*workload.Client {
	out := make([]*workload.Client, 0, len(cs))
	for _, x := range cs {
		if x != c {
			out = append(out, x)
		}
	}
	return out
}

// pick returns n distinct clients chosen by rng, in their original order.
func pick(rng *rand.Rand, cs []*workload.Client, n int) []*workload.Client {
	idx := rng.Perm(len(cs))[:n]
	sort.Ints(idx)
	out := make([]*workload.Client, n)
	for i, j := range idx {
		out[i] = cs[j]
	}
	return out
}
