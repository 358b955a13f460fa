package chaos_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/chaos"
	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/workload"
	"github.com/lockproof/lockproof/checker"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/fencing"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/internal/rediscmd"
	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/internal/toxitest"
	"github.com/lockproof/lockproof/judge"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/tla"
	"github.com/lockproof/lockproof/tla/trace"
	"github.com/lockproof/lockproof/zoo"
)

var (
	flagSeed     = flag.Uint64("chaos.seed", 1, "seed of the first run of each scenario")
	flagDuration = flag.Duration("chaos.duration", 0, "workload duration per run (0: 3s with -short, 6s without)")
	flagOut      = flag.String("chaos.out", "", "directory to keep histories in (default: the test's temp dir)")
	flagSeeds    = flag.Int("chaos.failover-seeds", 0, "seeds to try for a failover violation (0: 3 with -short, 6 without)")
	flagRedisLog = flag.Bool("chaos.redis-log", false, "print go-redis's own log lines (a line per failed dial while a node is down: hundreds in a failover)")
)

// opened tracks every environment the tests open, for the leak check in TestMain.
var opened struct {
	sync.Mutex
	envs []*env.ProcessEnv
}

func TestMain(m *testing.M) {
	workload.MaybeChild(zoo.Builtin()) // a child-process client of pause-process runs here and exits
	flag.Parse()
	toxitest.Build()
	// go-redis logs through its package logger, to stderr by default, as
	// lockproof run does not let it (runner.Prepare routes it).
	level := slog.LevelError
	if *flagRedisLog {
		level = slog.LevelDebug
	}
	redis.SetLogger(rediscmd.SlogLogger{L: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))})
	code := m.Run()
	// After every test, failed ones included: nothing may be left running.
	if err := checkNoLeaks(); err != nil {
		fmt.Fprintln(os.Stderr, "leak check:", err)
		code = 1
	}
	os.Exit(code)
}

// TestLeakCheckSeesRedis proves that the leak check of TestMain sees a
// redis-server child of this binary (stopped again by the test's cleanup).
func TestLeakCheckSeesRedis(t *testing.T) {
	p := redistest.Start(t)
	if err := redisChildren(); err == nil || !strings.Contains(err.Error(), fmt.Sprint(p.Pid())) {
		t.Fatalf("leak check with redis-server pid %d running: %v", p.Pid(), err)
	}
}

// checkNoLeaks fails when a redis-server or redis-sentinel child of this
// test binary is still alive, or an environment's Toxiproxy still holds proxies.
func checkNoLeaks() error {
	deadline := time.Now().Add(10 * time.Second)
	var err error
	for {
		if err = redisChildren(); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	var leaks []string
	if err != nil {
		leaks = append(leaks, err.Error())
	}
	opened.Lock()
	defer opened.Unlock()
	for _, e := range opened.envs {
		if n := e.ProxyCount(); n != 0 {
			leaks = append(leaks, fmt.Sprintf("%d proxies on a closed environment", n))
		}
	}
	if len(leaks) > 0 {
		return fmt.Errorf("left running: %s", strings.Join(leaks, ", "))
	}
	return nil
}

// redisChildren returns an error naming every live redis-server or
// redis-sentinel child of this process, and every child-process client (a
// copy of this binary).
func redisChildren() error {
	var leaks []string
	self := filepath.Base(os.Args[0])
	if len(self) > 15 {
		self = self[:15] // the kernel's comm is at most 15 bytes
	}
	ents, _ := os.ReadDir("/proc")
	me := os.Getpid()
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i, j := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if i < 0 || j < i || j+4 > len(s) {
			continue
		}
		comm := s[i+1 : j]
		f := strings.Fields(s[j+2:])
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid == me && (strings.HasPrefix(comm, "redis-") || comm == self) {
			leaks = append(leaks, fmt.Sprintf("%s pid %d", comm, pid))
		}
	}
	if len(leaks) > 0 {
		return fmt.Errorf("%s", strings.Join(leaks, ", "))
	}
	return nil
}

func duration() time.Duration {
	if *flagDuration > 0 {
		return *flagDuration
	}
	if testing.Short() {
		return 3 * time.Second
	}
	return 6 * time.Second
}

// envOptions are the options of the environment LOCKPROOF_ENV asks for,
// with spec: processes, or a bring-your-own deployment from its variables
// (env.BYOFromEnviron). The Docker environment is a module of its own
// (chaos/docker, which a processes-only user does not import): its tests
// run these scenarios on containers (TestFencedMatrixOnDocker).
func envOptions(t testing.TB, spec env.Spec) env.Options {
	t.Helper()
	byo, err := env.BYOFromEnviron(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	return env.Options{Kind: env.Kind(os.Getenv(env.EnvVar)), Spec: spec, BYO: byo}
}

// openEnv opens the environment LOCKPROOF_ENV asks for (default: processes),
// closed at test end. Where it cannot run (no redis-server) it skips, or
// fails under CI=true.
//
// Every test that opens environments of its own calls t.Parallel: its
// faults act on its own processes and proxies only, and most of a chaos
// test's time is spent waiting on leases and fault windows, so two side
// by side (go test's -parallel, GOMAXPROCS by default) halve the package's
// time (issue 44). Predictions that depend on timing must hold with the
// machine that busy, as they must with the other core busy.
func openEnv(t *testing.T, spec env.Spec) env.Env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	opts := envOptions(t, spec)
	if _, err := env.Choose(ctx, opts); err != nil {
		if redistest.InCI() {
			t.Fatalf("CI=true: %v", err)
		}
		t.Skip(err)
	}
	e, err := env.Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	var baseline int
	if ps, err := e.Proxies().API.Proxies(); err == nil {
		baseline = len(ps)
	}
	if pe, ok := e.(*env.ProcessEnv); ok {
		opened.Lock()
		opened.envs = append(opened.envs, pe)
		opened.Unlock()
	}
	t.Cleanup(func() {
		// Every proxy the scenarios made is gone before the environment closes.
		if ps, err := e.Proxies().API.Proxies(); err != nil {
			t.Errorf("list proxies: %v", err)
		} else if len(ps) != baseline {
			t.Errorf("%d proxies left by the scenarios (had %d at start)", len(ps), baseline)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.Close(ctx); err != nil {
			t.Errorf("close environment: %v", err)
		}
	})
	return e
}

func outDir(t *testing.T, name string) string {
	if *flagOut != "" {
		return filepath.Join(*flagOut, name)
	}
	return filepath.Join(t.TempDir(), name)
}

// runAndCheck runs a scenario, keeps its history, and checks it.
func runAndCheck(t *testing.T, e env.Env, sc chaos.Scenario) (chaos.Outcome, *checker.Result) {
	t.Helper()
	return runAndCheckModel(t, e, sc, true)
}

// runAndCheckModel is runAndCheck, with the history validated against the
// TLA+ model (TLA2TOOLS_JAR set) only when model is true.
func runAndCheckModel(t *testing.T, e env.Env, sc chaos.Scenario, model bool) (chaos.Outcome, *checker.Result) {
	t.Helper()
	dir := outDir(t, fmt.Sprintf("%s-%s-%d", sc.Lock, sc.Fault, sc.Seed))
	ctx, cancel := context.WithTimeout(context.Background(), sc.Duration+60*time.Second)
	defer cancel()
	if sc.Workload.Locks == nil {
		sc.Workload.Locks = zoo.Builtin() // chaos has no registry of its own
	}
	out, err := chaos.Run(ctx, e, sc, dir)
	if err != nil {
		t.Fatalf("run: %v (history %s)", err, out.History)
	}
	if out.FaultErr != nil {
		t.Errorf("fault %s: %v", out.FaultName, out.FaultErr)
	}
	res, err := checker.Check(ctx, out.Ops, checker.Options{Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("check %s: %v", out.History, err)
	}
	if b, err := json.MarshalIndent(res, "", "  "); err == nil {
		_ = os.WriteFile(filepath.Join(dir, "check.json"), b, 0o644)
	}
	if model {
		// Its own context: TLC on a long failover history outlasts the run's.
		agreeWithModel(t, context.Background(), out.Ops, res, out.History)
	}
	return out, res
}

// modelValidator is the TLA+ trace validator on $TLA2TOOLS_JAR, or nil
// when it is not set (TLC is optional, as in tla/run.sh).
func modelValidator(t *testing.T) *tla.Validator {
	t.Helper()
	v, err := tla.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// agreeWithModel is the differential of the two verifiers on a real
// history: with $TLA2TOOLS_JAR set, a fenced history is also validated
// against the TLA+ model, and a verdict that disagrees with the checker's
// (tla.Result.Disagreement) fails the test. An unfenced history is not
// the model's to judge.
func agreeWithModel(t *testing.T, ctx context.Context, ops []history.Op, res *checker.Result, where string) {
	t.Helper()
	v := modelValidator(t)
	if v == nil {
		return
	}
	tr, err := v.Validate(ctx, ops)
	switch {
	case errors.Is(err, trace.ErrNotFenced):
		return
	case err != nil:
		t.Errorf("%s: trace validation: %v", where, err)
	default:
		if err := tr.Disagreement(res.Of(contract.PropLease).Verdict, res.Of(contract.PropResource).Verdict); err != nil {
			t.Errorf("%s: %v", where, err)
		}
	}
}

// checkResource asserts resource safety. The workload reads through
// fencing's ReadFenced: with write-only fencing a read-modify-write loses
// updates when holders overlap (failover) — see
// docs/DESIGN.md (G2: reads are fenced like writes).
//
// want "" is a prediction of "may" (the fault may break it: a fenced lock's
// resource under late-delivery, where a holder's own late write lands
// after its later one under the same fence): ok and violated both do, an
// unknown verdict does not.
func checkResource(t *testing.T, out chaos.Outcome, res *checker.Result, want contract.Verdict) {
	t.Helper()
	if _, ok := any(&fencing.Redis{}).(workload.FencedReader); !ok {
		t.Errorf("fencing.Redis has no ReadFenced: the workload's reads are not fenced")
	}
	got := res.Of(contract.PropResource).Verdict
	if want == "" {
		if got != contract.OK && got != contract.Violated {
			t.Errorf("resource safety %s; want ok or violated\n%s", got, describe(out, res))
		}
		return
	}
	if got != want {
		t.Errorf("resource safety %s; want %s\n%s", got, want, describe(out, res))
	}
}

func describe(out chaos.Outcome, res *checker.Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "history %s: verdict %s, counts %+v", out.History, res.Verdict, res.Counts)
	for _, p := range res.Props {
		fmt.Fprintf(&b, "\n  %s: %s %s", p.Property, p.Verdict, p.Explanation)
		for i, v := range p.Violations {
			if i == 3 {
				break
			}
			fmt.Fprintf(&b, "\n    %s on %q lines %v: %s", v.Rule, v.Key, v.Lines, v.Explanation)
		}
	}
	return b.String()
}

// TestFencedUnderFaults runs the fenced lock under every fault but failover
// on one environment and checks what the guarantees predict.
// checkFootprint: the fenced lock's keys, sampled during the run and
// after it, stay within the bound its entry states (the footprint
// property, which the tests' own checker options leave out).
func checkFootprint(t *testing.T, out chaos.Outcome) {
	t.Helper()
	e, _ := zoo.Builtin().Lookup(zoo.FencedName)
	b := e.Footprint
	res, err := checker.Check(context.Background(), out.Ops, checker.Options{Timeout: 30 * time.Second,
		Footprint: &checker.FootprintBound{Base: int64(b.Base), PerHold: int64(b.PerHold), PerWaiter: int64(b.PerWaiter), PerUnknown: int64(b.PerUnknown), BuriedFor: b.BuriedFor}})
	if err != nil {
		t.Fatal(err)
	}
	samples := 0
	for _, o := range out.Ops {
		if o.Kind == history.Footprint && o.Result == history.OK {
			samples++
		}
	}
	if p := res.Of(contract.PropFootprint); p.Verdict != contract.OK || samples < 2 {
		t.Errorf("footprint %s on %d ok samples; want ok, sampled during the run and after: %s", p.Verdict, samples, p.Explanation)
	}
}

func TestFencedUnderFaults(t *testing.T) {
	t.Parallel()
	e := openEnv(t, env.Spec{DownAfter: 3 * time.Second})
	faults := []string{contract.FaultNone, contract.FaultLatency, contract.FaultPartition, contract.FaultPauseClient,
		contract.FaultPauseServer, contract.FaultCrashClient, contract.FaultClockSkew, contract.FaultLateDelivery}
	for _, fault := range faults {
		t.Run(fault, func(t *testing.T) {
			if f, _ := chaos.Lookup(fault); f.Available(e.Kind(), "") != nil {
				t.Skip(f.Available(e.Kind(), ""))
			}
			sc := chaos.Scenario{Lock: "fenced", Fault: fault, Seed: *flagSeed, Duration: duration()}
			if fault == contract.FaultPauseClient {
				// The paused holder's late write, refused, is the event
				// the test needs: wait for it rather than a fixed time.
				sc.Until = refused
			}
			out, res := runAndCheck(t, e, sc)
			t.Logf("%s", describe(out, res))
			exp := judge.Named(zoo.Builtin(), sc.Lock, fault, contract.TopologySentinel)
			checkResource(t, out, res, exp.Want(contract.PropResource).Verdict())
			switch fault {
			case contract.FaultNone, contract.FaultLatency, contract.FaultPartition, contract.FaultPauseClient:
				if res.Of(contract.PropLease).Verdict != contract.OK {
					t.Errorf("lease exclusivity %s; want ok\n%s", res.Of(contract.PropLease).Verdict, describe(out, res))
				}
			case contract.FaultLateDelivery:
				// Requests landing after their callers gave up take
				// nothing from this lock (it buries them): every promise
				// holds but the resource's (a holder's own late write
				// under its fence may land after its later one: checked
				// above against the prediction), and the fault must have
				// held some.
				for _, p := range res.Props {
					if p.ID != contract.PropResource && p.Verdict != contract.OK && p.Verdict != contract.NA {
						t.Errorf("late-delivery: %s %s; want it to hold\n%s", p.ID, p.Verdict, describe(out, res))
					}
				}
				if out.FaultErr != nil {
					t.Errorf("late-delivery did not bite: %v", out.FaultErr)
				}
			}
			if res.Of(contract.PropLiveness).Verdict == contract.Violated {
				t.Errorf("liveness violated\n%s", describe(out, res))
			}
			checkFootprint(t, out)
			if res.Counts.LeaseOps == 0 || res.Counts.ResourceOps == 0 {
				t.Errorf("the workload did nothing: %+v", res.Counts)
			}
			// The injected fault's window: the stall windows the run
			// observed (a loaded machine's) are windows too, not faults.
			injected := 0
			for _, op := range out.Ops {
				if op.Kind == history.Fault && !contract.Observed(contract.FaultKind(op.Name)) {
					injected++
				}
			}
			if fault != contract.FaultNone && injected != 1 {
				t.Errorf("history has %d injected fault windows (and %d observed); want 1", injected, res.Counts.Faults-injected)
			}
			if fault == contract.FaultPauseClient && res.Counts.Rejected == 0 {
				t.Errorf("pause-client: no write of the paused holder was rejected: the fault did not bite\n%s", describe(out, res))
			}
		})
	}
}

// TestFencedFailoverLosesLease runs the fenced lock under failover on fresh
// environments, seed after seed, until a run shows the lease lost (G1
// violated), and checks that fencing kept the resource safe in every run.
func TestFencedFailoverLosesLease(t *testing.T) {
	t.Parallel()
	seeds := *flagSeeds
	if seeds == 0 {
		seeds = 6
		if testing.Short() {
			seeds = 3
		}
	}
	violated := false
	for i := 0; i < seeds && !violated; i++ {
		seed := *flagSeed + uint64(i)
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			e := openEnv(t, chaos.FreshSpec(locker.Needs{}))
			sc := chaos.Scenario{Lock: "fenced", Fault: contract.FaultFailover, Seed: seed, Duration: duration() + 2*time.Second}
			out, res := runAndCheck(t, e, sc)
			t.Logf("%s", describe(out, res))
			checkResource(t, out, res, contract.OK)
			violated = res.Of(contract.PropLease).Verdict == contract.Violated
		})
	}
	if !violated {
		t.Errorf("no failover run in %d seeds lost a lease; G1 is expected to break under failover", seeds)
	}
}

// TestFencedPauseProcess freezes a client run as a child process with
// SIGSTOP while it holds the lock: its late write is refused and the lease
// stays exclusive.
func TestFencedPauseProcess(t *testing.T) {
	t.Parallel()
	e := openEnv(t, env.Spec{Replicas: -1, Sentinels: 1})
	sc := chaos.Scenario{Lock: "fenced", Fault: contract.FaultPauseProcess, Seed: *flagSeed, Duration: duration(),
		// Deadlines outlast the 1.5s pause: an op in flight when the process
		// froze completes when it thaws, and its next op comes late.
		Workload: workload.Config{Hold: 200 * time.Millisecond, OpTimeout: 3 * time.Second},
		// The frozen child's refused late op is the event the test needs.
		Until: func(ops []history.Op) bool {
			return slices.ContainsFunc(ops, func(o history.Op) bool { return o.Client == "p0" && o.Result == history.Rejected })
		}}
	out, res := runAndCheck(t, e, sc)
	t.Logf("%s", describe(out, res))
	checkResource(t, out, res, contract.OK)
	if res.Of(contract.PropLease).Verdict != contract.OK {
		t.Errorf("lease exclusivity %s; want ok\n%s", res.Of(contract.PropLease).Verdict, describe(out, res))
	}
	var child, rejected int
	for _, op := range out.Ops {
		if op.Client == "p0" {
			child++
			if op.Result == "rejected" {
				rejected++
			}
		}
	}
	if child == 0 {
		t.Fatalf("the child-process client recorded nothing\n%s", describe(out, res))
	}
	if rejected == 0 {
		t.Errorf("no op of the SIGSTOPped child was rejected: the pause did not bite\n%s", describe(out, res))
	}
	// The child froze at its hold, between its lease check and its write
	// (workload.Proc.FreezeAtHold): the write it sent on waking is one
	// after a check that found the lease valid, made while another client
	// held the key. A freeze that landed anywhere else (a SIGSTOP sent
	// when the parent heard "holding", CI of 890981d) shows no such write.
	if !slices.ContainsFunc(res.Of(contract.PropClaims).Violations, func(v checker.Violation) bool {
		return v.Rule == checker.RuleCheckedWrite && strings.Contains(v.Explanation, `write by "p0"`)
	}) {
		t.Errorf("claims: no checked-write of the frozen child: the freeze did not land between its check and its write\n%s", describe(out, res))
	}
}

// TestSeedReplaysChoicesAndRedlock checks that a seed fixes the fault's
// choices (the victim), and that the workload drives redlock over the
// independent masters.
func TestSeedReplaysChoicesAndRedlock(t *testing.T) {
	t.Parallel()
	e := openEnv(t, env.Spec{Replicas: -1, Sentinels: 1, Redlock: 3})
	run := func(lock, fault string, seed uint64, prefix string) (chaos.Outcome, *checker.Result) {
		return runAndCheck(t, e, chaos.Scenario{Lock: lock, Fault: fault, Seed: seed, Duration: time.Second,
			KeyPrefix: prefix, Clients: 4, Until: granted})
	}
	a, _ := run("fenced", contract.FaultClockSkew, 7, "a-")
	b, _ := run("fenced", contract.FaultClockSkew, 7, "b-")
	if a.FaultName == "" || a.FaultName != b.FaultName {
		t.Errorf("seed 7 chose %q, then %q; want the same victim", a.FaultName, b.FaultName)
	}
	out, res := run("redlock", contract.FaultNone, 1, "r-")
	ok := 0
	for _, op := range out.Ops {
		if op.Kind == "acquire" && op.Result == "ok" {
			ok++
		}
	}
	if ok == 0 {
		t.Fatalf("redlock acquired nothing\n%s", describe(out, res))
	}
	if res.Of(contract.PropLease).Verdict != contract.OK {
		t.Errorf("redlock without faults: lease %s\n%s", res.Of(contract.PropLease).Verdict, describe(out, res))
	}
}

// TestClientsLeave: clients that leave for good while holding (they close
// their Locker: package lock's Close stops the watchdogs) free the lock by
// expiry, and the others go on: the liveness rule checks that every left
// lease stopped blocking the key within its TTL.
//
// The run lasts until the liveness rule has a left holder to examine (an
// acquire by another client after that lease surely expired plus the
// slack), not a fixed time: on a loaded machine 3 s often ended first. A
// small leave share keeps most clients in, so that one stays to acquire.
func TestClientsLeave(t *testing.T) {
	t.Parallel()
	e := openEnv(t, env.Spec{Replicas: -1, Sentinels: 1})
	mix := workload.DefaultMix()
	mix.Leave = 0.02
	sc := chaos.Scenario{Lock: "fenced", Fault: contract.FaultNone, Seed: *flagSeed, Duration: duration(), Clients: 5,
		Workload: workload.Config{Mix: &mix}, Until: leftHolderExamined, MaxDuration: time.Minute}
	out, res := runAndCheck(t, e, sc)
	t.Logf("%s", describe(out, res))
	if !out.UntilMet {
		t.Fatalf("within %v no acquire came after a left holder's lease expired plus the slack\n%s", sc.MaxDuration, describe(out, res))
	}
	last := map[string]history.Op{}
	for _, o := range out.Ops {
		if lastLockOp(o) && (last[o.Client].Call < o.Call || last[o.Client].Client == "") {
			last[o.Client] = o
		}
	}
	left := 0
	for _, o := range last {
		if o.Kind == history.Acquire && o.Result == history.OK {
			left++
		}
	}
	if left == 0 {
		t.Fatalf("no client left while holding (last ops %v)", last)
	}
	if res.Of(contract.PropLease).Verdict != contract.OK || res.Of(contract.PropLiveness).Verdict != contract.OK {
		t.Errorf("lease %s, liveness %s; want ok (the liveness rule checked the left holders)\n%s", res.Of(contract.PropLease).Verdict, res.Of(contract.PropLiveness).Verdict, describe(out, res))
	}
	// Each left client closed its lock and tried once more on it: the
	// lock refused, as its entry promises, and every call came back in
	// time.
	entry, _ := zoo.Builtin().Lookup(zoo.FencedName)
	calls, err := checker.Check(t.Context(), out.Ops, checker.Options{CallSlack: entry.Calls.Slack, CloseRefuses: entry.Calls.CloseRefuses})
	if err != nil {
		t.Fatal(err)
	}
	if pr := calls.Of(contract.PropCalls); pr.Verdict != contract.OK {
		t.Errorf("calls %s, want ok (a closed lock refuses): %s", pr.Verdict, pr.Explanation)
	}
}

// lastLockOp reports whether o counts as a client's last lease op for the
// liveness rule (docs/DESIGN.md): a lock op, but for a failed acquire
// (surely without effect: a left client's try on its closed lock).
func lastLockOp(o history.Op) bool {
	switch o.Kind {
	case history.Acquire:
		return o.Result != history.Fail
	case history.Release, history.Renew:
		return true
	}
	return false
}

// refused reports whether ops have a resource op refused for a stale token.
func refused(ops []history.Op) bool {
	return slices.ContainsFunc(ops, func(o history.Op) bool { return o.Result == history.Rejected })
}

// granted reports whether ops have an ok acquire.
func granted(ops []history.Op) bool {
	return slices.ContainsFunc(ops, func(o history.Op) bool { return o.Kind == history.Acquire && o.Result == history.OK })
}

// leftHolderExamined reports whether ops give the liveness rule a left
// holder to examine (docs/DESIGN.md, liveness): a client whose last op is
// an ok acquire with a TTL, and another client's ok or failed acquire
// called after that lease surely expired plus the checker's default slack.
func leftHolderExamined(ops []history.Op) bool {
	last := map[string]history.Op{}
	for _, o := range ops {
		if !lastLockOp(o) {
			continue
		}
		if l, ok := last[o.Client]; !ok || l.Call < o.Call {
			last[o.Client] = o
		}
	}
	for c, l := range last {
		if l.Kind != history.Acquire || l.Result != history.OK || l.TTLMillis <= 0 || !l.Completed {
			continue
		}
		ttl := time.Duration(l.TTLMillis) * time.Millisecond
		e := l.Return + int64(math.Ceil(float64(ttl)*(1+checker.DefaultDrift))) + int64(checker.DefaultLivenessSlack)
		for _, o := range ops {
			if o.Client != c && o.Kind == history.Acquire && (o.Result == history.OK || o.Result == history.Fail) && o.Call > e {
				return true
			}
		}
	}
	return false
}

// TestFencedKillProcess: a client run as a child process is SIGKILLed while
// it waits in line (its acquire never returns, and the history says so);
// the live clients are not held up past the lock's promise to waiters.
func TestFencedKillProcess(t *testing.T) {
	t.Parallel()
	e := openEnv(t, env.Spec{Replicas: -1, Sentinels: 1})
	sc := chaos.Scenario{Lock: "fenced", Fault: contract.FaultKillProcess, Seed: *flagSeed, Duration: duration()}
	entry, _ := zoo.Builtin().Lookup("fenced")
	sc.Workload.WaitTimeout = 2 * entry.WaitBound
	out, _ := runAndCheck(t, e, sc)
	res, err := checker.Check(context.Background(), out.Ops, checker.Options{WaitBound: entry.WaitBound})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", describe(out, res))
	dead := 0
	for _, op := range out.Ops {
		if op.Client == "p0" && op.Kind == history.Acquire && op.Wait && !op.Completed {
			dead++
		}
	}
	if dead != 1 {
		t.Fatalf("%d never-returned blocking acquires of the killed child p0; want 1\n%s", dead, describe(out, res))
	}
	if res.Of(contract.PropLease).Verdict != contract.OK || res.Of(contract.PropLiveness).Verdict == contract.Violated || res.Of(contract.PropResource).Verdict != contract.OK {
		t.Errorf("verdicts lease %s, resource %s, liveness %s; want ok\n%s", res.Of(contract.PropLease).Verdict, res.Of(contract.PropResource).Verdict, res.Of(contract.PropLiveness).Verdict, describe(out, res))
	}
}

// TestFencedFailoverSkew fails the fenced lock's master over to a replica
// whose clock runs chaos.SkewBehind behind (clock skew between Redis
// nodes): the promoted node's clock-based fences fall below the old
// master's, and fencing refuses the new holders until its clock catches up.
// Data stays safe (G2); the fault's evidence shows the skew read off the
// promoted node and the fences that went back.
func TestFencedFailoverSkew(t *testing.T) {
	t.Parallel()
	f, _ := chaos.Lookup(contract.FaultFailoverSkew)
	kind, err := env.Choose(context.Background(), envOptions(t, env.Spec{}))
	if err == nil {
		err = f.Available(kind, "")
	}
	if err != nil {
		if redistest.InCI() && kind == env.Process {
			t.Fatalf("CI=true: %v", err)
		}
		t.Skip(err)
	}
	e := openEnv(t, f.FreshSpec(locker.Needs{}))
	sc := chaos.Scenario{Lock: "fenced", Fault: contract.FaultFailoverSkew, Seed: *flagSeed, Duration: f.DefaultDuration()}
	out, res := runAndCheck(t, e, sc)
	t.Logf("%s\nevidence: %s", describe(out, res), out.FaultEvidence)
	checkResource(t, out, res, contract.OK)
	if !strings.Contains(out.FaultEvidence, "clock read") || !strings.Contains(out.FaultEvidence, "grants got a fence below an earlier grant's") {
		t.Errorf("evidence %q: want the promoted node's clock read behind and fences that went back", out.FaultEvidence)
	}
	if res.Counts.Rejected == 0 {
		t.Errorf("no fenced op refused: the new holders' fences were never below the old master's\n%s", describe(out, res))
	}
}
