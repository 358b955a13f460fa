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
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/lockproof/lockproof/chaos"
	"github.com/lockproof/lockproof/chaos/docker"
	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/workload"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/lineproto"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/runner"
	"github.com/lockproof/lockproof/stores"
	"github.com/lockproof/lockproof/tla"
	"github.com/lockproof/lockproof/zoo"
)

// runCommand is `lockproof run`: the lock × fault × seed matrix.
func runCommand() command {
	return command{summary: "run the lock × fault matrix into --out DIR (summary.json, histories, report); --detect, --regression", run: runRun}
}

// runFlags are the flags of `lockproof run`.
type runFlags struct {
	locks, faults, seeds string
	duration, ttl        time.Duration
	hold, think          time.Duration
	clients, parallel    int
	provider, byoConfig  string
	out                  string
	checkTimeout         time.Duration
	detect               bool
	detectTarget         time.Duration
	saveRegression       string
	regression           string
	regressions          string
	noReport, verbose    bool
	force, resume        bool
	plan, yes            bool
	keepAll              bool
	mix                  string
	tlaJar               string
	shard                string
	topology             string
	lockCmd, lockName    string
	lockEnv              string
	profile              string
	predict              string
}

// runRun runs the matrix. Exit codes: 0 every verdict as expected, 1 some
// verdict not as expected (or a regression not reproduced, or a specimen
// missed by --detect), 2 bad flags or a run directory in use, 3 some
// verdict unknown or scenario inconclusive, 4 the environment lacks what the
// run needs, 130 interrupted. It reads the flags (parseRun), opens the
// environment and the run directory (prepareRun), then runs one mode: the
// matrix (runMatrix), --detect (runDetect) or --regression
// (runRegressions).
func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	r, code, ok := parseRun(args, stderr)
	if !ok {
		return code
	}
	cfg, code, ok := prepareRun(ctx, r, stdout, stderr)
	if !ok {
		return code
	}
	start := time.Now()
	switch {
	case r.f.detect:
		return runDetect(ctx, cfg, r.f, stdout, stderr, start)
	case r.f.regression != "":
		return runRegressions(ctx, cfg, r.f, stdout, stderr)
	}
	return runMatrix(ctx, cfg, r, stdout, stderr, start)
}

// runSetup is what run's flags say, checked: everything but the
// environment, which prepareRun opens.
type runSetup struct {
	f             runFlags
	registry      *locker.Registry
	locks, faults []string
	allFaults     bool
	seeds         []uint64
	cmdLock       *locker.Entry
	mix           workload.Mix
	kind          env.Kind
	byo           *env.BYOConfig
	shard         *contract.Shard
	// defining are the flags that decide the run's rows (runFlagsFile).
	defining map[string]string
	// cmdCfg is --lock-cmd's lock, checked before anything runs.
	cmdCfg *lineproto.Config
}

// runFlagSet defines run's flags on f.
func runFlagSet(f *runFlags, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.locks, "locks", "all", "comma-separated locks: "+strings.Join(zoo.Builtin().Names(), ",")+" on Redis; "+strings.Join(storeLocks(), ",")+" on their consensus stores (--topology etcd, zookeeper); all: the topology's")
	fs.StringVar(&f.faults, "faults", "all", "comma-separated faults: "+strings.Join(runner.Faults(), ","))
	fs.StringVar(&f.seeds, "seeds", "", `seeds: a list and ranges, e.g. "1-10" or "1,2,5" (default "1"; with --detect "1-20")`)
	fs.DurationVar(&f.duration, "duration", 0, "workload duration per scenario (0: 3s, failover 6s)")
	fs.DurationVar(&f.ttl, "ttl", 0, "lease TTL (0: 500ms)")
	fs.IntVar(&f.clients, "clients", 0, "clients per key (0: 5 under pause-client, else 3)")
	fs.DurationVar(&f.hold, "hold", 0, "bound of a holder's work between its read and its write (0: 50ms under pause-client, else 20ms)")
	fs.DurationVar(&f.think, "think", 0, "bound of a client's wait between two attempts (0: 5ms under pause-client, else 10ms)")
	fs.StringVar(&f.mix, "mix", workload.DefaultMix().String(), "the workload's operation mix: the share of each choice a client makes per critical section (names not given keep their default)")
	fs.IntVar(&f.parallel, "parallel", 3, "scenarios at once on the shared environment (pause-server and failover run alone)")
	fs.StringVar(&f.topology, "topology", contract.TopologySentinel, "the deployment: "+strings.Join(contract.Topologies(), ", ")+" (a master, replicas and Sentinels; a Redis Cluster of 3 shards with a replica each; an etcd cluster of 3 members; a ZooKeeper ensemble of 3 servers, as processes); the default matrix and locks are the topology's")
	fs.StringVar(&f.provider, "provider", "", "environment: process, docker or byo (default: $LOCKPROOF_ENV, else process when redis-server is on PATH, else docker)")
	fs.StringVar(&f.byoConfig, "byo-config", "", "with --provider byo: JSON file of the deployment (env.BYOConfig: ToxiproxyURL, Sentinels, Data or Cluster, Fenced, Redlock)")
	fs.StringVar(&f.out, "out", "", "run directory (default runs/<UTC timestamp>)")
	fs.DurationVar(&f.checkTimeout, "check-timeout", 60*time.Second, "budget of each scenario's check, explanations and page included (out of time: unknown)")
	fs.BoolVar(&f.detect, "detect", false, "measure detection speed: each specimen's decisive scenario over the seeds; writes detect.md")
	fs.DurationVar(&f.detectTarget, "detect-target", 10*time.Second, "with --detect: a violation found later than this after the fault started is a miss")
	fs.StringVar(&f.saveRegression, "save-regression", "", "save the violations found as regression NAME (NAME.json, or NAME-<scenario>.json for several)")
	fs.StringVar(&f.regression, "regression", "", `replay saved regression NAME ("all": every one) and check the same property breaks again`)
	fs.StringVar(&f.regressions, "regressions", "chaos/regressions", "directory of saved regressions")
	fs.BoolVar(&f.noReport, "no-report", false, "do not render report.md/html, junit.xml, report.json")
	fs.BoolVar(&f.keepAll, "keep-all", false, "keep every history as written and every Porcupine page (default: compress the histories of as-expected scenarios but a sample and the first counterexample per cell)")
	fs.StringVar(&f.tlaJar, "tla-jar", os.Getenv(tla.JarEnv), "tla2tools.jar: validate each history of the fenced lock against tla/TraceFencedLock.tla with TLC (needs java; default $TLA2TOOLS_JAR; empty: not validated)")
	fs.StringVar(&f.lockCmd, "lock-cmd", "", `run a lock in any language: the command (quoted as a shell would, "python3 adapter.py --x 1") started once per client, which speaks the line protocol on stdin and stdout (docs/LINEPROTO.md); --locks then adds built-in locks beside it`)
	fs.StringVar(&f.lockEnv, "lock-env", "", "with --lock-cmd: comma-separated names of variables of this environment the lock's process gets beside PATH, HOME, LANG, LC_*, TMPDIR and TZ (e.g. PYTHONPATH,VIRTUAL_ENV; docs/LINEPROTO.md): no other reaches it")
	fs.StringVar(&f.lockName, "lock-name", "", "with --lock-cmd: the lock's name in the matrix (lowercase letters, digits, dashes)")
	fs.StringVar(&f.profile, "profile", "", "with --lock-cmd: what the lock claims, fenced, lease or none (default fenced: a lock is held to the strongest claim until it says otherwise)")
	fs.StringVar(&f.predict, "predict", "", "with --lock-cmd: a JSON file amending the profile's predictions per fault, as a Go lock's Entry.Predict does (docs/LINEPROTO.md, Predictions)")
	fs.BoolVar(&f.verbose, "v", false, "log details to stderr")
	fs.BoolVar(&f.force, "force", false, "clear --out first when it is not empty")
	fs.BoolVar(&f.plan, "plan", false, "print what the run would do (scenarios, and each command a fault sends the deployment's servers, with the nodes it goes to) and exit without running")
	fs.BoolVar(&f.yes, "yes", false, "with --provider byo: allow the faults named in --faults that change the deployment itself (failover, takeover: the master moves and is not switched back)")
	fs.BoolVar(&f.resume, "resume", false, "continue the interrupted run in --out: run only what it did not, with the run's flags (those not given are the run's; one given with another value is refused)")
	fs.StringVar(&f.shard, "shard", "", `run part K of N of the plan ("K/N": the K-th of N contiguous runs of its lock × fault cells), for a nightly fanned out over CI runners; merge the parts with "lockproof report --merge"`)
	fs.Usage = func() {
		commandUsage(stderr, fs, []string{
			"lockproof run [--locks L,..] [--faults F,..] [--seeds 1-10] [--duration D] [--ttl D] [--clients N] [--hold D] [--think D] [--mix NAME=P,..]",
			"              [--topology sentinel|cluster|etcd|zookeeper] [--provider process|docker|byo] [--byo-config FILE] [--yes]",
			"              [--out DIR] [--force | --resume] [--plan] [--parallel N] [--shard K/N] [--check-timeout D] [--tla-jar JAR] [--keep-all] [--no-report] [-v]",
			"lockproof run --lock-cmd CMD --lock-name NAME [--profile fenced|lease|none] [--predict FILE] [--lock-env VAR,..] [the flags above]",
			"lockproof run --detect [--detect-target D] [--seeds 1-20] [--locks L,..]",
			"lockproof run --save-regression NAME [the flags above]",
			"lockproof run --regression NAME|all [--regressions DIR]",
		})
	}
	return fs
}

// parseRun reads and checks run's flags; on bad input it says why on
// stderr and returns the exit code with ok false. Nothing is written or
// deleted here: --out is checked, not cleared.
func parseRun(args []string, stderr io.Writer) (r *runSetup, code int, ok bool) {
	var f runFlags
	fs := runFlagSet(&f, stderr)
	if code, ok := parseFlags(fs, args); !ok {
		return nil, code, false
	}
	r, err := readRun(fs, &f, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "lockproof run: %v\n", err)
		return nil, exitBadInput, false
	}
	return r, exitOK, true
}

// readRun is parseRun's reading of the parsed flags f of fs: each error
// names the flag at fault.
func readRun(fs *flag.FlagSet, f *runFlags, stderr io.Writer) (*runSetup, error) {
	if fs.NArg() != 0 {
		return nil, fmt.Errorf("unexpected arguments %q (flags only)", fs.Args())
	}
	if f.resume && f.out != "" {
		// Before anything reads the flags: those not given take the
		// run's own values.
		recorded, err := resumeFlags(fs, f.out)
		if err != nil {
			return nil, err
		}
		if !recorded {
			fmt.Fprintf(stderr, "lockproof run: --resume: %s has no %s (made by an earlier lockproof): the flags cannot be checked; give the run's own\n", f.out, runFlagsFile)
		}
	}
	if err := checkRunModes(*f); err != nil {
		return nil, err
	}
	r := &runSetup{defining: definingFlags(fs)}
	var err error
	if r.mix, err = workload.ParseMix(f.mix); err != nil {
		return nil, fmt.Errorf("--mix: %w", err)
	}
	if r.registry, err = builtin(); err != nil {
		return nil, err
	}
	if err := r.pickLocks(*f); err != nil {
		return nil, err
	}
	if r.seeds, err = runSeeds(*f); err != nil {
		return nil, err
	}
	if r.kind, r.byo, err = runEnv(*f); err != nil {
		return nil, err
	}
	if f.out == "" {
		f.out = filepath.Join("runs", time.Now().UTC().Format("20060102T150405Z"))
	}
	if f.shard != "" {
		sh, err := contract.ParseShard(f.shard)
		if err != nil {
			return nil, fmt.Errorf("--shard: %w", err)
		}
		r.shard = &sh
	}
	// --out is checked now, cleared (--force) only once every flag, the
	// config and the environment passed, right before the run: a run that
	// stops on bad input must not have deleted anything.
	if err := checkOut(f.out, f.force, f.resume); err != nil {
		return nil, err
	}
	r.f = *f
	return r, nil
}

// checkRunModes checks the flags' bounds and which of them go together:
// one mode at most (--detect, --regression, --save-regression), --force
// or --resume, and what --resume and --shard continue or split.
func checkRunModes(f runFlags) error {
	if f.duration < 0 || f.ttl < 0 || f.clients < 0 || f.hold < 0 || f.think < 0 || f.parallel < 1 || f.checkTimeout <= 0 || f.detectTarget <= 0 {
		return errors.New("--duration, --ttl, --clients, --hold, --think must be >= 0, --parallel >= 1, --check-timeout and --detect-target > 0")
	}
	modes := 0
	for _, b := range []bool{f.detect, f.regression != "", f.saveRegression != ""} {
		if b {
			modes++
		}
	}
	switch {
	case modes > 1:
		return errors.New("--detect, --regression and --save-regression exclude each other")
	case f.force && f.resume:
		return errors.New("--force and --resume exclude each other")
	case f.resume && (f.detect || f.regression != ""):
		return errors.New("--resume continues a matrix run: not with --detect or --regression")
	case f.shard != "" && (f.detect || f.regression != ""):
		return errors.New("--shard splits a matrix run: not with --detect or --regression")
	}
	if f.saveRegression != "" {
		if err := runner.CheckRegressionName(f.saveRegression); err != nil {
			return fmt.Errorf("--save-regression: %w", err)
		}
	}
	if !slices.Contains(contract.Topologies(), f.topology) {
		return fmt.Errorf("--topology %q: want one of %v", f.topology, contract.Topologies())
	}
	return nil
}

// pickLocks reads --locks, --faults and --lock-cmd into r: the locks and
// faults the run names (all: the topology's), the command's lock and its
// config, each checked against the topology.
func (r *runSetup) pickLocks(f runFlags) error {
	var err error
	if r.locks, err = parseNames("--locks", f.locks, r.registry.Names()); err != nil {
		return err
	}
	if r.cmdLock, r.cmdCfg, err = commandLock(f); err != nil {
		return err
	}
	if r.faults, err = parseNames("--faults", f.faults, chaos.Faults()); err != nil {
		return err
	}
	r.allFaults = f.faults == "all" || f.faults == ""
	if f.locks == "all" || f.locks == "" {
		r.locks = runner.LocksOn(r.registry, f.topology)
		if r.cmdLock != nil {
			r.locks = nil // the command's lock alone, unless --locks names others
		}
	}
	if r.cmdLock != nil {
		if err := r.checkCommandLock(f.topology); err != nil {
			return err
		}
		r.locks = append(r.locks, r.cmdLock.Name)
	}
	// A lock of another deployment is refused here, before --plan prints
	// it and before --out is made.
	for _, name := range r.locks {
		if e, ok := r.registry.Lookup(name); ok {
			if err := runner.RunsOn(e, f.topology); err != nil {
				return fmt.Errorf("--locks: %w; choose --topology %s", err, cmp.Or(e.Needs.Store, contract.TopologySentinel))
			}
		}
	}
	return nil
}

// checkCommandLock refuses what a --lock-cmd lock cannot run on: a
// topology other than Sentinel's (its process is handed one Redis
// endpoint), and named faults that run clients as child processes.
func (r *runSetup) checkCommandLock(topology string) error {
	if contract.IsStore(topology) || topology == contract.TopologyCluster {
		return fmt.Errorf("--lock-cmd: a lock's own process is handed one Redis endpoint (docs/LINEPROTO.md, version %d); --topology %s is not supported", lineproto.Version, topology)
	}
	if r.allFaults {
		return nil // the default matrix runs no child-process clients
	}
	for _, fault := range r.faults {
		if fl, ok := chaos.Lookup(fault); ok && fl.Processes > 0 {
			return fmt.Errorf("--faults %s: it runs Go clients as child processes; a --lock-cmd lock is a process already, which pause-client and crash-client freeze and kill", fault)
		}
	}
	return nil
}

// runSeeds reads --seeds (default 1; 1-20 with --detect).
func runSeeds(f runFlags) ([]uint64, error) {
	list := f.seeds
	if list == "" {
		list = "1"
		if f.detect {
			list = "1-20"
		}
	}
	seeds, err := parseSeeds(list)
	if err != nil {
		return nil, fmt.Errorf("--seeds: %w", err)
	}
	return seeds, nil
}

// runEnv reads the environment's kind (--provider, else LOCKPROOF_ENV)
// and, for byo, its --byo-config, which goes with byo alone.
func runEnv(f runFlags) (env.Kind, *env.BYOConfig, error) {
	kind, from := env.Kind(f.provider), "--provider"
	if kind == "" {
		// The library reads no environment variable: LOCKPROOF_ENV is ours.
		kind, from = env.Kind(os.Getenv(env.EnvVar)), env.EnvVar
	}
	switch kind {
	case "", env.Process, env.Docker, env.BYO:
	default:
		return "", nil, fmt.Errorf("%s %q: want process, docker or byo", from, kind)
	}
	if f.byoConfig != "" && kind != env.BYO {
		// Else --plan would print the file's deployment "on the default
		// environment", and the run would ignore it.
		return "", nil, fmt.Errorf("--byo-config describes your own deployment: it goes with --provider byo (the %s environment starts its own servers)", cmp.Or(string(kind), "default"))
	}
	if kind != env.BYO {
		return kind, nil, nil
	}
	if f.byoConfig == "" {
		return "", nil, errors.New("--provider byo needs --byo-config FILE")
	}
	byo, err := readBYO(f.byoConfig, os.Getenv)
	if err != nil {
		return "", nil, fmt.Errorf("--byo-config: %w", err)
	}
	return kind, byo, nil
}

// prepareRun registers --lock-cmd's lock, opens the environment
// (runner.Prepare), prints the plan (--plan: ok false, exit 0), checks
// --tla-jar and clears or makes --out: the config the run's mode runs.
func prepareRun(ctx context.Context, r *runSetup, stdout, stderr io.Writer) (cfg runner.Config, code int, ok bool) {
	f, registry, locks, faults, seeds, cmdLock, mix, kind, byo, shard := r.f, r.registry, r.locks, r.faults, r.seeds, r.cmdLock, r.mix, r.kind, r.byo, r.shard
	bad := func(format string, a ...any) (runner.Config, int, bool) {
		fmt.Fprintf(stderr, "lockproof run: "+format+"\n", a...)
		return runner.Config{}, exitBadInput, false
	}
	if cmdLock != nil {
		if err := registry.Add(*cmdLock); err != nil {
			return bad("--lock-name: %v", err)
		}
		// The process starts once and completes hello before anything
		// runs: a lock that cannot start fails the run here,
		// its stderr said once, not in every scenario.
		if r.cmdCfg != nil && !f.plan {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := lineproto.Check(cctx, *r.cmdCfg)
			cancel()
			if err != nil {
				fmt.Fprintf(stderr, "lockproof run: --lock-cmd: %v\n", err)
				return cfg, exitEnvironment, false
			}
		}
	}
	level := slog.LevelError
	if f.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if r.allFaults {
		faults = nil // the default matrix this environment can run (Prepare)
	}
	cfg = runner.Config{
		Registry: registry,
		Locks:    locks, Faults: faults, Seeds: seeds, Resume: f.resume, Mix: &mix,
		Duration: f.duration, TTL: f.ttl, Clients: f.clients, Hold: f.hold, Think: f.think, Parallel: f.parallel,
		Out: f.out, CheckTimeout: f.checkTimeout, Progress: stderr, NoReport: f.noReport, KeepAll: f.keepAll, Logger: logger, Shard: shard,
		Topology: f.topology, ChangeDeployment: f.yes,
	}
	// The library reads no environment variable: LOCKPROOF_REDIS_IMAGE is ours.
	dockerOpts := docker.Options{Image: os.Getenv(docker.ImageEnvVar), Logger: logger}
	left, err := runner.Prepare(ctx, &cfg, env.Options{Kind: kind, Docker: docker.With(dockerOpts), DockerCheck: docker.Check(dockerOpts), BYO: byo})
	if err != nil {
		if errors.Is(err, runner.ErrBadConfig) {
			return bad("%v", err)
		}
		fmt.Fprintf(stderr, "lockproof run: environment: %v\n", err)
		return cfg, exitEnvironment, false
	}
	// The default matrix's faults this environment cannot run, each said
	// once; a fault named in --faults is refused instead.
	for _, err := range left {
		fmt.Fprintf(stderr, "lockproof run: left out: %v\n", err)
	}
	if f.plan {
		printPlan(stdout, cfg, kind, byo, left)
		return cfg, exitOK, false
	}
	// The first run on a machine builds the Toxiproxy server (half a
	// minute of CPU, once): said before it starts, or the first rows
	// seem to hang.
	if kind != env.BYO && !env.ToxiproxyBuilt() {
		fmt.Fprintf(stderr, "lockproof run: building the Toxiproxy server, once for this machine (about half a minute; %s names a server built elsewhere)\n", env.ToxiServerEnvVar)
		start := time.Now()
		if _, err := env.BuildToxiproxy(ctx); err != nil {
			fmt.Fprintf(stderr, "lockproof run: environment: %v\n", err)
			return cfg, exitEnvironment, false
		}
		fmt.Fprintf(stderr, "lockproof run: Toxiproxy built in %v\n", time.Since(start).Round(time.Second))
	}
	// After the environment's own check: what Redis needs is said first.
	if f.tlaJar != "" {
		v := &tla.Validator{Jar: f.tlaJar}
		if err := v.Available(); err != nil {
			fmt.Fprintf(stderr, "lockproof run: --tla-jar: %v\n", err)
			return cfg, exitEnvironment, false
		}
		cfg.Trace = map[string]runner.TraceCheck{zoo.FencedName: v.Validate}
	}
	// What the run's mode would refuse is refused before --out is made.
	switch {
	case f.regression != "":
		if _, err := loadRegressions(f); err != nil {
			return bad("--regression: %v", err)
		}
	case !f.detect:
		if err := cfg.Validate(); err != nil {
			return bad("%v", err)
		}
	}
	if err := prepareOut(f.out, f.force, f.resume, stderr); err != nil {
		return bad("%v", err)
	}
	if !f.resume {
		if err := writeRunFlags(f.out, r.defining); err != nil {
			return bad("%v", err)
		}
	}
	return cfg, exitOK, true
}

// runMatrix runs the matrix cfg plans, prints its totals and saves its
// violations as a regression (--save-regression).
func runMatrix(ctx context.Context, cfg runner.Config, r *runSetup, stdout, stderr io.Writer, start time.Time) int {
	f := r.f
	fmt.Fprintf(stderr, "lockproof run: %d locks × %d faults × %d seeds into %s\n", len(cfg.Locks), len(cfg.Faults), len(cfg.Seeds), f.out)
	sum, err := runner.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "lockproof run: %v\n", err)
		if errors.Is(err, runner.ErrBadConfig) {
			return exitBadInput
		}
		return exitUnknown
	}
	code := sum.Status()
	printTotals(stdout, sum, f.out, time.Since(start))
	if ctx.Err() != nil {
		notRun := 0
		for _, s := range sum.Scenarios {
			if s.NotRun {
				notRun++
			}
		}
		fmt.Fprintf(stdout, "interrupted after %d of %d scenarios; what finished is in %s (continue with --resume)\n",
			len(sum.Scenarios)-notRun, len(sum.Scenarios), f.out)
		return exitInterrupted
	}
	if f.saveRegression != "" {
		paths, err := runner.SaveRegressions(f.regressions, f.out, f.saveRegression, sum)
		if err != nil {
			fmt.Fprintf(stderr, "lockproof run: %v\n", err)
			return exitBadInput
		}
		if len(paths) == 0 {
			fmt.Fprintln(stderr, "lockproof run: --save-regression: no violation found, nothing saved")
		}
		for _, p := range paths {
			fmt.Fprintf(stdout, "saved regression %s\n", p)
		}
	}
	return code
}

// commandLock is the lock --lock-cmd runs (nil without it), its flags
// checked: a name, a profile, a command that splits.
// storeLocks are the consensus stores' locks' names.
func storeLocks() []string {
	var out []string
	for _, e := range stores.Entries() {
		out = append(out, e.Name)
	}
	return out
}

// builtin is the CLI's registry: lockproof's locks (zoo.Builtin) and
// the consensus stores' (package stores), each run on its own topology.
func builtin() (*locker.Registry, error) {
	reg := zoo.Builtin()
	for _, e := range stores.Entries() {
		if err := reg.Add(e); err != nil {
			return nil, fmt.Errorf("the consensus stores' locks: %w", err)
		}
	}
	return reg, nil
}

func commandLock(f runFlags) (*locker.Entry, *lineproto.Config, error) {
	if f.lockCmd == "" {
		if f.lockName != "" || f.profile != "" || f.lockEnv != "" || f.predict != "" {
			return nil, nil, errors.New("--lock-name, --profile, --predict and --lock-env go with --lock-cmd")
		}
		return nil, nil, nil
	}
	var lockEnv []string
	for n := range strings.SplitSeq(f.lockEnv, ",") {
		switch n = strings.TrimSpace(n); {
		case n == "":
		case strings.ContainsAny(n, "= \t"):
			return nil, nil, fmt.Errorf("--lock-env %q: want names of variables, comma-separated (not NAME=value)", n)
		case strings.HasPrefix(strings.ToUpper(n), "LOCKPROOF_"):
			return nil, nil, fmt.Errorf("--lock-env %s: lockproof's own variables (its passwords among them) are not the lock's: hello gives the process what it needs", n)
		default:
			lockEnv = append(lockEnv, n)
		}
	}
	argv, err := splitCommand(f.lockCmd)
	if err != nil {
		return nil, nil, fmt.Errorf("--lock-cmd: %w", err)
	}
	if _, err := exec.LookPath(argv[0]); err != nil {
		return nil, nil, fmt.Errorf("--lock-cmd: %w", err)
	}
	if f.lockName == "" {
		return nil, nil, errors.New("--lock-cmd needs --lock-name, the lock's name in the matrix")
	}
	if slices.Contains(zoo.Builtin().Names(), f.lockName) {
		return nil, nil, fmt.Errorf("--lock-name %q: a built-in lock has that name", f.lockName)
	}
	prof := locker.Profile(f.profile)
	switch prof {
	case "", locker.ProfileFenced, locker.ProfileLease, locker.ProfileNone:
	default:
		return nil, nil, fmt.Errorf("--profile %q: want fenced, lease or none", f.profile)
	}
	cfg := lineproto.Config{Name: f.lockName, Command: argv, Profile: prof, Env: lockEnv}
	e, err := lineproto.Entry(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("--lock-cmd: %w", err)
	}
	if f.predict != "" {
		if e.Predict, err = readPredictions(f.predict); err != nil {
			return nil, nil, err
		}
	}
	return &e, &cfg, nil
}

// printTotals prints the one-line result of a run: the scenarios as
// predicted, not as predicted (their rows' mismatches, what exits 1) and
// unknown, as summary.json judged them, then how many found a violation
// and whether each was predicted.
func printTotals(w io.Writer, sum *contract.Summary, out string, took time.Duration) {
	n, as, not, unknown, violated, unpredicted := len(sum.Scenarios), 0, 0, 0, 0, 0
	for _, s := range sum.Scenarios {
		switch {
		case len(s.Mismatches) > 0:
			not++
		case s.Unknown():
			unknown++
		case s.AsExpected:
			as++
		}
		for _, p := range contract.PropertyIDs() {
			if s.Verdict(p) == contract.Violated {
				violated++
				if len(s.Mismatches) > 0 {
					unpredicted++
				}
				break
			}
		}
	}
	found := "no violation"
	switch {
	case violated > 0 && unpredicted == 0:
		found = fmt.Sprintf("violations in %d, each predicted", violated)
	case violated > 0:
		found = fmt.Sprintf("violations in %d, %d of them in scenarios not as predicted", violated, unpredicted)
	}
	fmt.Fprintf(w, "%d scenarios in %v: %d as predicted, %d not as predicted, %d with unknown verdicts; %s; run directory %s\n",
		n, took.Round(time.Second), as, not, unknown, found, out)
	// Over several seeds, each cell's detection rate (summary.json "cells").
	for _, c := range sum.Cells {
		if c.Seeds < 2 || len(c.Found) == 0 {
			continue
		}
		var parts []string
		for _, p := range contract.PropertyIDs() {
			n, ok := c.Found[p]
			if !ok {
				continue
			}
			part := fmt.Sprintf("%s %d/%d", p, n, c.Seeds)
			if d, ok := c.DetectMedianMs[p]; ok { // runs with a fault window only
				part += fmt.Sprintf(" (median %.1fs after the fault)", float64(d)/1000)
			}
			parts = append(parts, part)
		}
		// The cell's word is its rows' and its regressions', as the exit
		// code's: a cell of an unknown seed is undecided, not a failure.
		status := "as predicted"
		switch {
		case len(c.Regressions) > 0 || slices.ContainsFunc(sum.Scenarios, func(r *contract.Row) bool {
			return r.Lock == c.Lock && r.Fault == c.Fault && len(r.Mismatches) > 0
		}):
			status = "NOT AS PREDICTED"
		case !c.AsExpected:
			status = "undecided"
		}
		fmt.Fprintf(w, "  %s × %s: violated %s; %s\n", c.Lock, c.Fault, strings.Join(parts, ", "), status)
	}
}

func runDetect(ctx context.Context, cfg runner.Config, f runFlags, stdout, stderr io.Writer, start time.Time) int {
	dc := runner.DetectConfig{Config: cfg, Target: f.detectTarget}
	if f.locks != "all" && f.locks != "" {
		dc.Locks = cfg.Locks
	}
	rows, sum, err := runner.Detect(ctx, dc)
	if err != nil {
		fmt.Fprintf(stderr, "lockproof run --detect: %v\n", err)
		if errors.Is(err, runner.ErrBadConfig) {
			return exitBadInput
		}
		return exitUnknown
	}
	var b strings.Builder
	runner.WriteDetectMarkdown(&b, rows, f.detectTarget)
	fmt.Fprint(stdout, b.String())
	p := filepath.Join(cfg.Out, contract.DetectFile)
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		fmt.Fprintf(stderr, "lockproof run --detect: %v\n", err)
		return exitUnknown
	}
	printTotals(stderr, sum, cfg.Out, time.Since(start))
	for _, r := range rows {
		if !r.MeetsTarget() {
			return exitViolation
		}
	}
	return exitOK
}

// loadRegressions loads the regressions --regression names (all: every
// one in --regressions); none is an error.
func loadRegressions(f runFlags) ([]runner.Regression, error) {
	if f.regression != "all" {
		r, err := runner.LoadRegression(f.regressions, f.regression)
		if err != nil {
			return nil, err
		}
		return []runner.Regression{r}, nil
	}
	regs, err := runner.LoadRegressions(f.regressions)
	if err == nil && len(regs) == 0 {
		err = fmt.Errorf("all: no regressions in %s", f.regressions)
	}
	return regs, err
}

func runRegressions(ctx context.Context, cfg runner.Config, f runFlags, stdout, stderr io.Writer) int {
	regs, err := loadRegressions(f)
	if err != nil {
		fmt.Fprintf(stderr, "lockproof run --regression: %v\n", err)
		return exitBadInput
	}
	results, err := runner.Replay(ctx, cfg, regs)
	if err != nil {
		fmt.Fprintf(stderr, "lockproof run --regression: %v\n", err)
		return exitUnknown
	}
	code := exitOK
	for _, r := range results {
		status := "reproduced"
		switch {
		case r.Unknown:
			status = "UNKNOWN"
			if code == exitOK {
				code = exitUnknown
			}
		case !r.Reproduced:
			status = "NOT REPRODUCED"
			code = exitViolation
		}
		fmt.Fprintf(stdout, "regression %s: %s %s under %s seed %d: %s %s (%d of at most %d replays)\n", r.Regression.Name, r.Regression.Lock,
			r.Regression.Property, r.Regression.Fault, r.Regression.Seed, r.Verdict, status, r.Attempts, runner.ReplayAttempts)
	}
	return code
}

// redisLogger sends go-redis's internal log lines to slog at debug level.
// readBYO reads an env.BYOConfig from a JSON file (unknown fields
// refused; an error names the line), then the login variables of getenv
// over it (env.AuthFromEnviron): a password need not be in the file.
func readBYO(p string, getenv func(string) string) (*env.BYOConfig, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var c env.BYOConfig
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", p, lineAt(b, dec.InputOffset(), err), err)
	}
	if dec.More() {
		off := dec.InputOffset()
		for off < int64(len(b)) && strings.ContainsRune(" \t\r\n", rune(b[off])) {
			off++
		}
		return nil, fmt.Errorf("%s:%d: more after the JSON object", p, lineAt(b, off, nil))
	}
	if c.Auth, err = env.AuthFromEnviron(c.Auth, getenv); err != nil {
		return nil, err
	}
	return &c, nil
}

// lineAt is the line of b at the error err's offset (a syntax or type
// error's own; an unknown field's name, where it first stands as a
// key), else at off: where a decode stopped.
func lineAt(b []byte, off int64, err error) int {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	case err != nil && strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.TrimPrefix(err.Error(), "json: unknown field ")
		if i := bytes.Index(b, []byte(name)); i >= 0 {
			off = int64(i)
		}
	}
	off = min(max(off, 0), int64(len(b)))
	return 1 + bytes.Count(b[:off], []byte("\n"))
}

// runMarker is the file a run directory holds from its start, with the
// run's id (runner.MarkerFile): --force clears a directory only if
// runner.RunDirOf recognises it as one lockproof made.
const runMarker = runner.MarkerFile

// checkOut checks --out before anything runs: new, empty, or (--resume)
// a run to continue, or (--force) a run directory to clear that is none
// of the places whose loss would hurt (checkClearable). It changes
// nothing.
func checkOut(out string, force, resume bool) error {
	fi, err := os.Stat(out)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if resume {
			return fmt.Errorf("--resume: %s does not exist: nothing to continue", out)
		}
		return nil
	case err != nil:
		return fmt.Errorf("--out: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("--out %s is a file, not a directory", out)
	}
	ents, err := os.ReadDir(out)
	if err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	switch {
	case resume:
		if _, err := os.Stat(filepath.Join(out, contract.SummaryFile)); err != nil {
			return fmt.Errorf("--resume: %s holds no %s: nothing to continue", out, contract.SummaryFile)
		}
	case len(ents) == 0:
	case force:
		return checkClearable(out)
	default:
		return fmt.Errorf("--out %s is not empty: pass --force to clear it, or --resume to continue the run it holds", out)
	}
	return nil
}

// checkClearable refuses to let --force clear dir unless it is a run
// directory lockproof made (runner.RunDirOf: its marker, or an old run
// directory's summary.json and files: not any folder that holds a file
// named summary.json, such as a coverage report's), and never the file
// system's root, the home directory, the current directory or one of
// its parents, wherever a link leads (review: --force emptied a folder
// holding .ssh and a source tree).
func checkClearable(dir string) error {
	real, err := filepath.EvalSymlinks(dir)
	if err == nil {
		real, err = filepath.Abs(real)
	}
	if err != nil {
		return fmt.Errorf("--force: %w", err)
	}
	guarded := map[string]string{filepath.VolumeName(real) + string(filepath.Separator): "the file system's root"}
	if home, err := os.UserHomeDir(); err == nil {
		if h, err := filepath.EvalSymlinks(home); err == nil {
			guarded[h] = "your home directory"
		}
	}
	if wd, err := os.Getwd(); err == nil {
		if w, err := filepath.EvalSymlinks(wd); err == nil {
			for p := w; ; p = filepath.Dir(p) {
				if _, ok := guarded[p]; !ok {
					guarded[p] = "the current directory or one of its parents"
				}
				if filepath.Dir(p) == p {
					break
				}
			}
		}
	}
	if what, ok := guarded[real]; ok {
		return fmt.Errorf("--force: %s is %s: lockproof clears only a run directory it made", dir, what)
	}
	if _, err := runner.RunDirOf(real); err != nil {
		return fmt.Errorf("--force: %s: %w: lockproof clears only a run directory it made; choose another --out", dir, err)
	}
	return nil
}

// prepareOut makes --out ready right before the run, after checkOut: a
// --force run directory is cleared (checked again: it may have changed
// since), what is removed said on w first; and a new run's directory is
// made and marked as a run directory first (runner.CreateRunDir, the
// marker holding the run's id).
func prepareOut(out string, force, resume bool, w io.Writer) error {
	if err := checkOut(out, force, resume); err != nil {
		return err
	}
	if resume {
		return nil
	}
	ents, err := os.ReadDir(out)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("--out: %w", err)
	}
	if len(ents) > 0 {
		why, err := runner.RunDirOf(out)
		if err != nil {
			return fmt.Errorf("--force: %s: %w", out, err)
		}
		names := make([]string, len(ents))
		for i, e := range ents {
			names[i] = e.Name()
		}
		fmt.Fprintf(w, "lockproof run --force: clearing %s, %s: removing its %d entries: %s\n", out, why, len(ents), runner.DescribeEntries(names, 20))
	}
	for _, e := range ents {
		// RemoveAll removes a link, never what it points to.
		if err := os.RemoveAll(filepath.Join(out, e.Name())); err != nil {
			return fmt.Errorf("--force: %w", err)
		}
	}
	if _, err := runner.CreateRunDir(out, runner.NewRunID()); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	return nil
}

// printStorePlan prints what every scenario of a run on a consensus
// store (topology etcd or zookeeper) does to its members: every request
// its locks (stores/etcdlock, stores/zklock) send, on what, as whom.
// Keep it to what they send: a user decides on it whether to let a run
// near a store of theirs.
func printStorePlan(w io.Writer, topology string, kind env.Kind, byo *env.BYOConfig) {
	keys := runner.KeysNamed(kind)
	// lockproof's own stores ask a login of their own (env.StoreUser,
	// a password new for each environment).
	as := "as user " + env.StoreUser(topology) + " (a password new for each environment)"
	switch {
	case byo != nil && byo.StoreUsername != "":
		as = "as user " + byo.StoreUsername
	case byo != nil:
		as = "with no login"
	}
	fmt.Fprintf(w, "every scenario: creates Toxiproxy proxies in front of every %s member and of the fenced (and redlock) Redis, and deletes them at its end;\n", topology)
	if topology == contract.TopologyEtcd {
		fmt.Fprintf(w, "  each of its clients opens an etcd client (gRPC) to every member %s (Authenticate, when a login is given), and sends only:\n", as)
		fmt.Fprintln(w, "    LeaseGrant of the lock's TTL, LeaseKeepAlive every TTL/3 while it holds or waits, LeaseRevoke when it releases or gives up;")
		fmt.Fprintf(w, "    Txn (put its key <lock key>/<lease id> under its lease if absent; delete it if it still owns it), Range (the keys under <lock key>: the holder, the key before its own), Watch (that key's deletion, while it waits), DeleteRange (its own key, when a try finds the lock held or a wait is given up): on lock keys named %s only;\n", keys)
		fmt.Fprintln(w, "    nothing else: no member list, status, maintenance or authentication change; its keys go with their leases")
	} else {
		fmt.Fprintf(w, "  each of its clients opens a ZooKeeper session (its timeout the lock's TTL) on a server, logs in %s (digest auth, AddAuth, when a login is given), and sends only:\n", as)
		fmt.Fprintf(w, "    create: the container nodes /lockproof and /lockproof/<lock key> (lock keys named %s, '/' as '_'; the server deletes a container once empty), and its ephemeral sequential node under the latter;\n", keys)
		fmt.Fprintln(w, "    getChildren (the lock node's children; also to find its node after a lost reply), exists (its node's zxid; and every TTL/3 while it holds), getData with a watch (the node before its own, while it waits), delete (its own node), closeSession;")
		fmt.Fprintln(w, "    every node it creates carries an ACL that admits the login's digest identity alone (world:anyone without a login); nothing else is read or changed")
	}
	fmt.Fprintf(w, "  runs its fenced-resource commands on the fenced Redis on keys named %s only", keys)
	if kind == env.BYO {
		fmt.Fprint(w, ", and deletes them at its end (SCAN MATCH, DEL); reads its DBSIZE once, to warn of a database that holds keys")
	}
	fmt.Fprintln(w)
}

// printPlan prints what a run of cfg would do on an environment of kind
// (byo: the deployment given), touching nothing: the scenarios, what every
// scenario sends the servers, and per fault the commands of its own, with
// the nodes they go to: a user sees the blast radius first.
func printPlan(w io.Writer, cfg runner.Config, kind env.Kind, byo *env.BYOConfig, left []error) {
	fmt.Fprintf(w, "lockproof run --plan: %d locks × %d faults × %d seeds = %d scenarios on the %s environment, %s topology\n",
		len(cfg.Locks), len(cfg.Faults), len(cfg.Seeds), len(cfg.Locks)*len(cfg.Faults)*len(cfg.Seeds), cmp.Or(string(kind), "default"), cfg.Topology)
	if byo != nil {
		fmt.Fprintln(w, "deployment:")
		for _, n := range []struct {
			role  string
			addrs []string
		}{{"sentinels", byo.Sentinels}, {"data (master first)", byo.Data}, {"cluster seeds", byo.Cluster},
			{"etcd members", byo.Etcd}, {"zookeeper servers", byo.ZooKeeper},
			{"fenced resources", []string{byo.Fenced}}, {"redlock masters", byo.Redlock}} {
			if len(n.addrs) > 0 && n.addrs[0] != "" {
				fmt.Fprintf(w, "  %s: %s\n", n.role, strings.Join(n.addrs, ", "))
			}
		}
		fmt.Fprintf(w, "  toxiproxy: %s\n", env.RedactURL(byo.ToxiproxyURL))
		if contract.IsStore(cfg.Topology) {
			redis := byo.Auth
			redis.StoreUsername, redis.StorePassword, redis.StoreTLS = "", "", nil
			fmt.Fprintf(w, "  login (fenced and redlock Redis): %s\n", redis.Describe())
			fmt.Fprintf(w, "  login (%s): %s\n", cfg.Topology, byo.Auth.DescribeStore())
		} else {
			fmt.Fprintf(w, "  login: %s\n", byo.Auth.Describe())
		}
	}
	if contract.IsStore(cfg.Topology) {
		printStorePlan(w, cfg.Topology, kind, byo)
	} else {
		fmt.Fprintln(w, "every scenario: reads the topology (PING, INFO, SENTINEL MASTER and REPLICAS or CLUSTER NODES) on each node;")
		fmt.Fprintln(w, "  creates Toxiproxy proxies in front of them and deletes them at its end;")
		fmt.Fprintf(w, "  runs its locks' commands and fenced-resource commands on keys named %s only", runner.KeysNamed(kind))
		if kind == env.BYO {
			fmt.Fprint(w, ", and deletes them at its end")
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "faults:")
	for _, name := range cfg.Faults {
		ft, _ := chaos.Lookup(name)
		var cmds []string
		if ft.Admin != nil {
			cmds = ft.Admin(cfg.Topology)
		}
		consent := ""
		if kind == env.BYO && ft.ChangesDeployment {
			consent = " [changes the deployment: allowed by --yes]"
		}
		if len(cmds) == 0 {
			fmt.Fprintf(w, "  %s: no command to the servers of its own (it acts on lockproof's proxies and clients)%s\n", name, consent)
			continue
		}
		fmt.Fprintf(w, "  %s:%s\n", name, consent)
		for _, c := range cmds {
			fmt.Fprintf(w, "    %s\n", c)
		}
	}
	for _, err := range left {
		fmt.Fprintf(w, "left out: %v\n", err)
	}
}
