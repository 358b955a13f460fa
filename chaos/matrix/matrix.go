// Package matrix runs lockproof's lock × fault × seed matrix on chaos
// environments and writes the run directory of the summary.json contract
// (docs/DESIGN.md): summary.json, and per scenario
// <lock>-<fault>-<seed>/history.jsonl (written by chaos.Run before anything
// is checked), check.json (the checker's result) and, for violations,
// Porcupine's porcupine.html.
//
// It also holds what the guarantees predict for every lock under every
// fault (Expected), measures how fast the harness finds each broken lock
// (Detect), and saves and replays violations as named regressions.
//
// Scheduling: faults that act on one scenario's own clients (network faults
// on the clients' proxies, pauses, crashes, clock skew) run a few scenarios
// at a time on one shared environment, kept apart by key prefixes; a paused
// server touches everyone, so pause-server scenarios run alone on the shared
// environment; a failover changes the topology for good, so each failover
// scenario gets a fresh environment.
package matrix

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lockproof/lockproof/chaos"
	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/workload"
	"github.com/lockproof/lockproof/checker"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/reports"
	"github.com/lockproof/lockproof/zoo"
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
	// After and Before are the fault point of pause-client and
	// crash-client: the command after whose reply (or before whose sending,
	// crash-client only) the fault strikes ("" for the fault's default).
	After, Before string
	// Duration of the workload and TTL of the leases; 0 takes the matrix
	// defaults (the fault's chaos.Fault DefaultDuration, chaos's TTL).
	Duration, TTL time.Duration
	// Clients per key; 0 takes the matrix default for the fault (Shape).
	Clients int
	// Hold bounds the random time a holder works between its read and its
	// write, Think the time between two attempts, OpTimeout each operation;
	// 0 takes the default for the fault (Shape).
	Hold, Think, OpTimeout time.Duration
}

// SpecRecord is how summary.json rows and saved regressions record a Spec's
// fault point, durations and workload shape (in milliseconds).
type SpecRecord struct {
	// After and Before are the fault point (Spec).
	After  string `json:"after,omitempty"`
	Before string `json:"before,omitempty"`
	// DurationMs and TTLMs are the workload's duration and lease length.
	DurationMs int64 `json:"duration_ms"`
	TTLMs      int64 `json:"ttl_ms"`
	// Clients, HoldMs and ThinkMs are the workload's shape (Spec).
	Clients int   `json:"clients,omitempty"`
	HoldMs  int64 `json:"hold_ms,omitempty"`
	ThinkMs int64 `json:"think_ms,omitempty"`
	// OpTimeoutMs bounds each operation (0: the matrix default for the fault).
	OpTimeoutMs int64 `json:"op_timeout_ms,omitempty"`
}

// recordOf records s's fault point, durations and shape.
func recordOf(s Spec) SpecRecord {
	return SpecRecord{After: s.After, Before: s.Before, DurationMs: s.Duration.Milliseconds(), TTLMs: s.TTL.Milliseconds(),
		Clients: s.Clients, HoldMs: s.Hold.Milliseconds(), ThinkMs: s.Think.Milliseconds(), OpTimeoutMs: s.OpTimeout.Milliseconds()}
}

// spec is the Spec of lock, fault and seed with r's fault point, durations and shape.
func (r SpecRecord) spec(lock, fault string, seed uint64) Spec {
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	return Spec{Lock: lock, Fault: fault, Seed: seed, After: r.After, Before: r.Before,
		Duration: ms(r.DurationMs), TTL: ms(r.TTLMs), Clients: r.Clients, Hold: ms(r.HoldMs), Think: ms(r.ThinkMs),
		OpTimeout: ms(r.OpTimeoutMs)}
}

// ID names the scenario and its directory: <lock>-<fault>-<seed>.
func (s Spec) ID() string { return fmt.Sprintf("%s-%s-%d", s.Lock, s.Fault, s.Seed) }

// DefaultTTL is the lease length of the matrix's scenarios (chaos's default).
const DefaultTTL = 500 * time.Millisecond

// Config is a matrix run.
type Config struct {
	// Specs are the scenarios, in order. When empty, Run runs Locks × Faults
	// × Seeds (lock-major), each with After(lock, fault).
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
	// Kind is the kind of environment Open makes, when known: a fault that
	// cannot run there (chaos.Fault Available) is refused up front, and the
	// default plan (no Faults) leaves it out. "" checks nothing.
	Kind env.Kind
	// Open opens environments; required. The shared environment is opened
	// with chaos.SharedSpec, each scenario of a chaos.ScopeFresh fault with
	// its chaos.Fault FreshSpec.
	Open Opener
	// Registry holds the locks Locks and Specs name; nil means
	// zoo.Builtin(). Register your own lock in it to run it under the
	// matrix (locker.Entry; see the README, "Run your own lock").
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
	// Resume continues the run that Out holds: the scenarios of the plan
	// that its summary.json records as run are kept as they are, and only
	// the others (never started, or interrupted: Scenario.NotRun) run. The
	// plan (locks, faults, seeds, options) should be the interrupted run's.
	Resume bool
	// Trace validates the histories of the locks it names against a model
	// (lock ID → check) for the rows' trace, trace_line and trace_error;
	// the CLI's --tla-jar sets it for the fenced lock (package tla). A
	// rejected trace is a mismatch. Nil: no trace is validated.
	Trace map[string]TraceCheck
	// Logger receives details; nil discards.
	Logger *slog.Logger
}

// Scenario is one scenario of summary.json: the contract's fields
// (reports.ScenarioSummary) and a few more.
type Scenario struct {
	reports.ScenarioSummary
	// SpecRecord is the fault point, durations and shape used.
	SpecRecord
}

// ID is the scenario's directory name.
func (s *Scenario) ID() string { return path.Dir(s.History) }

// Verdict returns the verdict of a property (PropLease, ...).
func (s *Scenario) Verdict(prop string) checker.Verdict {
	switch prop {
	case PropLease:
		return s.Lease
	case PropResource:
		return s.Resource
	case PropLiveness:
		return s.Liveness
	}
	return checker.Unknown
}

// Unknown reports whether the row is inconclusive: some verdict is
// unknown, or the scenario or its fault failed (Error, FaultError). A fault
// that never ran proves nothing, so such a row is never "as expected", and
// the run exits 3 for it unless a verdict contradicts the expectation.
func (s *Scenario) Unknown() bool {
	return s.Lease == checker.Unknown || s.Resource == checker.Unknown || s.Liveness == checker.Unknown ||
		s.Error != "" || s.FaultError != ""
}

// Summary is summary.json.
type Summary struct {
	Scenarios []*Scenario `json:"scenarios"`
	// Cells sum the seeds of each lock × fault up (additive to the
	// contract: tools that read only scenarios are unaffected).
	Cells []*Cell `json:"cells,omitempty"`
}

// Cell is one lock × fault over its seeds (reports.Cell).
type Cell = reports.Cell

// Status sums a run up as `lockproof run` exits: 0 every verdict as
// expected, 1 some verdict not as expected or some cell's detection rate
// a regression (Cell.Regressions), 3 some verdict unknown (and nothing
// unexpected).
func (s *Summary) Status() int {
	unknown := false
	for _, sc := range s.Scenarios {
		if len(sc.Mismatches) > 0 {
			return 1
		}
		unknown = unknown || sc.Unknown()
	}
	for _, c := range s.Cells {
		if len(c.Regressions) > 0 {
			return 1
		}
	}
	if unknown {
		return 3
	}
	return 0
}

func (c Config) specs() ([]Spec, error) {
	specs := c.Specs
	if len(specs) == 0 {
		for _, l := range c.Locks {
			for _, f := range c.Faults {
				for _, s := range c.Seeds {
					specs = append(specs, Spec{Lock: l, Fault: f, Seed: s, After: After(l, f), Before: Before(l, f)})
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
		if err := fault.Available(c.Kind); err != nil {
			return nil, fmt.Errorf("%w: scenario %s: %w", ErrBadConfig, s.ID(), err)
		}
		if (s.After != "" || s.Before != "") && fault.Point == chaos.PointNone {
			return nil, fmt.Errorf("%w: scenario %s: a fault point (after/before) needs a fault that takes one (pause-client, crash-client)", ErrBadConfig, s.ID())
		}
		if s.Before != "" && fault.Point != chaos.PointAfterOrBefore || s.After != "" && s.Before != "" {
			return nil, fmt.Errorf("%w: scenario %s: before is for crash-client only, and excludes after", ErrBadConfig, s.ID())
		}
		if seen[s.ID()] {
			return nil, fmt.Errorf("%w: scenario %s given twice", ErrBadConfig, s.ID())
		}
		seen[s.ID()] = true
		// The scenario's own value, else the run's, else the fault's default.
		sh := fault.WorkloadShape()
		s.Duration = cmp.Or(s.Duration, c.Duration, fault.DefaultDuration())
		s.TTL = cmp.Or(s.TTL, c.TTL, DefaultTTL)
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

// Run runs the matrix and writes the run directory. It returns the summary
// (also written as Out/summary.json, rewritten after every scenario so that
// an interrupted run leaves a readable one). A scenario that cannot run
// (its environment fails, the runner fails) gets unknown verdicts and its
// error; only bad configuration and a run directory that cannot be written
// are errors of Run.
func Run(ctx context.Context, cfg Config) (*Summary, error) {
	specs, err := cfg.specs()
	if err != nil {
		return nil, err
	}
	if cfg.Out == "" {
		return nil, fmt.Errorf("%w: Out (the run directory) is required", ErrBadConfig)
	}
	if cfg.Open == nil {
		return nil, fmt.Errorf("%w: Open (the environment opener) is required", ErrBadConfig)
	}
	if cfg.Runner == nil {
		cfg.Runner = chaos.Run
	}
	if cfg.Registry == nil {
		cfg.Registry = zoo.Builtin()
	}
	for _, s := range specs {
		if _, ok := cfg.Registry.Lookup(s.Lock); !ok {
			return nil, fmt.Errorf("%w: scenario %s: lock %q is not in the registry (known: %v)", ErrBadConfig, s.ID(), s.Lock, cfg.Registry.Names())
		}
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 3
	}
	if cfg.CheckTimeout <= 0 {
		cfg.CheckTimeout = 60 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return nil, fmt.Errorf("run directory: %w", err)
	}
	m := &matrix{cfg: cfg, specs: specs, rows: make([]*Scenario, len(specs)), runCtx: ctx}
	defer m.closeShared()
	if cfg.Resume {
		if err := m.resume(); err != nil {
			return nil, err
		}
	}

	// Scenarios on the shared environment first (a few at a time), then
	// those of server faults alone, then each of a fresh-environment fault
	// (a failover) on an environment of its own.
	var local, paused, failover []int
	for i, s := range specs {
		if m.rows[i] != nil {
			continue // finished before (Resume)
		}
		f, _ := chaos.Lookup(s.Fault) // known: specs
		switch f.Scope {
		case chaos.ScopeFresh:
			failover = append(failover, i)
		case chaos.ScopeServers:
			paused = append(paused, i)
		default:
			local = append(local, i)
		}
	}
	sem := make(chan struct{}, cfg.Parallel)
	var wg sync.WaitGroup
	for _, i := range local {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		if ctx.Err() != nil { // interrupted while waiting for a slot
			<-sem
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			m.runShared(ctx, i)
		}()
	}
	wg.Wait()
	for _, i := range paused {
		if ctx.Err() != nil {
			break
		}
		m.runShared(ctx, i)
	}
	m.closeShared()
	for _, i := range failover {
		if ctx.Err() != nil {
			break
		}
		m.runFresh(ctx, i)
	}
	for i, r := range m.rows {
		if r == nil { // interrupted before it ran
			row := m.failed(specs[i], fmt.Errorf("not run: %w", context.Cause(ctx)))
			row.NotRun = true
			m.finish(i, row, time.Now())
		}
	}
	m.judgeCells()
	if !cfg.KeepAll {
		if err := trim(cfg.Out, m.rows); err != nil {
			m.cfg.Logger.Warn("trim the run directory", "err", err)
		}
	}
	sum := m.summary()
	if err := m.writeSummary(); err != nil {
		return sum, err
	}
	if !cfg.NoReport {
		if err := WriteReport(cfg.Out); err != nil {
			return sum, err
		}
	}
	return sum, nil
}

// resume takes the rows of the run directory's summary.json that belong
// to the plan and did run (see Scenario.NotRun): those scenarios are not
// run again.
func (m *matrix) resume() error {
	old, err := ReadSummary(m.cfg.Out)
	if err != nil {
		return fmt.Errorf("resume %s: %w", m.cfg.Out, err)
	}
	byID := map[string]*Scenario{}
	for _, r := range old.Scenarios {
		if !r.NotRun {
			byID[r.ID()] = r
		}
	}
	for i, s := range m.specs {
		if r, ok := byID[s.ID()]; ok {
			m.rows[i] = r
			m.done++
		}
	}
	return nil
}

// WriteReport renders the report of the run directory dir with package
// reports (report.md, report.html, junit.xml, report.json).
func WriteReport(dir string) error {
	run, err := reports.Load(dir)
	if err != nil {
		return fmt.Errorf("report of %s: %w", dir, err)
	}
	if err := reports.WriteAll(dir, reports.Build(run)); err != nil {
		return fmt.Errorf("report of %s: %w", dir, err)
	}
	return nil
}

type matrix struct {
	// runCtx is the context of the whole run: once it is done, finished
	// rows are interrupted ones (see finish).
	runCtx context.Context
	cfg    Config
	specs  []Spec

	mu       sync.Mutex
	rows     []*Scenario
	cells    []*Cell // judgeCells
	done     int
	shared   env.Env
	sharedEr error
	opened   bool
	writeErr error
}

// sharedEnv opens the shared environment once.
func (m *matrix) sharedEnv(ctx context.Context) (env.Env, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.opened {
		m.opened = true
		octx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		m.shared, m.sharedEr = m.cfg.Open(octx, chaos.SharedSpec())
		cancel()
		if m.sharedEr != nil {
			m.sharedEr = fmt.Errorf("open the shared environment: %w", m.sharedEr)
		}
	}
	return m.shared, m.sharedEr
}

func (m *matrix) closeShared() {
	m.mu.Lock()
	e := m.shared
	m.shared = nil
	m.mu.Unlock()
	closeEnv(e, m.cfg.Logger)
}

func closeEnv(e env.Env, log *slog.Logger) {
	if e == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := e.Close(ctx); err != nil {
		log.Warn("close environment", "err", err)
	}
}

func (m *matrix) runShared(ctx context.Context, i int) {
	start := time.Now()
	e, err := m.sharedEnv(ctx)
	if err != nil {
		m.finish(i, m.failed(m.specs[i], err), start)
		return
	}
	m.finish(i, m.runOne(ctx, e, m.specs[i]), start)
}

func (m *matrix) runFresh(ctx context.Context, i int) {
	start := time.Now()
	s := m.specs[i]
	octx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	f, _ := chaos.Lookup(s.Fault) // known: specs
	e, err := m.cfg.Open(octx, f.FreshSpec(s.Lock))
	cancel()
	if err != nil {
		m.finish(i, m.failed(s, fmt.Errorf("open a fresh environment: %w", err)), start)
		return
	}
	row := m.runOne(ctx, e, s)
	closeEnv(e, m.cfg.Logger)
	m.finish(i, row, start)
}

// newRow is a summary row with the spec's identity and expectation.
func (m *matrix) newRow(s Spec) *Scenario {
	exp := ExpectedOf(m.cfg.Registry, s.Lock, s.Fault)
	row := &Scenario{SpecRecord: recordOf(s)}
	row.Lock, row.Fault, row.Seed = s.Lock, s.Fault, int64(s.Seed)
	row.History = path.Join(s.ID(), reports.HistoryFile)
	row.Started = time.Now().UTC().Format(time.RFC3339Nano)
	row.Expected = reports.Expected{Lease: exp.Lease.Verdict(), Resource: exp.Resource.Verdict(), Liveness: exp.Liveness.Verdict()}
	for _, p := range []string{PropLease, PropResource, PropLiveness} {
		if exp.Want(p) == WantMay {
			row.MayViolate = append(row.MayViolate, p)
		}
	}
	return row
}

// failed is the row of a scenario that could not run: unknown verdicts, an
// empty history and a check.json saying why.
func (m *matrix) failed(s Spec, err error) *Scenario {
	row := m.newRow(s)
	row.Error = err.Error()
	row.Lease, row.Resource, row.Liveness = checker.Unknown, checker.Unknown, checker.Unknown
	dir := filepath.Join(m.cfg.Out, s.ID())
	if e := os.MkdirAll(dir, 0o755); e == nil {
		hp := filepath.Join(dir, reports.HistoryFile)
		if _, e := os.Stat(hp); e != nil {
			_ = os.WriteFile(hp, nil, 0o644)
		}
		_ = writeJSON(filepath.Join(dir, reports.CheckFile), unknownResult(err))
	}
	return row
}

// unknownResult is a checker result with every verdict unknown because of err.
func unknownResult(err error) *checker.Result {
	r := &checker.Result{Verdict: checker.Unknown}
	for _, p := range []struct {
		pr   *checker.PropertyResult
		name string
	}{{&r.Lease, checker.PropLease}, {&r.Resource, checker.PropResource}, {&r.Liveness, checker.PropLiveness}} {
		*p.pr = checker.PropertyResult{Property: p.name, Verdict: checker.Unknown, Explanation: "not checked: " + err.Error()}
	}
	return r
}

// checkOptions are the checker's options for s: the budget, and the bound
// s's lock promises its waiters.
func (m *matrix) checkOptions(s Spec) checker.Options {
	o := checker.Options{Timeout: m.cfg.CheckTimeout}
	if e, ok := m.cfg.Registry.Lookup(s.Lock); ok {
		o.WaitBound = e.WaitBound
	}
	return o
}

// waitTimeout is how long s's waiters wait: twice the promised bound, so
// that a broken promise shows as a waiter served late or giving up.
func (m *matrix) waitTimeout(s Spec) time.Duration {
	e, _ := m.cfg.Registry.Lookup(s.Lock)
	return 2 * e.WaitBound
}

// runOne runs, checks and files one scenario.
func (m *matrix) runOne(ctx context.Context, e env.Env, s Spec) *Scenario {
	row := m.newRow(s)
	dir := filepath.Join(m.cfg.Out, s.ID())
	sc := chaos.Scenario{Lock: s.Lock, Fault: s.Fault, Seed: s.Seed, Duration: s.Duration, TTL: s.TTL,
		Clients: s.Clients, Logger: m.cfg.Logger.With("scenario", s.ID())}
	sc.Workload.Hold, sc.Workload.Think, sc.Workload.OpTimeout = s.Hold, s.Think, s.OpTimeout
	sc.Workload.Locks, sc.Workload.Mix, sc.Workload.WaitTimeout = m.cfg.Registry, m.cfg.Mix, m.waitTimeout(s)
	setFaultPoint(&sc, s.After, s.Before)
	rctx, cancel := context.WithTimeout(ctx, s.Duration+2*time.Minute)
	out, runErr := m.cfg.Runner(rctx, e, sc, dir)
	cancel()
	row.FaultName, row.FaultEvidence = out.FaultName, out.FaultEvidence
	if out.FaultErr != nil {
		row.FaultError = out.FaultErr.Error()
	}
	ops := out.Ops
	if runErr != nil {
		row.Error = runErr.Error()
		if ops == nil {
			// The history on disk is complete also on error; check what it holds.
			if got, err := history.ReadFile(filepath.Join(dir, reports.HistoryFile)); err == nil {
				ops = got
			}
		}
	}
	for i := range ops {
		if ops[i].Kind == history.Fault {
			st := time.Duration(ops[i].Call).Milliseconds()
			row.FaultStartMs = &st
			break
		}
	}
	if runErr != nil && len(ops) == 0 {
		bad := m.failed(s, runErr)
		bad.FaultName, bad.FaultError, bad.FaultEvidence = row.FaultName, row.FaultError, row.FaultEvidence
		return bad
	}
	cctx, cancel := context.WithTimeout(ctx, 2*m.cfg.CheckTimeout+30*time.Second)
	defer cancel()
	res, err := checker.Check(cctx, ops, m.checkOptions(s))
	if err != nil {
		bad := m.failed(s, fmt.Errorf("check %s: %w", filepath.Join(dir, reports.HistoryFile), err))
		bad.FaultName, bad.FaultError, bad.FaultEvidence = row.FaultName, row.FaultError, row.FaultEvidence
		return bad
	}
	if err := writeJSON(filepath.Join(dir, reports.CheckFile), res); err != nil {
		row.Error = joinErr(row.Error, err.Error())
	}
	row.Ops = res.Counts.Ops
	row.Rejected = res.Counts.Rejected
	row.Lease, row.Resource, row.Liveness = res.Lease.Verdict, res.Resource.Verdict, res.Liveness.Verdict
	if row.FaultStartMs != nil {
		row.DetectMs = detection(res, time.Duration(*row.FaultStartMs)*time.Millisecond, ops)
	}
	if check := m.cfg.Trace[s.Lock]; check != nil {
		accepted, line, err := check(ctx, ops)
		switch {
		case err != nil:
			row.Trace, row.TraceError = reports.TraceError, err.Error()
		case accepted:
			row.Trace = reports.TraceAccepted
		default:
			row.Trace, row.TraceLine = reports.TraceRejected, line
		}
	}
	if res.Verdict == checker.Violated {
		if err := visualize(cctx, filepath.Join(dir, reports.VisualizationFile), ops, res, m.cfg.CheckTimeout); err != nil {
			m.cfg.Logger.Warn("porcupine visualization", "scenario", s.ID(), "err", err)
		}
	}
	return row
}

func joinErr(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// detection returns, per violated property, the time from the fault
// window's start to the call of the op that completed the earliest of its
// listed violations (a violation is complete once its last op was called).
func detection(res *checker.Result, faultStart time.Duration, ops []history.Op) map[string]int64 {
	start := int64(-1)
	for i := range ops {
		if ops[i].Kind == history.Fault && (start < 0 || ops[i].Call < start) {
			start = ops[i].Call
		}
	}
	if start < 0 {
		start = int64(faultStart)
	}
	out := map[string]int64{}
	for _, p := range []struct {
		name string
		pr   *checker.PropertyResult
	}{{PropLease, &res.Lease}, {PropResource, &res.Resource}, {PropLiveness, &res.Liveness}} {
		if p.pr.Verdict != checker.Violated {
			continue
		}
		best := int64(-1)
		for _, v := range p.pr.Violations {
			last := int64(-1)
			for _, o := range v.Ops {
				last = max(last, o.Call)
			}
			if last >= 0 && (best < 0 || last < best) {
				best = last
			}
		}
		if best >= 0 {
			out[p.name] = max(0, time.Duration(best-start).Milliseconds())
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func visualize(ctx context.Context, p string, ops []history.Op, res *checker.Result, timeout time.Duration) error {
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	if err := checker.Visualize(ctx, f, ops, res, checker.Options{Timeout: timeout}); err != nil {
		f.Close()
		os.Remove(p)
		return err
	}
	return f.Close()
}

// mismatch says that property p came out v against the prediction w.
func mismatch(p string, v checker.Verdict, w Want) string {
	return fmt.Sprintf("%s %s, expected %s", p, v, w)
}

// TraceCheck validates one scenario's history against a model: accepted,
// or the history line of the first event the model refused. An error means
// no verdict (no TLC, a timeout).
type TraceCheck func(ctx context.Context, ops []history.Op) (accepted bool, line int, err error)

// judge compares a row's verdicts with the prediction, and a validated
// trace with the model.
func judge(reg *locker.Registry, row *Scenario) {
	exp := ExpectedOf(reg, row.Lock, row.Fault)
	row.Mismatches = nil
	for _, p := range []string{PropLease, PropResource, PropLiveness} {
		v, w := row.Verdict(p), exp.Want(p)
		if v != checker.Unknown && !w.Matches(v) {
			row.Mismatches = append(row.Mismatches, mismatch(p, v, w))
		}
	}
	if row.Trace == reports.TraceRejected {
		row.Mismatches = append(row.Mismatches, fmt.Sprintf("trace rejected by the model at line %d", row.TraceLine))
	}
	if exp.Rejected && row.Rejected == 0 && !row.Unknown() {
		row.Mismatches = append(row.Mismatches, "rejected 0, expected > 0 (the fault did not bite)")
	}
	row.AsExpected = len(row.Mismatches) == 0 && !row.Unknown()
}

// finish records a row, reports progress and rewrites summary.json.
func (m *matrix) finish(i int, row *Scenario, start time.Time) {
	if err := m.runCtx.Err(); err != nil && !row.NotRun {
		// Cut short by the interrupt: its verdicts say nothing, and a
		// resumed run runs it again.
		row.NotRun = true
		row.Error = joinErr("interrupted: "+context.Cause(m.runCtx).Error(), row.Error)
	}
	row.ElapsedMs = time.Since(start).Milliseconds()
	judge(m.cfg.Registry, row)
	m.mu.Lock()
	m.rows[i] = row
	m.done++
	// Under the lock: scenarios finish concurrently, and Progress need not
	// be safe for concurrent use (a bytes.Buffer lost a line so).
	if w := m.cfg.Progress; w != nil && !row.NotRun {
		fmt.Fprintln(w, progressLine(m.done, len(m.specs), row))
	}
	m.mu.Unlock()
	if err := m.writeSummary(); err != nil {
		m.cfg.Logger.Warn("summary.json", "err", err)
	}
}

// progressLine is one line of progress for a finished scenario.
func progressLine(done, total int, r *Scenario) string {
	status := "as expected"
	switch {
	case len(r.Mismatches) > 0:
		status = "NOT AS EXPECTED: " + strings.Join(r.Mismatches, "; ")
	case r.Unknown():
		status = "UNKNOWN verdict"
	}
	if r.Error != "" {
		status += " (error: " + r.Error + ")"
	}
	if r.FaultError != "" {
		status += " (fault: " + r.FaultError + ")"
	}
	var det []string
	for _, p := range []string{PropLease, PropResource, PropLiveness} {
		if d, ok := r.DetectMs[p]; ok {
			det = append(det, fmt.Sprintf("%s@%.1fs", p, float64(d)/1000))
		}
	}
	found := ""
	if len(det) > 0 {
		found = " found " + strings.Join(det, ",")
	}
	return fmt.Sprintf("[%*d/%d] %-26s lease %-8s resource %-8s liveness %-8s rejected %-4d ops %-5d %5.1fs%s  %s",
		len(fmt.Sprint(total)), done, total, r.ID(), r.Lease, r.Resource, r.Liveness, r.Rejected, r.Ops,
		float64(r.ElapsedMs)/1000, found, status)
}

// summary returns the finished rows in plan order, and the cells once
// judgeCells has run.
func (m *matrix) summary() *Summary {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := &Summary{Scenarios: []*Scenario{}, Cells: m.cells}
	for _, r := range m.rows {
		if r != nil {
			s.Scenarios = append(s.Scenarios, r)
		}
	}
	return s
}

// judgeCells sums each lock × fault up over its seeds (Cell) and settles
// the rows of must-break properties: a seed that missed what another seed
// of its cell found is as expected (FoundElsewhere), not a mismatch.
func (m *matrix) judgeCells() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cells = cellsOf(m.cfg.Registry, m.rows)
}

// cellsOf judges rows by cell (see judgeCells) and returns the cells in
// plan order.
func cellsOf(reg *locker.Registry, rows []*Scenario) []*Cell {
	type id struct{ lock, fault string }
	var order []id
	byCell := map[id][]*Scenario{}
	for _, r := range rows {
		if r == nil || r.NotRun {
			continue
		}
		k := id{r.Lock, r.Fault}
		if _, ok := byCell[k]; !ok {
			order = append(order, k)
		}
		byCell[k] = append(byCell[k], r)
	}
	var cells []*Cell
	for _, k := range order {
		rs := byCell[k]
		exp := ExpectedOf(reg, k.lock, k.fault)
		c := &Cell{Lock: k.lock, Fault: k.fault, Found: map[string]int{}, Rate: map[string]float64{}, DetectMedianMs: map[string]int64{},
			Want: map[string]string{}, Why: exp.Why}
		for _, p := range []string{PropLease, PropResource, PropLiveness} {
			var det []int64
			for _, r := range rs {
				if r.Verdict(p) == checker.Violated {
					c.Found[p]++
					if d, ok := r.DetectMs[p]; ok {
						det = append(det, d)
					}
				}
			}
			if len(det) > 0 {
				slices.Sort(det)
				c.DetectMedianMs[p] = det[len(det)/2]
			}
			c.Want[p] = string(exp.Want(p))
			if exp.Want(p) != WantViolated || c.Found[p] == 0 {
				continue
			}
			// Found on some seed: the seeds that missed it are as expected.
			for _, r := range rs {
				if i := slices.Index(r.Mismatches, mismatch(p, r.Verdict(p), WantViolated)); i >= 0 {
					r.Mismatches = slices.Delete(r.Mismatches, i, i+1)
					r.FoundElsewhere = append(r.FoundElsewhere, p)
					r.AsExpected = len(r.Mismatches) == 0 && !r.Unknown()
				}
			}
		}
		c.AsExpected = true
		for _, r := range rs {
			if !r.Unknown() {
				c.Seeds++
			}
			c.AsExpected = c.AsExpected && r.AsExpected
		}
		for p, n := range c.Found {
			if c.Seeds > 0 {
				c.Rate[p] = float64(n) / float64(c.Seeds)
			}
		}
		promise(c, exp)
		cells = append(cells, c)
	}
	return cells
}

// writeSummary writes summary.json atomically (temporary file, rename).
func (m *matrix) writeSummary() error {
	sum := m.summary()
	m.mu.Lock()
	defer m.mu.Unlock()
	p := filepath.Join(m.cfg.Out, reports.SummaryFile)
	if err := writeJSON(p, sum); err != nil {
		m.writeErr = err
		return err
	}
	return nil
}

// writeJSON writes v as indented JSON to p through a temporary file.
func writeJSON(p string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	return nil
}

// ReadSummary reads a run directory's summary.json as the matrix wrote it.
func ReadSummary(dir string) (*Summary, error) {
	p := filepath.Join(dir, reports.SummaryFile)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("read summary: %w", err)
	}
	var s Summary
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadConfig, p, err)
	}
	return &s, nil
}
