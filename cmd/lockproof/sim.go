package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/chaos/workload"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/sim"
	"github.com/lockproof/lockproof/zoo"
)

func simCommand() command {
	return command{summary: "run locks in virtual time on in-process Redis nodes and a simulated network, seed by seed (nothing to install)", run: runSim}
}

// simMaxSeeds bounds --seeds of a simulation: a seed costs about 0.1s of
// one core, not the matrix's 5s.
const simMaxSeeds = 1_000_000

// simHang is how long one seed may run in wall time (it takes about 0.1s).
const simHang = 2 * time.Minute

// simFlags are the flags a worker shares with its parent.
type simFlags struct {
	locks, seeds, faults string
	duration             time.Duration
	// mix and clients shape the workload as lockproof run's flags do
	// ("" and 0: the simulation's defaults).
	mix     string
	clients int
	// lockCmd is refused: the flag exists so that the refusal says why.
	lockCmd string
}

// campaign is what the seeds of the run share (sim.Campaign).
func (f *simFlags) campaign() sim.Campaign {
	return sim.Campaign{Faults: f.faults, Duration: f.duration, Mix: f.mix, Clients: f.clients}
}

// simMaxClients bounds --clients: every client is a goroutine set and a
// connection pool in one bubble.
const simMaxClients = sim.MaxClients

// workloadOf resolves --mix and --clients into the scenario's workload.
func (f *simFlags) workloadOf() (workload.Config, error) {
	var wc workload.Config
	if f.lockCmd != "" {
		return wc, errors.New("--lock-cmd: the simulation runs every lock in virtual time inside this process (testing/synctest), and a lock's own process cannot run there; run it under the real-time matrix with lockproof run --lock-cmd")
	}
	if f.mix != "" {
		m, err := workload.ParseMix(f.mix)
		if err != nil {
			return wc, fmt.Errorf("--mix: %w", err)
		}
		wc.Mix = &m
	}
	if f.clients < 0 || f.clients > simMaxClients {
		return wc, fmt.Errorf("--clients %d: want 0 (the default, 3) to %d", f.clients, simMaxClients)
	}
	wc.Clients = f.clients
	return wc, nil
}

func (f *simFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.locks, "locks", zoo.FencedName, "comma-separated locks to simulate, or all (every lock of the built-in registry)")
	fs.StringVar(&f.seeds, "seeds", "1-100", "seeds, e.g. 1-10000 or 1,5,9")
	fs.StringVar(&f.faults, "faults", "swarm", "swarm (each seed draws its own mix), none, or comma-separated simulated faults ("+strings.Join(sim.Names(), ", ")+")")
	fs.DurationVar(&f.duration, "duration", 3*time.Second, "each run's length in virtual time")
	fs.StringVar(&f.mix, "mix", "", "the workload's operation mix, as lockproof run's --mix (names not given keep their default; default: "+workload.DefaultMix().String()+")")
	fs.IntVar(&f.clients, "clients", 0, "clients on the key (0: 3)")
	fs.StringVar(&f.lockCmd, "lock-cmd", "", "not in the simulation: a lock in its own process runs only under lockproof run --lock-cmd (virtual time cannot reach another process)")
}

// faultsOf resolves --faults once (sim.Mix).
func (f *simFlags) faultsOf() (func(seed uint64) []sim.Fault, error) {
	m, err := sim.Mix(f.faults)
	if err != nil {
		return nil, fmt.Errorf("--faults: %w", err)
	}
	return m, nil
}

// locksOf resolves --locks once.
func (f *simFlags) locksOf(reg *locker.Registry) ([]string, error) {
	var out []string
	if f.locks == "all" {
		return reg.Names(), nil
	}
	for _, n := range strings.Split(f.locks, ",") {
		n = strings.TrimSpace(n)
		if _, ok := reg.Lookup(n); !ok {
			return nil, fmt.Errorf("--locks: %q is not a built-in lock (%v)", n, reg.Names())
		}
		out = append(out, n)
	}
	return out, nil
}

// runSim is `lockproof sim`: it splits the seeds of every lock among
// worker processes (this binary again, each on one processor, so that a
// seed replays byte for byte), prints a line per lock, and writes the run
// directory: sim.json (every seed counted), regressions.jsonl (the seeds
// not as expected or unknown, and each lock's first finding of each
// property), their histories, and summary.json with their rows
// (environment "sim"), which `lockproof report` renders. Exit 0 when
// every seed is as its lock's predictions say and every property predicted
// to break broke on some seed, 1 otherwise, 3 when a verdict is unknown.
func runSim(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f simFlags
	f.register(fs)
	out := fs.String("out", "", "the run directory to write (default: none, print only)")
	workers := fs.Int("workers", runtime.NumCPU(), "worker processes, each on one processor")
	replay := fs.String("replay", "", "replay the seeds of a regressions.jsonl and check that each gives the same history, byte for byte")
	tries := fs.Int("tries", 3, "with --replay: runs of a seed whose history differs before it counts as different")
	shrink := fs.String("shrink", "", "shrink the schedules of a regressions.jsonl: fewer faults, shorter runs, the same finding")
	shrunk := fs.String("shrunk", "", "with --shrink: the file to write the shrunk regressions to (default: the file's name with -shrunk)")
	worker := fs.Bool("worker", false, "internal: run as a worker, jobs on stdin")
	fs.Usage = func() {
		commandUsage(stderr, fs, []string{
			"lockproof sim [--locks L,...] [--seeds 1-1000] [--faults swarm|none|F,...] [--duration D] [--clients N] [--mix NAME=P,..] [--workers N] [--out DIR]",
			"lockproof sim --lock-cmd CMD [the flags above]",
			"lockproof sim --replay DIR/regressions.jsonl [--tries N]",
			"lockproof sim --shrink DIR/regressions.jsonl [--shrunk FILE]",
		}, "worker")
		fmt.Fprintln(stderr, "faults of lockproof run not simulated:")
		un := sim.Unsimulated()
		for _, name := range slices.Sorted(maps.Keys(un)) {
			fmt.Fprintf(stderr, "  %s: %s\n", name, un[name])
		}
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "lockproof sim: unexpected arguments %v\n", fs.Args())
		return exitBadInput
	}
	if *worker {
		return simWorker(f, os.Stdin, stdout, stderr)
	}
	if *workers < 1 {
		fmt.Fprintf(stderr, "lockproof sim: --workers %d: must be at least 1\n", *workers)
		return exitBadInput
	}
	if *replay != "" {
		if *tries < 1 {
			fmt.Fprintf(stderr, "lockproof sim: --tries %d: must be at least 1\n", *tries)
			return exitBadInput
		}
		return simReplay(ctx, *replay, *workers, *tries, stdout, stderr)
	}
	if *shrink != "" {
		out := *shrunk
		if out == "" {
			out = strings.TrimSuffix(*shrink, ".jsonl") + "-shrunk.jsonl"
		}
		return simShrink(ctx, *shrink, out, *workers, stdout, stderr)
	}
	if f.duration <= 0 || f.duration > sim.MaxDuration {
		fmt.Fprintf(stderr, "lockproof sim: --duration %v: want more than 0, at most %v (of virtual time)\n", f.duration, sim.MaxDuration)
		return exitBadInput
	}
	reg := zoo.Builtin()
	locks, err := f.locksOf(reg)
	if err == nil {
		_, err = f.faultsOf()
	}
	if err == nil {
		_, err = f.workloadOf()
	}
	seeds, serr := parseSeedsUpTo(f.seeds, simMaxSeeds)
	if err = errors.Join(err, serr); err != nil {
		fmt.Fprintf(stderr, "lockproof sim: %v\n", err)
		return exitBadInput
	}
	var jobs []sim.Job
	for _, l := range locks {
		for _, s := range seeds {
			jobs = append(jobs, sim.Job{Lock: l, Seed: s})
		}
	}
	start := time.Now()
	results, err := simRun(ctx, f, jobs, *workers, *out != "")
	if err != nil {
		fmt.Fprintf(stderr, "lockproof sim: %v\n", err)
		if ctx.Err() != nil {
			return exitInterrupted
		}
		return exitBadInput
	}
	elapsed := time.Since(start)
	sum := sim.Summarize(f.campaign(), locks, results, elapsed)
	for _, l := range sum.Locks {
		fmt.Fprintln(stdout, l.Line())
	}
	fmt.Fprintf(stdout, "%d runs of %v of virtual time in %v on %d workers: %.0f runs a minute\n",
		len(results), f.duration, elapsed.Round(time.Millisecond), *workers, sum.PerMinute)
	if *out != "" {
		if err := sim.WriteDir(*out, f.campaign(), sum, results); err != nil {
			fmt.Fprintf(stderr, "lockproof sim: %v\n", err)
			return exitBadInput
		}
		fmt.Fprintf(stdout, "run directory %s\n", *out)
	}
	return sum.Status()
}

// simRun hands the jobs to workers and gathers their results in job order
// (worker w gets jobs w, w+workers, ..., and answers them in that order).
// keep: the run directory wants the kept rows' histories.
func simRun(ctx context.Context, f simFlags, jobs []sim.Job, workers int, keep bool) ([]*sim.SeedResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	workers = min(workers, max(len(jobs), 1))
	results := make([]*sim.SeedResult, len(jobs))
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		var mine []sim.Job
		for i := w; i < len(jobs); i += workers {
			mine = append(mine, jobs[i])
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := w
			errs[w] = simWorkerProcess(ctx, exe, f, mine, func(r *sim.SeedResult) error {
				if next >= len(jobs) || r.Row.Lock != jobs[next].Lock || uint64(r.Row.Seed) != jobs[next].Seed {
					return fmt.Errorf("worker %d: a result for %s seed %d out of turn", w, r.Row.Lock, r.Row.Seed)
				}
				if !keep {
					r.History, r.Check = nil, nil
				}
				results[next] = r
				next += workers
				return nil
			})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for i, r := range results {
		if r == nil {
			return nil, fmt.Errorf("%s seed %d: no result from its worker", jobs[i].Lock, jobs[i].Seed)
		}
	}
	return results, nil
}

// simWorkerProcess runs one worker process on jobs, its results to each.
func simWorkerProcess(ctx context.Context, exe string, f simFlags, jobs []sim.Job, each func(*sim.SeedResult) error) error {
	if len(jobs) == 0 {
		return nil
	}
	// The worker reads its jobs (locks and seeds) from stdin: of the
	// flags it takes the faults and the duration.
	cmd := exec.CommandContext(ctx, exe, "sim", "--worker", "--faults", f.faults, "--duration", f.duration.String(),
		"--mix", f.mix, "--clients", strconv.Itoa(f.clients))
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	for _, j := range jobs {
		if err := enc.Encode(j); err != nil {
			return err
		}
	}
	cmd.Stdin = &in
	var errBuf bytes.Buffer
	cmd.Stderr = &errBuf
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	sc := bufio.NewScanner(pipe)
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	var readErr error
	for sc.Scan() {
		var r sim.SeedResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			readErr = fmt.Errorf("worker: %w", err)
			break
		}
		if readErr = each(&r); readErr != nil {
			break
		}
	}
	readErr = errors.Join(readErr, sc.Err())
	_, _ = io.Copy(io.Discard, pipe) // after an error: the worker must not block on a full pipe
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("worker: %w: %s", err, workerStderr(errBuf.String(), 20))
	}
	return readErr
}

// workerStderr is a worker's stderr for an error: its own lines (those
// that start "lockproof sim", which name the lock and seed, as a hang's
// does), then the last n lines. A hang writes every goroutine's stack
// after its line, so the tail alone would lose which seed hung.
func workerStderr(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	start := max(0, len(lines)-n)
	var own []string
	for _, l := range lines[:start] {
		if strings.HasPrefix(l, "lockproof sim") && len(own) < 5 {
			own = append(own, l)
		}
	}
	if len(own) > 0 {
		own = append(own, "...")
	}
	return strings.Join(append(own, lines[start:]...), "\n")
}

// simWorker runs the jobs read from in, one JSON line of sim.SeedResult each
// on out. testing/synctest needs a *testing.T: the worker runs the jobs
// as the one test of testing.Main, then exits with the code.
func simWorker(f simFlags, in io.Reader, out, stderr io.Writer) int {
	faultsOf, err := f.faultsOf()
	if err != nil {
		fmt.Fprintf(stderr, "lockproof sim --worker: %v\n", err)
		return exitBadInput
	}
	wc, err := f.workloadOf()
	if err != nil {
		fmt.Fprintf(stderr, "lockproof sim --worker: %v\n", err)
		return exitBadInput
	}
	var jobs []sim.Job
	dec := json.NewDecoder(in)
	for {
		var j sim.Job
		if err := dec.Decode(&j); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			fmt.Fprintf(stderr, "lockproof sim --worker: jobs: %v\n", err)
			return exitBadInput
		}
		jobs = append(jobs, j)
	}
	// go-redis logs a failed dial through its process-wide logger; a cut
	// in the simulation makes many, and the results say what happened.
	redis.SetLogger(quietLogger{})
	reg := zoo.Builtin()
	code := exitOK
	body := func(t *testing.T) {
		w := bufio.NewWriter(out)
		enc := json.NewEncoder(w)
		for _, j := range jobs {
			// A bubble whose clock stops (a goroutine waiting on a mutex
			// is not durably blocked) would hang the worker for good: say
			// which seed, with the goroutines, and stop.
			hung := time.AfterFunc(simHang, func() {
				fmt.Fprintf(stderr, "lockproof sim: %s seed %d ran %v of wall time without ending: the simulation's clock stopped\n", j.Lock, j.Seed, simHang)
				_ = pprof.Lookup("goroutine").WriteTo(stderr, 2)
				os.Exit(exitUnknown)
			})
			r := sim.RunSeed(t, reg, f.campaign(), wc, faultsOf(j.Seed), j)
			hung.Stop()
			if err := enc.Encode(r); err != nil {
				fmt.Fprintf(stderr, "lockproof sim --worker: %v\n", err)
				code = exitBadInput
				break
			}
		}
		if err := w.Flush(); err != nil {
			code = exitBadInput
		}
		os.Exit(code) // before testing.Main prints PASS on the results' stream
	}
	os.Args = os.Args[:1] // testing.Main parses the process's flags: it has none of its own
	testing.Main(func(string, string) (bool, error) { return true, nil },
		[]testing.InternalTest{{Name: "LockproofSim", F: body}}, nil, nil)
	return code
}

// quietLogger drops go-redis's log lines.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// simReplay reruns the seeds of a regressions file and compares each
// history's digest with the one saved: exit 0 when all replay byte for
// byte (within tries runs each), 1 when one differs, 2 for a bad file.
func simReplay(ctx context.Context, file string, workers, tries int, stdout, stderr io.Writer) int {
	regs, err := sim.ReadRegressions(file)
	if err != nil {
		fmt.Fprintf(stderr, "lockproof sim: %v\n", err)
		return exitBadInput
	}
	code := exitOK
	// One worker per setting: a file may mix faults, durations and
	// workload shapes.
	type setting struct {
		faults  string
		d       time.Duration
		mix     string
		clients int
	}
	groups := map[setting][]sim.Regression{}
	var order []setting
	for _, r := range regs {
		s := setting{r.Faults, time.Duration(r.DurationMs) * time.Millisecond, r.Mix, r.Clients}
		if _, ok := groups[s]; !ok {
			order = append(order, s)
		}
		groups[s] = append(groups[s], r)
	}
	for _, s := range order {
		rs := groups[s]
		var locks []string
		for _, r := range rs {
			if !slices.Contains(locks, r.Lock) {
				locks = append(locks, r.Lock)
			}
		}
		f := simFlags{locks: strings.Join(locks, ","), faults: s.faults, duration: s.d, mix: s.mix, clients: s.clients}
		// A seed of a lock with pub/sub and a watchdog can take another
		// path on a replay (docs/SIMULATION.md: goroutines woken at
		// one virtual instant): such a seed is run again, up to tries in
		// all, and its line says on which try it matched.
		left := rs
		for try := 1; try <= tries && len(left) > 0; try++ {
			var jobs []sim.Job
			for _, r := range left {
				jobs = append(jobs, sim.Job{Lock: r.Lock, Seed: r.Seed})
			}
			results, err := simRun(ctx, f, jobs, workers, false)
			if err != nil {
				fmt.Fprintf(stderr, "lockproof sim: replay: %v\n", err)
				return exitBadInput
			}
			var again []sim.Regression
			for i, r := range results {
				reg := left[i]
				switch {
				case r.SHA256 == reg.SHA256:
					fmt.Fprintf(stdout, "replayed %s seed %d (%s): same history %s (try %d)\n", reg.Lock, reg.Seed, reg.Why, r.SHA256[:12], try)
				case try < tries:
					again = append(again, reg)
				default:
					fmt.Fprintf(stdout, "DIFFERS %s seed %d (%s): history %s, saved %s (%d tries)\n", reg.Lock, reg.Seed, reg.Why, r.SHA256[:12], reg.SHA256[:12], tries)
					code = exitViolation
				}
			}
			left = again
		}
	}
	return code
}
