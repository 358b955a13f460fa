// Package lockproof runs lockproof's harness on your own lock from Go: wrap
// the lock in a locker.Entry, call Run from a test, and read the verdicts,
// the run directory (summary.json, every history, the report) and the exit
// status `lockproof run` would give. docs/OWN-LOCK.md shows
// the whole path; examples/redsync runs go-redsync this way.
//
// A run starts real Redis (a master, two replicas, three Sentinels, three
// independent masters for Redlock-style locks, and a Redis for the fenced
// resource) as local processes, or as Docker containers (Options.Docker)
// where redis-server is not installed, every client behind Toxiproxy
// proxies of its own, and runs each chosen lock under each chosen fault for
// each seed.
package lockproof

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/workload"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/runner"
	"github.com/lockproof/lockproof/zoo"
)

// ErrEnvironment wraps the error of a machine that cannot run the harness
// (neither redis-server nor Docker): nothing ran.
var ErrEnvironment = errors.New("lockproof: no environment to run in")

// Options are one run of the matrix: locks × faults × seeds.
type Options struct {
	// Locks are your locks. Their names must not be built-in ones.
	Locks []locker.Entry
	// Builtins are names of built-in locks (zoo.Builtin: "fenced",
	// "redlock", ...) to run beside yours, for comparison.
	Builtins []string
	// Faults are fault names (chaos.Catalogue; runner.Faults is the default
	// matrix); default the default matrix, less the faults the environment
	// cannot run.
	Faults []string
	// Seeds are the runs of each lock × fault; default {1}.
	Seeds []uint64
	// Topology is the deployment: contract.TopologySentinel ("": a master,
	// replicas and Sentinels) or contract.TopologyCluster (a Redis Cluster
	// of processes, 3 shards with a replica each; your lock gets a
	// redis.ClusterClient as Deps.Redis, so the keys of one lock key must
	// share a hash tag); or a consensus store, contract.TopologyEtcd or
	// contract.TopologyZooKeeper, for locks whose entry needs it
	// (locker.Needs.Store: Deps.Store gives them its endpoints and a
	// dialer; module stores holds etcd's and ZooKeeper's). The default
	// matrix is the topology's.
	Topology string
	// Out is the run directory; "" makes a new temporary one (Result.Dir).
	Out string
	// Provider is the environment: env.Process, env.Docker, or "" for
	// local processes when redis-server is on PATH, else Docker (when
	// offered: Docker).
	Provider env.Kind
	// Docker offers the Docker environment: docker.New from package
	// github.com/lockproof/lockproof/chaos/docker (testcontainers). Nil:
	// local processes only, and a module that runs only those does not
	// pull testcontainers and its dependencies into its go.sum.
	Docker env.Constructor
	// DockerCheck says what Docker lacks here (docker.Check: no engine
	// answers, no image to start); nil: assume nothing when Docker is set.
	DockerCheck func(ctx context.Context) error
	// Duration is each scenario's workload duration; 0 takes the matrix's
	// (3s, failover 6s).
	Duration time.Duration
	// Mix is the workload's operation mix; nil means workload.DefaultMix().
	Mix *workload.Mix
	// Parallel bounds the scenarios run at once on the shared
	// environment (as lockproof run's --parallel); 0 means 3. Faults that
	// act on the whole deployment always run alone. A lock whose waiters
	// poll slowly, or a loaded machine, may want 1: a scenario's clients
	// then have the machine to themselves.
	Parallel int
	// Progress receives one line per finished scenario; nil discards.
	Progress io.Writer
	// Logger receives details; nil discards.
	Logger *slog.Logger
	// KeepAll keeps every history uncompressed and every Porcupine page;
	// by default the histories of as-expected scenarios are gzipped but a
	// sample and the first counterexample per lock × fault (Scenario's
	// History names the file either way, and history.ReadFile reads both).
	KeepAll bool

	_ struct{}
}

// Result is what a run found.
type Result struct {
	// Dir is the run directory: summary.json, per scenario its
	// history.jsonl and check.json, and report.md, report.html, junit.xml.
	Dir string
	// Summary holds one row per scenario (summary.json).
	Summary *contract.Summary
	// Status is the exit status `lockproof run` gives for it: 0 every
	// verdict as the locks' profiles predict, 1 some verdict not, 3 some
	// verdict unknown or a scenario (or its fault) failed.
	Status int
}

// Property is a property a verdict is about: the keys of a row's Verdicts
// and summary.json's columns (docs/DESIGN.md says what each checks).
type Property string

// The properties, in summary order (contract.Properties).
const (
	Lease     Property = contract.PropLease     // G1: one holder at a time
	Resource  Property = contract.PropResource  // G2: no stale write or read accepted
	Liveness  Property = contract.PropLiveness  // G3: a lock nobody holds is granted
	Claims    Property = contract.PropClaims    // G4: the validity the lock tells its holder is true
	Notice    Property = contract.PropNotice    // G4: a holder is told, in time, that its lease is gone
	Fairness  Property = contract.PropFairness  // G3: waiters are served in the order they joined
	Calls     Property = contract.PropCalls     // G5: calls return within their context; a closed lock grants nothing
	Footprint Property = contract.PropFootprint // G6: the lock's keys stay within a bound of what is alive
	// G3: a release hands the lock to the head of the line within the lock's bound
	Promptness Property = contract.PropPromptness
)

// Verdict is the verdict on property p of lock under fault with seed:
// contract.OK, contract.Violated, contract.Unknown (not decided: never a
// pass), or contract.NA ("n/a": the scenario held nothing the property
// judges, e.g. notice for a lock that states no LossBound, fairness for
// one without Entry.Fair, liveness when no holder stopped holding). An
// error says the run has no such scenario or the row no such property.
func (r *Result) Verdict(lock, fault string, seed uint64, p Property) (contract.Verdict, error) {
	s := r.Scenario(lock, fault, seed)
	if s == nil {
		return contract.Unknown, fmt.Errorf("no scenario %s × %s seed %d in this run", lock, fault, seed)
	}
	v, ok := s.Verdicts[string(p)]
	if !ok {
		return contract.Unknown, fmt.Errorf("scenario %s: no verdict on %q (properties: %v)", s.ID(), p, contract.PropertyIDs())
	}
	return v, nil
}

// Scenario returns the row of lock under fault with seed, or nil.
func (r *Result) Scenario(lock, fault string, seed uint64) *contract.Row {
	for _, s := range r.Summary.Scenarios {
		if s.Lock == lock && s.Fault == fault && s.Seed == int64(seed) {
			return s
		}
	}
	return nil
}

// Registry returns zoo.Builtin() with entries added: the registry a run of
// your locks uses (and MaybeChild needs).
func Registry(entries ...locker.Entry) (*locker.Registry, error) {
	reg := zoo.Builtin()
	for _, e := range entries {
		if _, ok := reg.Lookup(e.Name); ok {
			return nil, fmt.Errorf("lock %q: the name is a built-in lock's; choose another: %w", e.Name, locker.ErrInvalid)
		}
		if err := reg.Add(e); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

// Run runs opts's locks under its faults and seeds, checks every history,
// writes the run directory and its report, and returns the result. A
// scenario that could not run is in the result with unknown verdicts and
// its error (Status 3); errors of Run are bad options (runner.ErrBadConfig,
// locker.ErrInvalid), a machine without redis-server or Docker
// (ErrEnvironment), and a run directory that cannot be written.
func Run(ctx context.Context, opts Options) (*Result, error) {
	reg, err := Registry(opts.Locks...)
	if err != nil {
		return nil, err
	}
	var locks []string
	for _, e := range opts.Locks {
		locks = append(locks, e.Name)
	}
	builtins := zoo.Builtin().Names()
	for _, b := range opts.Builtins {
		if !slices.Contains(builtins, b) {
			return nil, fmt.Errorf("%w: Builtins: %q is not a built-in lock (known: %v)", runner.ErrBadConfig, b, builtins)
		}
		locks = append(locks, b)
	}
	if len(locks) == 0 {
		return nil, fmt.Errorf("%w: no locks (give Locks or Builtins)", runner.ErrBadConfig)
	}
	if opts.Parallel < 0 {
		return nil, fmt.Errorf("%w: Parallel = %d: must be >= 0 (0: 3 scenarios at once)", runner.ErrBadConfig, opts.Parallel)
	}
	seeds := opts.Seeds
	if len(seeds) == 0 {
		seeds = []uint64{1}
	}
	out := opts.Out
	if out == "" {
		if out, err = os.MkdirTemp("", "lockproof-run-"); err != nil {
			return nil, fmt.Errorf("run directory: %w", err)
		}
	}
	cfg := runner.Config{Locks: locks, Faults: opts.Faults, Seeds: seeds, Duration: opts.Duration, Registry: reg, Mix: opts.Mix,
		Out: out, Progress: opts.Progress, Logger: opts.Logger, KeepAll: opts.KeepAll, Topology: opts.Topology, Parallel: opts.Parallel}
	left, err := runner.Prepare(ctx, &cfg, env.Options{Kind: opts.Provider, Docker: opts.Docker, DockerCheck: opts.DockerCheck})
	switch {
	case errors.Is(err, env.ErrUnavailable):
		return nil, fmt.Errorf("%w: %w", ErrEnvironment, err)
	case err != nil:
		return nil, err
	}
	for _, err := range left { // failover-skew needs the process environment
		cfg.Logger.Warn("fault left out of the default matrix", "reason", err)
	}
	sum, err := runner.Run(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &Result{Dir: out, Summary: sum, Status: sum.Status()}, nil
}

// MaybeChild runs this process as a workload client of the pause-process
// fault when the harness started it as one (it then never returns), and
// returns at once otherwise. A test binary that runs pause-process on your
// locks calls it first in TestMain, with the same entries as Options.Locks.
func MaybeChild(entries ...locker.Entry) {
	reg, err := Registry(entries...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lockproof.MaybeChild:", err)
		os.Exit(2)
	}
	workload.MaybeChild(reg)
}
