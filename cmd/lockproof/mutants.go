package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/lockproof/lockproof/chaos"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/internal/jsonfile"
	"github.com/lockproof/lockproof/internal/mutant"
	"github.com/lockproof/lockproof/sim"
	"github.com/lockproof/lockproof/zoo"
)

// mutantsCommand is `lockproof mutants`: the harness's own mutation score.
func mutantsCommand() command {
	return command{summary: "the harness's mutation score: build each mutant of lock/ and fencing/ (mutants/), run it through the simulation and the matrix, say which verifier killed it", run: runMutants}
}

// The budget `lockproof mutants` runs each mutant at unless told.
const (
	// mutantSimSeeds is the simulation's budget: swarm seeds 1-300, the
	// issue's goal (every mutant killed within 300 swarm seeds).
	mutantSimSeeds = 300
	// mutantMatrixFaults are the real-time faults a mutant runs under,
	// one scenario each per seed: those that strike the lock's own paths
	// (the line, hand-offs, lost replies, pauses, crashes), without the
	// failovers and key-loss, whose windows excuse most of what a lock
	// defect breaks.
	mutantMatrixFaults = "none,latency,partition,pause-client,pause-server,crash-client,reset,late-delivery,pubsub-reset"
	// mutantTimeout bounds each verifier's run of a mutant: a mutant that
	// hangs the simulation or the matrix must not hold the night.
	mutantTimeout = time.Hour
)

// mutantsFlags are the flags of `lockproof mutants`.
type mutantsFlags struct {
	mutants      string
	list         bool
	compileOnly  bool
	seeds        int
	simFaults    string
	workers      int
	matrixSeeds  int
	matrixFaults string
	parallel     int
	control      bool
	timeout      time.Duration
	out          string
	src          string
	catalogue    string
}

// runMutants is `lockproof mutants`. Exit codes: 0 every mutant counted
// (neither equivalent nor failing to build) killed by every verifier that
// ran, and the control (the unpatched lock) as predicted; 1 a mutant
// survived a verifier, failed to build, was killed though marked
// equivalent, or the control was not as predicted; 2 bad flags, a bad
// catalogue or a mutant that no longer applies; 3 a verifier's run was
// inconclusive and nothing survived; 4 the machine lacks the go command,
// or what lockproof run needs for the matrix (the simulation's verdicts
// are kept); 130 interrupted (what finished is in mutants.json).
func runMutants(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var f mutantsFlags
	fs := flag.NewFlagSet("mutants", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.mutants, "mutants", "all", "comma-separated mutant names or globs (e.g. \"end-*,fencing-*\"), or all")
	fs.BoolVar(&f.list, "list", false, "list the catalogue's mutants (name, kind, class, file, the defect) and exit")
	fs.BoolVar(&f.compileOnly, "compile-only", false, "apply each mutant to a copy and compile the package it alters; run no verifier")
	fs.IntVar(&f.seeds, "seeds", mutantSimSeeds, "the simulation's budget: lockproof sim --locks fenced --seeds 1-N; 0 skips the simulation")
	fs.StringVar(&f.simFaults, "sim-faults", "swarm", "the simulation's faults (lockproof sim --faults): swarm (each seed its own mix), none, or a comma-separated list")
	fs.IntVar(&f.workers, "workers", runtime.NumCPU(), "the simulation's worker processes")
	fs.IntVar(&f.matrixSeeds, "matrix-seeds", 1, "the real-time matrix's budget: lockproof run --locks fenced --faults F --seeds 1-M; 0 skips the matrix")
	fs.StringVar(&f.matrixFaults, "matrix-faults", mutantMatrixFaults, "the real-time matrix's faults (comma-separated, or all: the default matrix)")
	fs.IntVar(&f.parallel, "parallel", 3, "the matrix's scenarios at once (lockproof run --parallel)")
	fs.BoolVar(&f.control, "control", true, "run the unpatched lock first at the same budget: a seed it is not as predicted on kills no mutant")
	fs.DurationVar(&f.timeout, "timeout", mutantTimeout, "bound of each verifier's run of one mutant (past it: inconclusive)")
	fs.StringVar(&f.out, "out", "", "the run directory to write, new or empty (default runs/mutants-<UTC timestamp>): mutants.json, mutants.md, each mutant's runs, and the source copy while it runs")
	fs.StringVar(&f.src, "src", "", "the lockproof source tree to mutate (default: the module root at or above the current directory)")
	fs.StringVar(&f.catalogue, "catalogue", "", "the directory of *.mutant files (default: SRC/mutants)")
	fs.Usage = func() {
		commandUsage(stderr, fs, []string{
			"lockproof mutants [--mutants NAME|GLOB,...] [--seeds 300] [--sim-faults swarm|none|F,...] [--workers N]",
			"                  [--matrix-seeds 1] [--matrix-faults F,...] [--parallel N] [--control=false] [--timeout D]",
			"                  [--src DIR] [--catalogue DIR] [--out DIR]",
			"lockproof mutants --list [--src DIR] [--catalogue DIR]",
			"lockproof mutants --compile-only [--mutants ...]",
			"Each mutant (mutants/<name>.mutant: one defect of lock/ or fencing/) is applied to a copy of the source,",
			"the CLI is built there, and the simulation and the matrix run it: a verifier kills the mutant when its run",
			"is not as predicted (docs/HARNESS.md, \"Mutation score\").",
		})
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "lockproof mutants: "+format+"\n", a...)
		return exitBadInput
	}
	if fs.NArg() > 0 {
		return bad("unexpected arguments %q (flags only)", fs.Args())
	}
	switch {
	case f.seeds < 0 || f.seeds > simMaxSeeds:
		return bad("--seeds %d: want 0 (no simulation) to %d", f.seeds, simMaxSeeds)
	case f.matrixSeeds < 0 || f.matrixSeeds > maxSeeds:
		return bad("--matrix-seeds %d: want 0 (no matrix) to %d", f.matrixSeeds, maxSeeds)
	case f.workers < 1:
		return bad("--workers %d: must be at least 1", f.workers)
	case f.parallel < 1:
		return bad("--parallel %d: must be at least 1", f.parallel)
	case f.timeout <= 0:
		return bad("--timeout %v: must be more than 0", f.timeout)
	case !f.list && !f.compileOnly && f.seeds == 0 && f.matrixSeeds == 0:
		return bad("--seeds 0 and --matrix-seeds 0: no verifier left to run (--compile-only only compiles)")
	}
	f.simFaults = strings.TrimSpace(f.simFaults)
	if _, err := sim.Mix(f.simFaults); f.seeds > 0 && err != nil {
		return bad("--sim-faults: %v", err)
	}
	f.matrixFaults = strings.TrimSpace(f.matrixFaults)
	if f.matrixSeeds > 0 && f.matrixFaults != "all" {
		if _, err := parseNames("--matrix-faults", f.matrixFaults, chaos.Faults()); err != nil {
			return bad("%v", err)
		}
	}
	src := f.src
	if src == "" {
		wd, err := os.Getwd()
		if err != nil {
			return bad("--src: %v", err)
		}
		if src = mutant.ModuleRoot(wd, modulePath); src == "" {
			return bad("--src: no lockproof source tree (a go.mod of module %s) at or above %s: run it in the repository, or name it", modulePath, wd)
		}
	} else if mutant.ModuleRoot(src, modulePath) != mustAbs(src) {
		return bad("--src %s: not a lockproof source tree (its go.mod must declare module %s)", src, modulePath)
	}
	src = mustAbs(src)
	catDir := cmp.Or(f.catalogue, filepath.Join(src, "mutants"))
	all, err := mutant.Load(catDir)
	if err != nil {
		return bad("--catalogue: %v", err)
	}
	selected, err := mutant.Select(all, f.mutants)
	if err != nil {
		return bad("--mutants: %v", err)
	}
	if f.list {
		listMutants(stdout, selected)
		return exitOK
	}
	// Every mutant must apply before anything is built: one that rotted
	// (its search text moved on) is named with its file.
	if err := mutant.Check(src, selected); err != nil {
		return bad("%v", err)
	}
	// The control runs as every lock a selected mutant runs as.
	var controlLocks []string
	names := zoo.Builtin().Names()
	for _, mu := range selected {
		for _, l := range mu.Locks {
			if !slices.Contains(names, l) {
				return bad("%s: locks: %q is not a lock of the registry (lockproof locks lists them)", mu.Source, l)
			}
			if !slices.Contains(controlLocks, l) {
				controlLocks = append(controlLocks, l)
			}
		}
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		fmt.Fprintf(stderr, "lockproof mutants: the go command builds each mutant, and it is not on PATH: %v\n", err)
		return exitEnvironment
	}
	if f.out == "" {
		f.out = filepath.Join("runs", "mutants-"+time.Now().UTC().Format("20060102T150405Z"))
	}
	if err := newOrEmptyDir(f.out); err != nil {
		return bad("--out: %v", err)
	}
	m := &mutation{f: f, src: src, goBin: goBin, stdout: stdout, stderr: stderr, controlLocks: controlLocks}
	return m.run(ctx, selected)
}

// modulePath is the module whose source tree the mutants alter.
const modulePath = "github.com/lockproof/lockproof"

// mustAbs is p made absolute (p itself if that fails).
func mustAbs(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// newOrEmptyDir makes dir, or accepts it when it is an empty directory.
func newOrEmptyDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return os.MkdirAll(dir, 0o755)
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("%s is a file, not a directory", dir)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(ents) > 0 {
		return fmt.Errorf("%s is not empty: name a new or empty directory", dir)
	}
	return nil
}

// listMutants prints the catalogue, one mutant a line.
func listMutants(w io.Writer, ms []*mutant.Mutant) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "MUTANT\tKIND\tCLASS\tFILE\tLOCKS\tDEFECT")
	eq := 0
	for _, m := range ms {
		what := m.What
		if m.Equivalent != "" {
			what += " [equivalent: " + m.Equivalent + "]"
			eq++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", m.Name, m.Kind, m.Class, m.File, strings.Join(m.Locks, ","), what)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "%d mutants, %d of them equivalent\n", len(ms), eq)
}

// mutation is one run of `lockproof mutants`.
type mutation struct {
	f              mutantsFlags
	src, goBin     string
	stdout, stderr io.Writer
	// copyDir is the source's copy the mutants are applied to, in turn.
	copyDir string
	// controlBad are the scenarios ("<lock>/<fault>/<seed>") on which
	// the unpatched lock was not as predicted: no mutant is killed there.
	controlBad map[string]bool
	// controlLocks are the locks the control runs as: every lock a
	// selected mutant runs as.
	controlLocks []string
	// matrixOff, when set, says why the matrix runs no more (the machine
	// lacks what it needs).
	matrixOff string
	file      mutantsFile
	started   time.Time
}

func (m *mutation) say(format string, a ...any) { fmt.Fprintf(m.stdout, format+"\n", a...) }

// run builds and runs the control and every mutant, then writes and
// prints the score.
func (m *mutation) run(ctx context.Context, ms []*mutant.Mutant) int {
	m.started = time.Now()
	m.file = mutantsFile{Started: m.started.UTC().Format(time.RFC3339), Revision: revisionOf(ctx, m.src), CompileOnly: m.f.compileOnly}
	if !m.f.compileOnly {
		m.file.Budget = &mutantsBudget{SimSeeds: m.f.seeds, MatrixSeeds: m.f.matrixSeeds}
		if m.f.seeds > 0 {
			m.file.Budget.SimFaults = m.f.simFaults
		}
		if m.f.matrixSeeds > 0 {
			m.file.Budget.MatrixFaults = m.f.matrixFaults
		}
	}
	dir, err := os.MkdirTemp(m.f.out, "_src-") // "_": no mutant name has one
	if err != nil {
		fmt.Fprintf(m.stderr, "lockproof mutants: %v\n", err)
		return exitBadInput
	}
	m.copyDir = dir
	defer os.RemoveAll(dir)
	if err := mutant.CopyTree(ctx, m.src, dir, m.f.out); err != nil {
		fmt.Fprintf(m.stderr, "lockproof mutants: copying %s: %v\n", m.src, err)
		return exitBadInput
	}
	m.say("lockproof mutants: %d mutants of %s, source copied to %s", len(ms), m.src, dir)
	interrupted := false
	if m.f.control && !m.f.compileOnly {
		c := m.one(ctx, nil)
		m.file.Control = c
		if c.Build != "ok" && ctx.Err() == nil {
			// The source itself does not build: no mutant of it can.
			if err := m.write(); err != nil {
				fmt.Fprintf(m.stderr, "lockproof mutants: %v\n", err)
			}
			fmt.Fprintf(m.stderr, "lockproof mutants: the unpatched source does not build (%s/build.log): %s\n", filepath.Join(m.f.out, controlName), c.Build)
			return exitViolation
		}
		m.controlBad = map[string]bool{}
		for _, v := range []*verifierResult{c.Sim, c.Matrix} {
			if v != nil {
				for _, k := range v.notAsPredicted {
					m.controlBad[k] = true
				}
			}
		}
		interrupted = ctx.Err() != nil
	}
	for i, mu := range ms {
		if interrupted || ctx.Err() != nil {
			interrupted = true
			break
		}
		fmt.Fprintf(m.stdout, "[%d/%d] ", i+1, len(ms))
		m.file.Mutants = append(m.file.Mutants, m.one(ctx, mu))
		if err := m.write(); err != nil {
			fmt.Fprintf(m.stderr, "lockproof mutants: %v\n", err)
			return exitBadInput
		}
	}
	if err := m.write(); err != nil {
		fmt.Fprintf(m.stderr, "lockproof mutants: %v\n", err)
		return exitBadInput
	}
	m.say("")
	printMutantsTable(m.stdout, &m.file)
	m.say("mutants.json and mutants.md in %s", m.f.out)
	if interrupted || ctx.Err() != nil {
		fmt.Fprintf(m.stderr, "lockproof mutants: interrupted after %d of %d mutants\n", len(m.file.Mutants), len(ms))
		return exitInterrupted
	}
	if m.matrixOff != "" {
		fmt.Fprintf(m.stderr, "lockproof mutants: %s\n", m.matrixOff)
		return exitEnvironment
	}
	return m.file.status()
}

// write writes mutants.json and mutants.md as they stand, scored.
func (m *mutation) write() error {
	m.file.ElapsedMs = time.Since(m.started).Milliseconds()
	m.file.Score = score(m.file.Mutants, m.file.Budget)
	if err := jsonfile.Write(filepath.Join(m.f.out, contract.MutantsFile), &m.file); err != nil {
		return err
	}
	var b bytes.Buffer
	writeMutantsMarkdown(&b, &m.file)
	return os.WriteFile(filepath.Join(m.f.out, contract.MutantsTableFile), b.Bytes(), 0o644)
}

// one applies mu (nil: the control, unpatched) to the copy, builds it and
// runs the verifiers the budget asks for.
func (m *mutation) one(ctx context.Context, mu *mutant.Mutant) *mutantResult {
	r := &mutantResult{Name: controlName, Locks: m.controlLocks}
	if mu != nil {
		r = &mutantResult{Name: mu.Name, File: mu.File, Kind: mu.Kind, Class: mu.Class, What: mu.What, Equivalent: mu.Equivalent, Locks: mu.Locks}
	}
	dir := filepath.Join(m.f.out, r.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.Build = err.Error()
		return r
	}
	if mu != nil {
		applied, err := mu.ApplyIn(m.copyDir)
		if err != nil {
			r.Build = err.Error()
			m.say("%s: %v", r.Name, err)
			return r
		}
		defer func() {
			if err := applied.Restore(); err != nil {
				fmt.Fprintf(m.stderr, "lockproof mutants: %v\n", err)
			}
		}()
	}
	bin := filepath.Join(dir, "lockproof")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	start := time.Now()
	args := []string{"build", "-buildvcs=false", "-o", bin, "./cmd/lockproof"}
	what := "the CLI"
	if m.f.compileOnly && mu != nil {
		args, what = []string{"build", "-buildvcs=false", "./" + filepath.ToSlash(filepath.Dir(filepath.FromSlash(mu.File)))}, "its package"
	}
	out, err := m.exec(ctx, m.copyDir, filepath.Join(dir, "build.log"), m.goBin, args...)
	r.BuildMs = time.Since(start).Milliseconds()
	if err != nil {
		r.Build = fmt.Sprintf("go %s: %v: %s", strings.Join(args, " "), err, lastLines(out, 5))
		m.say("%s: building %s failed: %s", r.Name, what, r.Build)
		return r
	}
	r.Build = "ok"
	defer os.Remove(bin) // tens of MB a mutant; the runs stay
	if m.f.compileOnly {
		m.say("%s: %s compiles (%v)", r.Name, what, time.Since(start).Round(time.Second))
		return r
	}
	locks := strings.Join(r.Locks, ",")
	if m.f.seeds > 0 {
		r.Sim = m.verify(ctx, bin, dir, "sim", []string{"sim", "--locks", locks, "--seeds", "1-" + strconv.Itoa(m.f.seeds),
			"--faults", m.f.simFaults, "--workers", strconv.Itoa(m.f.workers)}, mu == nil)
	}
	if m.f.matrixSeeds > 0 && ctx.Err() == nil {
		if m.matrixOff != "" {
			r.Matrix = &verifierResult{Verdict: verdictInconclusive, Note: m.matrixOff}
		} else {
			r.Matrix = m.verify(ctx, bin, dir, "matrix", []string{"run", "--locks", locks, "--faults", m.f.matrixFaults,
				"--seeds", "1-" + strconv.Itoa(m.f.matrixSeeds), "--parallel", strconv.Itoa(m.f.parallel), "--no-report"}, mu == nil)
			if r.Matrix.Exit == exitEnvironment {
				m.matrixOff = "the matrix did not run: " + r.Matrix.Note
			}
		}
	}
	simCell, matrixCell := r.cells(false)
	m.say("%s: built in %v; simulation: %s; matrix: %s", r.Name, (time.Duration(r.BuildMs) * time.Millisecond).Round(time.Second), simCell, matrixCell)
	return r
}

// controlName is the control's name in mutants.json and the run directory.
const controlName = mutant.Reserved

// exec runs name with args in dir, its output (stdout and stderr) into
// log, within ctx: canceled, the command gets SIGINT (a lockproof child
// cleans up its servers and exits 130), and is killed a minute later.
func (m *mutation) exec(ctx context.Context, dir, log, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(m.copyDir, "go.work"))
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) }
	cmd.WaitDelay = time.Minute
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	if werr := os.WriteFile(log, b.Bytes(), 0o644); werr != nil && err == nil {
		err = werr
	}
	return b.String(), err
}

// lastLines is the last n lines of s, on one line.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}

// verify runs one verifier (the simulation or the matrix: which) of the
// binary bin into dir/which, and reads what its run says of the mutant.
func (m *mutation) verify(ctx context.Context, bin, dir, which string, args []string, control bool) *verifierResult {
	runDir := filepath.Join(dir, which)
	rel, _ := filepath.Rel(m.f.out, runDir)
	v := &verifierResult{Dir: filepath.ToSlash(rel), matrix: which == "matrix"}
	vctx, cancel := context.WithTimeout(ctx, m.f.timeout)
	defer cancel()
	start := time.Now()
	out, err := m.exec(vctx, dir, filepath.Join(dir, which+".log"), bin, append(args, "--out", runDir)...)
	v.ElapsedMs = time.Since(start).Milliseconds()
	var ee *exec.ExitError
	switch {
	case err == nil:
		v.Exit = exitOK
	case errors.As(err, &ee):
		v.Exit = ee.ExitCode()
	default:
		v.Exit = -1
	}
	switch {
	case ctx.Err() != nil:
		v.Verdict, v.Note = verdictInconclusive, "interrupted"
		return v
	case vctx.Err() != nil:
		v.Verdict, v.Note = verdictInconclusive, fmt.Sprintf("ran past --timeout %v", m.f.timeout)
		return v
	}
	sum, serr := readMutantSummary(runDir)
	if sum != nil {
		v.notAsPredicted = notAsPredicted(sum)
	}
	switch v.Exit {
	case exitOK:
		v.Verdict = verdictSurvived
	case exitViolation:
		v.judgeKill(sum, serr, runDir, which, m.controlBad, control)
	case exitUnknown:
		v.Verdict, v.Note = verdictInconclusive, firstInconclusive(sum, serr)
	default:
		v.Verdict, v.Note = verdictInconclusive, fmt.Sprintf("exit %d: %s", v.Exit, lastLines(out, 3))
	}
	return v
}

// readMutantSummary reads a verifier's summary.json.
func readMutantSummary(dir string) (*contract.Summary, error) {
	b, err := os.ReadFile(filepath.Join(dir, contract.SummaryFile))
	if err != nil {
		return nil, err
	}
	var s contract.Summary
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, contract.SummaryFile), err)
	}
	return &s, nil
}

// scenarioKey names a row's scenario across runs: its lock, fault and seed.
func scenarioKey(r *contract.Row) string {
	return r.Lock + "/" + r.Fault + "/" + strconv.FormatInt(r.Seed, 10)
}

// notAsPredicted are the scenarios of a run whose rows have a mismatch.
func notAsPredicted(s *contract.Summary) []string {
	var out []string
	for _, r := range s.Scenarios {
		if len(r.Mismatches) > 0 {
			out = append(out, scenarioKey(r))
		}
	}
	return out
}

// judgeKill reads a run that exited 1: the mutant is killed by its first
// row not as predicted (the simulation's by seed; the matrix's as its
// plan ran them, fault by fault in the order of --faults, seed by seed)
// that the control was as predicted on. A run whose only such rows are
// the control's too kills nothing.
func (v *verifierResult) judgeKill(sum *contract.Summary, serr error, runDir, which string, controlBad map[string]bool, control bool) {
	if sum == nil {
		v.Verdict, v.Note = verdictInconclusive, fmt.Sprintf("exit 1, and no summary: %v", serr)
		return
	}
	rows := slices.Clone(sum.Scenarios)
	if which != "matrix" {
		slices.SortStableFunc(rows, func(a, b *contract.Row) int { return cmp.Compare(a.Seed, b.Seed) })
	}
	var shared []string
	for _, r := range rows {
		if len(r.Mismatches) == 0 {
			continue
		}
		if !control && controlBad[scenarioKey(r)] {
			shared = append(shared, scenarioKey(r))
			continue
		}
		d := r.Details()[0]
		v.Verdict, v.Seed, v.Fault, v.Property, v.Mismatch = verdictKilled, r.Seed, cmp.Or(r.FaultName, r.Fault), cmp.Or(d.Property, d.Kind, "row"), d.Text
		if which == "matrix" {
			v.Fault = r.Fault
		}
		return
	}
	if len(shared) > 0 {
		v.Verdict, v.Note = verdictSurvived, "its only findings were the control's too: "+strings.Join(shared, ", ")
		return
	}
	// Exit 1 without a row not as predicted: a predicted break missed
	// (sim.json's missed) or a cell's detection rate a regression.
	for _, c := range sum.Cells {
		if len(c.Regressions) > 0 {
			v.Verdict, v.Fault, v.Note = verdictKilled, c.Fault, "detection regression: "+strings.Join(c.Regressions, "; ")
			v.Property = "detection-rate"
			return
		}
	}
	if b, err := os.ReadFile(filepath.Join(runDir, contract.SimFile)); err == nil {
		var t sim.Totals
		if json.Unmarshal(b, &t) == nil {
			for _, l := range t.Locks {
				if len(l.Missed) > 0 {
					v.Verdict, v.Property, v.Note = verdictKilled, l.Missed[0], "predicted to break, never broke: "+strings.Join(l.Missed, ", ")
					return
				}
			}
		}
	}
	v.Verdict, v.Note = verdictInconclusive, "exit 1, and no row, cell or missed property says why"
}

// firstInconclusive says why a run exited 3: its first row undecided.
func firstInconclusive(sum *contract.Summary, serr error) string {
	if sum == nil {
		return fmt.Sprintf("exit 3, and no summary: %v", serr)
	}
	rows := slices.Clone(sum.Scenarios)
	slices.SortStableFunc(rows, func(a, b *contract.Row) int { return cmp.Compare(a.Seed, b.Seed) })
	for _, r := range rows {
		if r.Conclusive() {
			continue
		}
		why := cmp.Or(r.Error, r.FaultError, "unknown verdicts")
		return fmt.Sprintf("%s seed %d: %s", r.Fault, r.Seed, why)
	}
	return "exit 3: a verdict unknown or a seed that failed"
}

// revisionOf is the git revision of the source tree (with "+dirty" when
// it has changes), or "".
func revisionOf(ctx context.Context, src string) string {
	rev, err := exec.CommandContext(ctx, "git", "-C", src, "rev-parse", "HEAD").Output()
	if err != nil {
		return ""
	}
	out := strings.TrimSpace(string(rev))
	if st, err := exec.CommandContext(ctx, "git", "-C", src, "status", "--porcelain").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
		out += "+dirty"
	}
	return out
}
