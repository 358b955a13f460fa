package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/lockproof/lockproof/chaos"
	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/workload"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/internal/redact"
	"github.com/lockproof/lockproof/judge"
	"github.com/lockproof/lockproof/locker"
)

// Runner runs one scenario on e and writes its history into dir; chaos.Run
// is the real one. Tests of the run directory may inject another.
type Runner func(ctx context.Context, e env.Env, sc chaos.Scenario, dir string) (chaos.Outcome, error)

// Opener opens an environment for spec; the caller closes it.
type Opener func(ctx context.Context, spec env.Spec) (env.Env, error)

// Spec is one scenario to run.
type Spec struct {
	Lock, Fault string
	Seed        uint64
	// Point is the fault point of the faults that take one (pause-client,
	// crash-client: chaos.Fault CheckPoint); the zero Point is the fault's
	// default moment.
	Point contract.Point
	// Duration of the workload and TTL of the leases; 0 takes the matrix
	// defaults (the fault's chaos.Fault DefaultDuration, chaos's TTL).
	Duration, TTL time.Duration
	// Clients per key; 0 takes the matrix default for the fault (Shape).
	Clients int
	// Hold bounds the random time a holder works between its read and its
	// write, Think the time between two attempts, OpTimeout each operation;
	// 0 takes the default for the fault (Shape).
	Hold, Think, OpTimeout time.Duration

	// What planning resolved the names to, as etcd's robustness
	// scenarios carry their failpoint: nothing is looked up by name after
	// Config.specs.
	fault chaos.Fault
	entry locker.Entry
	exp   locker.Prediction
}

// recordOf records s's fault point, durations and shape.
func recordOf(s Spec) contract.SpecRecord {
	return contract.SpecRecord{After: s.Point.After, Before: s.Point.Before, DurationMs: s.Duration.Milliseconds(), TTLMs: s.TTL.Milliseconds(),
		Clients: s.Clients, HoldMs: s.Hold.Milliseconds(), ThinkMs: s.Think.Milliseconds(), OpTimeoutMs: s.OpTimeout.Milliseconds()}
}

// specOf is the Spec of lock, fault and seed with r's fault point, durations and shape.
func specOf(r contract.SpecRecord, lock, fault string, seed uint64) Spec {
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	return Spec{Lock: lock, Fault: fault, Seed: seed, Point: contract.Point{After: r.After, Before: r.Before},
		Duration: ms(r.DurationMs), TTL: ms(r.TTLMs), Clients: r.Clients, Hold: ms(r.HoldMs), Think: ms(r.ThinkMs),
		OpTimeout: ms(r.OpTimeoutMs)}
}

// ID names the scenario and its directory: <lock>-<fault>-<seed>.
func (s Spec) ID() string { return contract.ScenarioID(s.Lock, s.Fault, int64(s.Seed)) }

// DefaultTTL is the lease length of the matrix's scenarios (chaos's default).
const DefaultTTL = 500 * time.Millisecond

// DefaultStoreTTL is the lease length of the matrix's scenarios on a
// consensus store: etcd's leases last whole seconds (1s at least, with
// the store environment's 500ms election timeout), and a ZooKeeper
// session's timeout is set alike, so that the two compare.
const DefaultStoreTTL = time.Second

// defaultTTL is the lease length of a scenario on topology.
func defaultTTL(topology string) time.Duration {
	if contract.IsStore(topology) {
		return DefaultStoreTTL
	}
	return DefaultTTL
}

// Config is a matrix run.
type Config struct {
	// Specs are the scenarios, in order. When empty, Run runs Locks × Faults
	// × Seeds (lock-major), each where the lock's entry says the fault
	// strikes it (locker.Entry.FaultPoint).
	Specs  []Spec
	Locks  []string
	Faults []string
	Seeds  []uint64
	// Duration overrides the faults' durations (chaos.Fault DefaultDuration)
	// for every scenario without one; TTL,
	// Clients, Hold and Think likewise (0: defaults).
	Duration, TTL, Hold, Think time.Duration
	Clients                    int
	// Parallel bounds the scenarios run at once on the shared environment;
	// default 3. Global faults always run alone.
	Parallel int
	// Out is the run directory; required.
	Out string
	// Topology is the deployment's shape: contract.TopologySentinel ("")
	// or contract.TopologyCluster. Every environment Open makes has it
	// (chaos.On), a fault that does not run on it (chaos.Fault
	// Topologies) is refused up front, and the default plan leaves it out.
	Topology string
	// Kind is the kind of environment Open makes, when known: a fault that
	// cannot run there (chaos.Fault Available) is refused up front, and the
	// default plan (no Faults) leaves it out. "" checks nothing.
	Kind env.Kind
	// Open opens environments; required. The shared environment is opened
	// with chaos.SharedSpec, each scenario of a chaos.ScopeFresh fault with
	// its chaos.Fault FreshSpec.
	Open Opener
	// Registry holds the locks Locks and Specs name; required
	// (zoo.Builtin() holds the built-in ones). Register your own lock in it to run it under the
	// matrix (locker.Entry; see docs/OWN-LOCK.md).
	Registry *locker.Registry
	// Mix is the workload's operation mix; nil means workload.DefaultMix().
	Mix *workload.Mix
	// Runner runs one scenario; nil means chaos.Run.
	Runner Runner
	// CheckTimeout is the budget of each scenario's check (checker.Options
	// Timeout: the whole check, explanations included; the visualization of
	// a violation gets as much again); 0 means 60s. A check that runs out
	// gives unknown verdicts, never ok.
	CheckTimeout time.Duration
	// Progress receives one line per finished scenario; nil discards.
	Progress io.Writer
	// NoReport skips rendering report.md, report.html, junit.xml and
	// report.json into Out at the end.
	NoReport bool
	// KeepAll keeps every scenario's history and Porcupine page as written.
	// By default a finished run compresses the histories of scenarios that
	// went as expected (history.jsonl.gz) and removes their Porcupine
	// pages, but for one sample per cell and each cell's first
	// counterexample per property (see trim).
	KeepAll bool
	// ChangeDeployment consents to faults that change a bring-your-own
	// deployment itself (chaos.Fault.ChangesDeployment: a failover that
	// moves the master for good). Without it Prepare leaves them out of
	// the default matrix and refuses them when named. Other environments
	// are lockproof's own: it is not read there.
	ChangeDeployment bool
	// Resume continues the run that Out holds: the scenarios of the plan
	// that its summary.json records as run are kept as they are, and only
	// the others (never started, or interrupted: contract.Row.NotRun) run. The
	// plan (locks, faults, seeds, options) should be the interrupted run's.
	Resume bool
	// Trace validates the histories of the locks it names against a model
	// (lock ID → check) for the rows' trace, trace_line and trace_error;
	// the CLI's --tla-jar sets it for the fenced lock (package tla). A
	// rejected trace is a mismatch. Nil: no trace is validated.
	Trace map[string]TraceCheck
	// Logger receives details; nil discards. Run redacts what it is
	// handed (Secrets).
	Logger *slog.Logger
	// Secrets are texts the run must never write: the passwords of a
	// deployment it logs in to (Prepare adds a bring-your-own one's,
	// env.Auth.Secrets). Run adds the passwords of each environment it
	// opens (those lockproof makes for its own servers), and redacts them
	// all from every text a lock, an adapter, a server or a fault sends
	// back before it goes into the run directory (the rows of
	// summary.json, each history and check.json, and so the reports),
	// the progress lines and the log (internal/redact).
	Secrets []string
	// red is the redaction of Secrets that Prepare began (its logger's
	// and the environments'), which Run goes on with: one per run. Nil
	// without Prepare: Run makes it.
	red *redact.Redactor
	// Shard, when set, runs one part of the plan (contract.Shard: a
	// contiguous run of its lock × fault cells, never a cell split), for
	// a nightly fanned out over CI runners; Merge puts the parts' run
	// directories together. Nil runs the whole plan.
	Shard *contract.Shard
}

// shardOf is the part of specs that c.Shard holds, and the shard as the
// summary records it (nil for the whole plan). A shard that holds no
// cell (more shards than cells) is bad configuration.
func (c Config) shardOf(specs []Spec) ([]Spec, *contract.Shard, error) {
	if c.Shard == nil {
		return specs, nil, nil
	}
	sh := *c.Shard
	if sh.Count < 1 || sh.Index < 1 || sh.Index > sh.Count {
		return nil, nil, fmt.Errorf("%w: shard %s: want K/N with 1 <= K <= N", ErrBadConfig, sh)
	}
	type cell struct{ lock, fault string }
	index := map[cell]int{}
	for _, s := range specs {
		k := cell{s.Lock, s.Fault}
		if _, ok := index[k]; !ok {
			index[k] = len(index)
		}
	}
	sh.Cells = len(index)
	lo, hi := sh.Range(sh.Cells)
	var out []Spec
	for _, s := range specs {
		if i := index[cell{s.Lock, s.Fault}]; i >= lo && i < hi {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, nil, fmt.Errorf("%w: shard %s of a plan of %d cells holds none (use fewer shards)", ErrBadConfig, sh, sh.Cells)
	}
	return out, &sh, nil
}

// ErrWrongStore: a lock runs on another deployment than the run's
// topology (locker.Needs.Store).
var ErrWrongStore = errors.New("the lock does not run on this topology")

// RunsOn says why lock e cannot run on topology ("" is Sentinel's), or
// nil: a lock on a consensus store runs on that store's topology alone,
// and a Redis lock on Redis's.
func RunsOn(e locker.Entry, topology string) error {
	topology = cmp.Or(topology, contract.TopologySentinel)
	switch {
	case e.Needs.Store != "" && e.Needs.Store != topology:
		return fmt.Errorf("lock %s on the %s topology: %w (it runs on the %s store)", e.Name, topology, ErrWrongStore, e.Needs.Store)
	case e.Needs.Store == "" && contract.IsStore(topology):
		return fmt.Errorf("lock %s on the %s topology: %w (it runs on Redis)", e.Name, topology, ErrWrongStore)
	}
	return nil
}

// LocksOn are the locks of reg that run on topology (RunsOn), in
// registration order.
func LocksOn(reg *locker.Registry, topology string) []string {
	var out []string
	for _, name := range reg.Names() {
		e, _ := reg.Lookup(name)
		if RunsOn(e, topology) == nil {
			out = append(out, name)
		}
	}
	return out
}

// specs is the plan: c's scenarios, each with its lock's entry, its fault
// and its prediction resolved once (c.Registry must be set).
func (c Config) specs() ([]Spec, error) {
	specs := c.Specs
	if len(specs) == 0 {
		for _, l := range c.Locks {
			e, ok := c.Registry.Lookup(l)
			if !ok {
				return nil, fmt.Errorf("%w: lock %q is not in the registry (known: %v)", ErrBadConfig, l, c.Registry.Names())
			}
			for _, f := range c.Faults {
				for _, s := range c.Seeds {
					specs = append(specs, Spec{Lock: l, Fault: f, Seed: s, Point: judge.PointOf(e, f)})
				}
			}
		}
	}
	if len(specs) == 0 {
		return nil, fmt.Errorf("%w: no scenarios (give locks, faults and seeds)", ErrBadConfig)
	}
	seen := map[string]bool{}
	out := make([]Spec, len(specs))
	for i, s := range specs {
		if s.Lock == "" || s.Fault == "" {
			return nil, fmt.Errorf("%w: scenario %d: lock and fault are required", ErrBadConfig, i)
		}
		fault, ok := chaos.Lookup(s.Fault)
		if !ok {
			return nil, fmt.Errorf("%w: scenario %s: fault %q: want one of %v", ErrBadConfig, s.ID(), s.Fault, chaos.Faults())
		}
		if err := fault.Available(c.Kind, c.Topology); err != nil {
			return nil, fmt.Errorf("%w: scenario %s: %w", ErrBadConfig, s.ID(), err)
		}
		if err := fault.CheckPoint(s.Point); err != nil {
			return nil, fmt.Errorf("%w: scenario %s: %w", ErrBadConfig, s.ID(), err)
		}
		entry, ok := c.Registry.Lookup(s.Lock)
		if !ok {
			return nil, fmt.Errorf("%w: scenario %s: lock %q is not in the registry (known: %v)", ErrBadConfig, s.ID(), s.Lock, c.Registry.Names())
		}
		if err := RunsOn(entry, c.Topology); err != nil {
			return nil, fmt.Errorf("%w: scenario %s: %w", ErrBadConfig, s.ID(), err)
		}
		s.fault, s.entry, s.exp = fault, entry, judge.PredictOn(entry, s.Fault, c.Topology)
		if seen[s.ID()] {
			return nil, fmt.Errorf("%w: scenario %s given twice", ErrBadConfig, s.ID())
		}
		seen[s.ID()] = true
		// The scenario's own value, else the run's, else the fault's default.
		sh := fault.WorkloadShape()
		s.Duration = cmp.Or(s.Duration, c.Duration, fault.DefaultDuration())
		s.TTL = cmp.Or(s.TTL, c.TTL, defaultTTL(c.Topology))
		s.Clients = cmp.Or(s.Clients, c.Clients, sh.Clients)
		s.Hold = cmp.Or(s.Hold, c.Hold, sh.Hold)
		s.Think = cmp.Or(s.Think, c.Think, sh.Think)
		s.OpTimeout = cmp.Or(s.OpTimeout, sh.OpTimeout)
		if s.Duration < 0 || s.TTL < 0 || s.Clients < 0 || s.Hold < 0 || s.Think < 0 || s.OpTimeout < 0 {
			return nil, fmt.Errorf("%w: scenario %s: duration, ttl, clients, hold and think must not be negative", ErrBadConfig, s.ID())
		}
		out[i] = s
	}
	return out, nil
}
