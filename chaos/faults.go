package chaos

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/locker"
)

// Scope says what a fault acts on, and so how a run schedules it.
type Scope int

// The scopes.
const (
	// ScopeClients: the fault acts on one scenario's own clients (their
	// proxies, gates, clocks, processes). Scenarios share an environment,
	// a few at a time, kept apart by key prefixes.
	ScopeClients Scope = iota
	// ScopeServers: the fault acts on servers every scenario uses (a paused
	// master). It runs alone on the shared environment.
	ScopeServers
	// ScopeFresh: the fault changes the environment for good (a failover
	// moves the master). Each scenario gets a fresh environment of its own,
	// with the topology Fault.Env gives.
	ScopeFresh
)

// PointKind says which fault points (contract.Point, Scenario.Point) a fault
// takes: where in a client's commands it may strike.
type PointKind int

// The fault points a fault may take.
const (
	// PointNone: the fault strikes at a moment of its own choosing.
	PointNone PointKind = iota
	// PointAfter: right after the reply of the named command.
	PointAfter
	// PointAfterOrBefore: after the reply of, or before the sending of, the
	// named command.
	PointAfterOrBefore
)

// WorkloadShape is the contention a fault's scenarios get by default:
// clients per key, the most a holder works, the most a client thinks
// between attempts, and each operation's deadline.
type WorkloadShape struct {
	Clients                int
	Hold, Think, OpTimeout time.Duration
	// Brief: sections take no nested hold, do no long work and no
	// explicit renewal (the mix's Reenter, LongWork and Renew are 0):
	// each is as short as Hold and the lease check allow, for churn.
	Brief bool
}

// defaultShape is the workload most faults get: chaos's defaults (a
// function, not a package variable: nothing may change it).
func defaultShape() WorkloadShape {
	return WorkloadShape{Clients: 3, Hold: 20 * time.Millisecond, Think: 10 * time.Millisecond, OpTimeout: time.Second}
}

// Fault is one fault of the catalogue (Catalogue): everything lockproof
// knows about it is here, so a new fault is one file holding its Fault
// value and its nemesis, plus one entry in Catalogue and its row in
// contract's trait table (contract.FaultTraits, by its name). What locks
// do under it is predicted from that row's traits, by the profiles' table
// (package judge) and the locks' own entries (locker.Entry.Predict); a
// row whose Predicted is false gets no prediction.
//
// Modelled on etcd's tests/robustness failpoints: a value with a name, the
// conditions it needs (Available) and the code that injects it.
type Fault struct {
	// Name is the fault's name in summary.json, the CLI and scenario IDs.
	Name string
	// Doc says in one sentence what the fault does.
	Doc string
	// Scope says what it acts on (ScopeClients, ScopeServers, ScopeFresh).
	Scope Scope
	// Takes is the kind of fault point it takes (CheckPoint).
	Takes PointKind
	// Duration is the workload duration a matrix gives it: long enough for
	// the warm-up, the window and what follows it. 0 means 3s.
	Duration time.Duration
	// Shape is the workload a matrix gives it; zero fields take chaos's
	// defaults (3 clients, hold ≤20ms, think ≤10ms, 1s per op).
	Shape WorkloadShape
	// Processes is the number of the workload's clients run as child
	// processes (workload.Config.Processes), at least.
	Processes int
	// Linger keeps the workload running two TTLs past a window that healed
	// late: a woken client must get to do what it does next.
	Linger bool
	// Matrix is true for the faults of the default matrix (the columns of
	// the summary.json contract); the others run when named.
	Matrix bool
	// Env is the topology of a ScopeFresh fault's environment for a lock
	// with these needs (nil: FreshSpec).
	Env func(needs locker.Needs) env.Spec
	// Needs says why the fault cannot run on an environment of kind k
	// (nil: it can, or k is unknown), e.g. a paused server on a deployment
	// lockproof does not run. Nil means it runs anywhere.
	Needs func(k env.Kind) error
	// MatrixOn, when set, are the topologies whose default matrix has
	// the fault (Matrix); nil: every one it runs on.
	MatrixOn []string
	// Topologies are the topologies the fault runs on
	// (contract.TopologySentinel, contract.TopologyCluster), each with
	// its own meaning where the two differ (a failover is Sentinel's, or
	// a cluster shard's); nil means the Sentinel topology alone. Matrix
	// puts the fault in the default matrix of each.
	Topologies []string

	// Admin lists, for a bring-your-own deployment of the topology, the
	// commands the fault sends its servers besides the workload's (which
	// touch the run's own keys alone), each with the nodes it goes to:
	// what `lockproof run --plan` prints. Nil: none (the fault acts on
	// lockproof's proxies and clients only).
	Admin func(topology string) []string
	// ChangesDeployment: on a bring-your-own deployment the fault changes
	// the deployment itself, not only the run's keys (a failover moves the
	// master, and nothing switches it back). Such a fault is left out of a
	// bring-your-own run's default matrix and runs there only when named
	// and consented to (runner.Config.ChangeDeployment, `run --yes`).
	ChangesDeployment bool

	// strike builds the fault for a run once its moment has come (it may
	// wait for it: a holder, a waiter in line), from what striking holds;
	// nil for a fault that strikes nothing (none, crowd: a workload shape)
	// and for a fault of the simulation alone (NotRealTime says why).
	strike func(s *striking) (armed, error)
	// NotRealTime says why a fault of the simulation alone has no
	// real-time strike; "" for every fault `lockproof run` runs.
	NotRealTime string

	// Simulate is the fault in the simulation (package sim): it waits
	// for its moment, applies the fault to the simulated network, nodes
	// or clients and records its window, and returns when the window has
	// closed or the run ended. Nil: not simulated, and NotSimulated says
	// why. The twin is declared here, beside the real-time strike, so
	// that the two mean one fault (a test holds every fault to one or
	// the other).
	Simulate func(s *SimStrike) error
	// SimDoc says in one line what the simulated fault does.
	SimDoc string
	// NotSimulated says why the simulation has no twin of the fault.
	NotSimulated string
}

// ErrSimulationOnly: the fault runs in the simulation alone (Fault
// NotRealTime says why).
var ErrSimulationOnly = errors.New("runs in the simulation alone (lockproof sim)")

// ErrNotOnTopology: the fault does not run on the topology asked for.
var ErrNotOnTopology = errors.New("does not run on this topology")

// Available says why the fault cannot run on an environment of kind k
// with the given topology (contract.TopologySentinel when ""), or nil. An
// empty kind is not checked.
func (f Fault) Available(k env.Kind, topology string) error {
	if f.NotRealTime != "" {
		return fmt.Errorf("fault %s: %w: %s", f.Name, ErrSimulationOnly, f.NotRealTime)
	}
	if !f.RunsOn(topology) {
		return fmt.Errorf("fault %s on the %s topology: %w (it runs on %v)", f.Name, topology, ErrNotOnTopology, f.topologies())
	}
	if k == env.BYO && contract.IsStore(topology) && f.Scope != ScopeClients {
		// A store lockproof does not run: its clients' faults only.
		return fmt.Errorf("fault %s on the byo %s: %w, so it does not strike its leader", f.Name, topology, ErrNotOurServers)
	}
	if k == env.Docker && contract.IsStore(topology) && f.Name == contract.FaultRestart {
		// A store's member replaced with its data wiped: processes only.
		return fmt.Errorf("fault %s on the docker %s: %w (a member wiped and replaced)", f.Name, topology, ErrNeedsProcesses)
	}
	if f.Needs == nil || k == "" {
		return nil
	}
	if err := f.Needs(k); err != nil {
		return fmt.Errorf("fault %s on the %s environment: %w", f.Name, k, err)
	}
	return nil
}

// InMatrixOn reports whether the fault is in the default matrix of
// topology ("" is the Sentinel topology).
func (f Fault) InMatrixOn(topology string) bool {
	return f.Matrix && f.RunsOn(topology) && (f.MatrixOn == nil || slices.Contains(f.MatrixOn, cmp.Or(topology, contract.TopologySentinel)))
}

// RunsOn reports whether the fault runs on topology ("" is the Sentinel
// topology).
func (f Fault) RunsOn(topology string) bool {
	return slices.Contains(f.topologies(), cmp.Or(topology, contract.TopologySentinel))
}

// topologies are Topologies, the Sentinel topology when nil.
func (f Fault) topologies() []string {
	if f.Topologies == nil {
		return []string{contract.TopologySentinel}
	}
	return f.Topologies
}

// CheckPoint reports whether the fault takes the fault point p: the zero
// Point always; After for PointAfter and PointAfterOrBefore; Before for
// PointAfterOrBefore only; never both (contract.Point.Check).
func (f Fault) CheckPoint(p contract.Point) error {
	if err := p.Check(); err != nil {
		return err
	}
	switch {
	case !p.IsZero() && f.Takes == PointNone:
		return fmt.Errorf("%w: %s: fault %s strikes at its own moment and takes no fault point", contract.ErrBadPoint, p, f.Name)
	case p.Before != "" && f.Takes != PointAfterOrBefore:
		return fmt.Errorf("%w: %s: fault %s takes a point after a command, not before one", contract.ErrBadPoint, p, f.Name)
	}
	return nil
}

// DefaultDuration is the workload duration a matrix gives the fault.
func (f Fault) DefaultDuration() time.Duration {
	if f.Duration > 0 {
		return f.Duration
	}
	return 3 * time.Second
}

// WorkloadShape is the workload a matrix gives the fault, defaults filled in.
func (f Fault) WorkloadShape() WorkloadShape {
	s := f.Shape
	d := defaultShape()
	s.Clients = cmp.Or(s.Clients, d.Clients)
	s.Hold = cmp.Or(s.Hold, d.Hold)
	s.Think = cmp.Or(s.Think, d.Think)
	s.OpTimeout = cmp.Or(s.OpTimeout, d.OpTimeout)
	return s
}

// FreshSpec is the topology of the fault's own environment, for ScopeFresh
// faults, for a lock with these needs (its locker.Entry's): FreshSpec, and
// what the fault's Env adds.
func (f Fault) FreshSpec(needs locker.Needs) env.Spec {
	if f.Env != nil {
		return f.Env(needs)
	}
	return FreshSpec(needs)
}

// FreshSpec is the topology of a fresh environment: a quick Sentinel
// (down-after 1s, failover timeout 2s), and independent masters for a lock
// that needs them (locker.Needs Redlock: a user's Redlock as well as ours).
//
// Why not quicker: with down-after 500ms the Sentinels, which reset their
// view of the new master at the switch, often marked it down again within a
// second and failed over a second time (docs/FINDINGS.md, "Measurements
// behind the code"). A run that fails
// over twice saw three masters, which its fault does not stand for: Run
// then reports nemesis.ErrFailedOverAgain.
func FreshSpec(needs locker.Needs) env.Spec {
	s := env.Spec{DownAfter: time.Second, FailoverTimeout: 2 * time.Second}
	if needs.Redlock {
		s.Redlock = 3
	}
	return s
}

// SharedSpec is the topology of an environment shared by the scenarios of
// ScopeClients and ScopeServers faults: Redlock masters for redlock, and a
// Sentinel slow enough (3s) that a paused server is not failed over.
func SharedSpec() env.Spec { return env.Spec{Redlock: 3, DownAfter: 3 * time.Second} }

// On returns spec on topology: for contract.TopologyCluster, a Redis
// Cluster of 3 shards with a replica each instead of the master and its
// Sentinels, whose node timeout is spec's DownAfter, at least 2s (a
// paused master is not failed over in a shared environment; at 1s, on a
// loaded CI machine, healthy masters were suspected again and again and
// a promotion was not agreed on within 20s); the fenced node, Redlock's masters and the replicas' clock
// stay as spec asks. Redlock keeps its independent masters on a cluster
// too, so that its column compares; three masters of one cluster are no
// Redlock (package zoo's TestRedlockOnOneCluster says what they give).
//
// On a consensus store's topology (contract.StoreTopologies) the lock's
// deployment is that store (env.Spec Store) and no Redlock masters are
// started: the fenced node stays.
func On(spec env.Spec, topology string) env.Spec {
	if contract.IsStore(topology) {
		spec.Store, spec.Redlock = topology, 0
		return spec
	}
	if topology == contract.TopologyCluster {
		spec.Cluster = &env.ClusterSpec{NodeTimeout: max(spec.DownAfter, 2*time.Second)}
	}
	return spec
}

// Catalogue is every fault, in the matrix's order: the default matrix's
// faults first (Fault.Matrix), then those that run when named.
func Catalogue() []Fault {
	return catalogue()
}

// Lookup returns the fault of the catalogue named name that runs in real
// time (not a fault of the simulation alone: SimLookup has those too).
func Lookup(name string) (Fault, bool) {
	if f, ok := SimLookup(name); ok && f.NotRealTime == "" {
		return f, true
	}
	return Fault{}, false
}

// SimLookup returns the fault of the catalogue named name, whether it runs
// in real time or in the simulation alone.
func SimLookup(name string) (Fault, bool) {
	for _, f := range Catalogue() {
		if f.Name == name {
			return f, true
		}
	}
	return Fault{}, false
}

// Faults returns the fault names Run accepts, sorted.
func Faults() []string {
	var names []string
	for _, f := range Catalogue() {
		if f.NotRealTime != "" {
			continue
		}
		names = append(names, f.Name)
	}
	slices.Sort(names)
	return names
}

// NotSimulatedInRealTime are the simulation's faults the real-time
// catalogue runs no strike of, each with why (Fault.NotRealTime).
func NotSimulatedInRealTime() map[string]string {
	out := map[string]string{}
	for _, f := range Catalogue() {
		if f.NotRealTime != "" {
			out[f.Name] = f.NotRealTime
		}
	}
	return out
}
