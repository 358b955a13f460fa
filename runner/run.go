// Package runner runs lockproof's lock × fault × seed matrix on chaos
// environments and writes the run directory of the summary.json contract
// (docs/DESIGN.md): summary.json, and per scenario
// <lock>-<fault>-<seed>/history.jsonl (written by chaos.Run before anything
// is checked), check.json (the checker's result) and, for violations,
// Porcupine's porcupine.html. It is the orchestration stage of lockproof:
// chaos produces histories, the checker judges them, reports renders them,
// and this package plans and schedules the runs around them; package judge
// decides whether each came out as predicted (the profiles' predictions,
// amended by a lock's own locker.Entry).
//
// It also measures how fast the harness finds each broken lock (Detect),
// and saves and replays violations as named regressions.
//
// Scheduling follows each fault's chaos.Scope: faults that act on one
// scenario's own clients run a few scenarios at a time on one shared
// environment, kept apart by key prefixes; faults that act on the servers
// everyone uses (a paused master) run alone on it; faults that change the
// environment for good (a failover) get a fresh environment each.
//
// Files by job: plan.go (what to run), run.go (scheduling and
// environments), scenario.go (one scenario: run, check, judge, validate the
// trace), summary.go (summary.json and its cells), matrix.go (the
// default matrix's faults), detect.go, regression.go, trim.go, merge.go
// (report --merge), rundir.go (the run directory and its marker).
package runner

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/lockproof/lockproof/chaos"
	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/internal/redact"
	"github.com/lockproof/lockproof/reports"
)

// Validate checks the plan cfg makes (its scenarios and its shard)
// without touching the disk or an environment: what Run would refuse as
// bad configuration, said before a caller makes the run directory.
func (c Config) Validate() error {
	if c.Registry == nil {
		return fmt.Errorf("%w: Registry is required (zoo.Builtin() holds the built-in locks)", ErrBadConfig)
	}
	specs, err := c.specs()
	if err != nil {
		return err
	}
	_, _, err = c.shardOf(specs)
	return err
}

// Run runs the matrix and writes the run directory. It returns the summary
// (also written as Out/summary.json, rewritten after every scenario so that
// an interrupted run leaves a readable one). A scenario that cannot run
// (its environment fails, the runner fails) gets unknown verdicts and its
// error; only bad configuration and a run directory that cannot be written
// are errors of Run.
func Run(ctx context.Context, cfg Config) (*contract.Summary, error) {
	if cfg.Registry == nil {
		// The runner names no lock of its own: the caller brings them
		// (zoo.Builtin() for the built-in ones, lockproof.Registry for
		// those and a user's).
		return nil, fmt.Errorf("%w: Registry is required (zoo.Builtin() holds the built-in locks)", ErrBadConfig)
	}
	specs, err := cfg.specs()
	if err != nil {
		return nil, err
	}
	specs, shard, err := cfg.shardOf(specs)
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
	if cfg.Parallel <= 0 {
		cfg.Parallel = 3
	}
	if cfg.CheckTimeout <= 0 {
		cfg.CheckTimeout = 60 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	red := cfg.red
	if red == nil {
		red = redact.New()
	}
	red.Add(cfg.Secrets...)
	// Wrapped again after Prepare's: the caller may have set another
	// logger since, and a second pass over clean text finds nothing.
	cfg.Logger = slog.New(red.Handler(cfg.Logger.Handler()))
	// A new run directory is marked first, with the run's id (the one
	// its keys are named by, too); one made by lockproof run (marked
	// already) keeps its id.
	token := NewRunID()
	id, err := CreateRunDir(cfg.Out, token)
	if err != nil {
		return nil, err
	}
	if id != "" && validRunID(id) && !cfg.Resume {
		token = id
	}
	m := &matrix{cfg: cfg, specs: specs, rows: make([]*contract.Row, len(specs)), runCtx: ctx, shard: shard, token: token, red: red}
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
		switch s.fault.Scope {
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
		if err := writeReport(cfg.Out); err != nil {
			return sum, err
		}
	}
	return sum, nil
}

// resume takes the rows of the run directory's summary.json that belong
// to the plan and did run (see contract.Row.NotRun): those scenarios are not
// run again.
func (m *matrix) resume() error {
	old, err := ReadSummary(m.cfg.Out)
	if err != nil {
		return fmt.Errorf("resume %s: %w", m.cfg.Out, err)
	}
	byID := map[string]*contract.Row{}
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

// writeReport renders the report of the run directory dir with package
// reports (report.md, report.html, junit.xml, report.json).
func writeReport(dir string) error {
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
	shard  *contract.Shard // the part of the plan run (Config.Shard), nil: all

	mu       sync.Mutex
	rows     []*contract.Row
	cells    []*contract.Cell // judgeCells
	done     int
	shared   env.Env
	sharedEr error
	opened   bool
	writeErr error
	// token names this run's keys on a bring-your-own deployment (keyPrefix).
	token string
	// warned: the non-empty databases of a bring-your-own deployment were said.
	warned sync.Once
	// red redacts the run's secrets (Config.Secrets, and each opened
	// environment's: learnSecrets) from every text from outside before it is
	// written: the one place the run's records pass through (redactRow,
	// failed, the history's Scenario.Redact, the Logger).
	red *redact.Redactor
}

// learnSecrets learns the secrets of e, an environment just opened, before
// anything that ran on it is written: its servers' passwords, which
// lockproof makes anew for each environment of its own.
func (m *matrix) learnSecrets(e env.Env) {
	if e != nil {
		m.red.Add(e.Topology().Auth.Secrets()...)
	}
}

// keyPrefix is the prefix of s's keys on a bring-your-own deployment:
// lockproof's, this run's alone (a re-run of a seed starts from nothing
// the last one left), and s's (chaos.ClearKeys deletes them after it).
func (m *matrix) keyPrefix(s Spec) string { return byoKeys + m.token + "-" + s.ID() + "-" }

// byoKeys begins every key of a run on a bring-your-own deployment.
const byoKeys = "lockproof-"

// KeysNamed says how a run on an environment of kind k names its keys,
// as `run --plan` prints it: after the scenario (chaos.Scenario's
// default KeyPrefix), and on a bring-your-own deployment after the run
// too (keyPrefix).
func KeysNamed(k env.Kind) string {
	if k == env.BYO {
		return byoKeys + "<run>-<lock>-<fault>-<seed>-*"
	}
	return "<lock>-<fault>-<seed>-*"
}

// warnNonEmpty says once, on Progress and to the Logger, when a
// bring-your-own deployment's databases already hold keys: the run shares
// them with whatever else lives there (it touches its own keys alone).
func (m *matrix) warnNonEmpty(ctx context.Context, e env.Env) {
	if e == nil || e.Kind() != env.BYO {
		return
	}
	m.warned.Do(func() {
		held, err := chaos.KeysHeld(ctx, e)
		if err != nil {
			m.cfg.Logger.Warn("count the deployment's keys", "err", err)
		}
		for _, a := range slices.Sorted(maps.Keys(held)) {
			msg := fmt.Sprintf("warning: the database at %s already holds %d keys: the run adds and deletes keys named %s%s-* alone, beside them", a, held[a], byoKeys, m.token)
			m.cfg.Logger.Warn(msg)
			if m.cfg.Progress != nil {
				fmt.Fprintln(m.cfg.Progress, msg)
			}
		}
	})
}

// sharedEnv opens the shared environment once.
func (m *matrix) sharedEnv(ctx context.Context) (env.Env, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.opened {
		m.opened = true
		octx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		m.shared, m.sharedEr = m.cfg.Open(octx, chaos.On(chaos.SharedSpec(), m.cfg.Topology))
		cancel()
		if m.sharedEr != nil {
			m.shared = nil // nothing to close (whatever the opener returned)
			m.sharedEr = fmt.Errorf("open the shared environment: %w", m.sharedEr)
		} else {
			m.learnSecrets(m.shared)
			m.warnNonEmpty(ctx, m.shared)
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
	e, err := m.cfg.Open(octx, chaos.On(s.fault.FreshSpec(s.entry.Needs), m.cfg.Topology))
	cancel()
	if err != nil {
		m.finish(i, m.failed(s, fmt.Errorf("open a fresh environment: %w", err)), start)
		return
	}
	m.learnSecrets(e)
	m.warnNonEmpty(ctx, e)
	row := m.runOne(ctx, e, s)
	closeEnv(e, m.cfg.Logger)
	m.finish(i, row, start)
}
