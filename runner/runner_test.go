package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockproof/lockproof/chaos"
	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/judge"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/reports"
	"github.com/lockproof/lockproof/tla"
	"github.com/lockproof/lockproof/zoo"
)

// The contract's names are what the lock zoo and chaos accept.
func TestNamesMatchTheZoo(t *testing.T) {
	for _, f := range Faults() {
		if !slices.Contains(chaos.Faults(), f) {
			t.Errorf("contract fault %q is not a chaos fault (%v)", f, chaos.Faults())
		}
	}
}

// The table states what DESIGN.md and the task name, and explains every
// cell that is not plain ok.
func TestExpectedTable(t *testing.T) {
	must := []struct {
		lock, fault, prop string
		want              contract.Want
	}{
		{"setnx", contract.FaultCrashClient, contract.PropLiveness, contract.WantViolated},
		{"setnx-expire", contract.FaultCrashClient, contract.PropLiveness, contract.WantViolated},
		{"set-del", contract.FaultPauseClient, contract.PropLease, contract.WantViolated},
		{"get-del", contract.FaultPauseClient, contract.PropLease, contract.WantViolated},
		{"getset", contract.FaultClockSkew, contract.PropLease, contract.WantViolated},
		{"lua", contract.FaultFailover, contract.PropLease, contract.WantMay},
		{"fenced", contract.FaultFailover, contract.PropLease, contract.WantMay},
		{"fenced", contract.FaultFailover, contract.PropResource, contract.WantOK},
	}
	for _, m := range must {
		if got := judge.Named(zoo.Builtin(), m.lock, m.fault, contract.TopologySentinel).Want(m.prop); got != m.want {
			t.Errorf("Named(%s, %s).%s = %s; want %s", m.lock, m.fault, m.prop, got, m.want)
		}
	}
	for _, l := range []string{"lua", "watchdog", "reentrant", "redlock"} {
		e := judge.Named(zoo.Builtin(), l, contract.FaultPauseClient, contract.TopologySentinel)
		lease := contract.WantOK
		switch l {
		case "watchdog":
			lease = contract.WantMay // its renewal shortens a longer one, and stops with the client
		case "redlock":
			lease = contract.WantMay // seen broken before the pause on a loaded run (docs/FINDINGS.md)
		}
		if e.Want(contract.PropLease) != lease || e.Want(contract.PropResource) != contract.WantViolated {
			t.Errorf("Named(%s, pause-client) = %+v; want lease %s, resource violated", l, e, lease)
		}
	}
	for _, f := range Faults() {
		e := judge.Named(zoo.Builtin(), "fenced", f, contract.TopologySentinel)
		if !contract.Predicted(f) {
			// A fault the guarantees do not discuss yet: no prediction
			// for anyone until a profile or a lock makes one.
			if e.Want(contract.PropLease) != contract.WantAny {
				t.Errorf("fenced under %s (not in the contract): %+v; want no prediction", f, e)
			}
			continue
		}
		if e.Want(contract.PropResource) != contract.WantOK {
			t.Errorf("fenced under %s: resource %s; want ok (G2 holds under every fault)", f, e.Want(contract.PropResource))
		}
		if e.Rejected != (f == contract.FaultPauseClient) {
			t.Errorf("fenced under %s: Rejected = %v", f, e.Rejected)
		}
		for _, l := range zoo.Builtin().Names() {
			e := judge.Named(zoo.Builtin(), l, f, contract.TopologySentinel)
			plain := e.Want(contract.PropLease) == contract.WantOK && e.Want(contract.PropResource) == contract.WantOK && e.Want(contract.PropLiveness) == contract.WantOK && !e.Rejected
			// Every lock keeps every property, or says why not (under
			// none too: the frozen copies of the shipped lock's past, the
			// specimens whose release deletes the key blindly).
			if !plain && e.Why == "" {
				t.Errorf("Named(%s, %s) = %+v has no Why", l, f, e)
			}
		}
	}
	if e := judge.Named(zoo.Builtin(), "nope", contract.FaultNone, contract.TopologySentinel); e.Want(contract.PropLease) != contract.WantAny {
		t.Errorf("unknown lock: %+v; want any", e)
	}
	// The decisive scenario of each lock is one its expectation says breaks
	// (or, for the shipped lock in either configuration, holds).
	for _, d := range judge.DecisiveOf(zoo.Builtin()) {
		w := judge.Named(zoo.Builtin(), d.Lock, d.Fault, contract.TopologySentinel).Want(d.Property)
		shipped := d.Lock == zoo.FencedName || d.Lock == zoo.FencedAcksName
		if shipped != (w == contract.WantOK) || (!shipped && w != contract.WantViolated) {
			t.Errorf("decisive %+v: expectation %s", d, w)
		}
	}
}

func TestWantMatches(t *testing.T) {
	for _, tc := range []struct {
		w    contract.Want
		v    contract.Verdict
		want bool
	}{
		{contract.WantOK, contract.OK, true}, {contract.WantOK, contract.NA, true}, {contract.WantOK, contract.Violated, false},
		{contract.WantViolated, contract.Violated, true}, {contract.WantViolated, contract.OK, false}, {contract.WantViolated, contract.NA, false},
		{contract.WantMay, contract.OK, true}, {contract.WantMay, contract.Violated, true}, {contract.WantAny, contract.Violated, true},
		{contract.WantOK, contract.Unknown, false}, {contract.WantMay, contract.Unknown, false},
	} {
		if got := tc.w.Matches(tc.v); got != tc.want {
			t.Errorf("%s.Matches(%s) = %v; want %v", tc.w, tc.v, got, tc.want)
		}
	}
	if contract.WantMay.Verdict() != "" || contract.WantAny.Verdict() != "" || contract.WantViolated.Verdict() != contract.Violated || contract.WantOK.Verdict() != contract.OK {
		t.Error("Want.Verdict: may and any must give no summary expectation")
	}
}

// ms is n milliseconds on the history clock.
func ms(n int64) int64 { return n * int64(time.Millisecond) }

// fakeHistory is a small history per lock: "set-del" shows two holders
// during a pause of client a (lease violated) and a's stale write, "lua" a stale unfenced write
// (resource violated), "fenced" a rejected stale write, others a clean
// hand-off; a's late writes were checked before the pause, as the
// workload's are (claims violated). A fault window opens at 100ms.
func fakeHistory(lock string) []history.Op {
	ops := []history.Op{{Kind: history.Fault, Name: "pause-client a", Call: ms(100), Return: ms(800), Completed: true}}
	op := func(o history.Op) { o.Completed = o.Return > 0; ops = append(ops, o) }
	switch lock {
	case "set-del":
		op(history.Op{Client: "a", Kind: history.Acquire, Key: "k", Call: ms(0), Return: ms(1), Result: history.OK, TTLMillis: 2000})
		op(history.Op{Client: "b", Kind: history.Acquire, Key: "k", Call: ms(300), Return: ms(301), Result: history.OK, TTLMillis: 2000})
		op(history.Op{Client: "a", Kind: history.Write, Key: "k", Call: ms(900), Return: ms(901), Result: history.OK, Value: "a1", HasValue: true, Checked: true})
	case "lua":
		op(history.Op{Client: "a", Kind: history.Acquire, Key: "k", Call: ms(0), Return: ms(1), Result: history.OK, TTLMillis: 200})
		op(history.Op{Client: "b", Kind: history.Acquire, Key: "k", Call: ms(400), Return: ms(401), Result: history.OK, TTLMillis: 2000})
		op(history.Op{Client: "a", Kind: history.Write, Key: "k", Call: ms(900), Return: ms(901), Result: history.OK, Value: "a1", HasValue: true, Checked: true})
	case "fenced":
		op(history.Op{Client: "a", Kind: history.Acquire, Key: "k", Call: ms(0), Return: ms(1), Result: history.OK, TTLMillis: 200, Token: 3, HasToken: true})
		op(history.Op{Client: "b", Kind: history.Acquire, Key: "k", Call: ms(400), Return: ms(401), Result: history.OK, TTLMillis: 2000, Token: 4, HasToken: true})
		op(history.Op{Client: "b", Kind: history.Write, Key: "k", Call: ms(500), Return: ms(501), Result: history.OK, Value: "b1", HasValue: true, Token: 4, HasToken: true})
		op(history.Op{Client: "a", Kind: history.Write, Key: "k", Call: ms(900), Return: ms(901), Result: history.Rejected, Value: "a1", HasValue: true, Token: 3, HasToken: true, Checked: true})
	default:
		op(history.Op{Client: "a", Kind: history.Acquire, Key: "k", Call: ms(0), Return: ms(1), Result: history.OK, TTLMillis: 2000})
		op(history.Op{Client: "a", Kind: history.Release, Key: "k", Call: ms(10), Return: ms(11), Result: history.OK})
	}
	return ops
}

// fakeRunner writes fakeHistory as the scenario's history, like chaos.Run.
type fakeRunner struct {
	mu   sync.Mutex
	seen []chaos.Scenario
}

func (f *fakeRunner) run(ctx context.Context, e env.Env, sc chaos.Scenario, dir string) (chaos.Outcome, error) {
	f.mu.Lock()
	f.seen = append(f.seen, sc)
	f.mu.Unlock()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return chaos.Outcome{}, err
	}
	p := filepath.Join(dir, "history.jsonl")
	ops := fakeHistory(sc.Lock)
	if err := history.WriteFile(p, ops); err != nil {
		return chaos.Outcome{}, err
	}
	return chaos.Outcome{History: p, Ops: ops, FaultName: ops[0].Name}, nil
}

func fakeOpener(opened *[]env.Spec, mu *sync.Mutex) Opener {
	return func(ctx context.Context, spec env.Spec) (env.Env, error) {
		mu.Lock()
		*opened = append(*opened, spec)
		mu.Unlock()
		return nil, nil
	}
}

// TestRunWritesTheContract runs a matrix with a runner that writes known
// histories and checks the run directory against the summary.json contract,
// through reports.Load (the reader the report command uses) and raw JSON.
func TestRunWritesTheContract(t *testing.T) {
	out := t.TempDir()
	var progress bytes.Buffer
	var opened []env.Spec
	var mu sync.Mutex
	fr := &fakeRunner{}
	sum, err := Run(context.Background(), Config{Registry: zoo.Builtin(),
		Locks: []string{"set-del", "lua", "fenced"}, Faults: []string{contract.FaultPauseClient, contract.FaultFailover},
		Seeds: []uint64{1, 2}, Out: out, Open: fakeOpener(&opened, &mu), Runner: fr.run, Progress: &progress,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Scenarios) != 12 {
		t.Fatalf("%d scenarios; want 12", len(sum.Scenarios))
	}
	// One shared environment, plus one fresh one per failover scenario.
	if len(opened) != 1+6 {
		t.Errorf("opened %d environments; want 7 (1 shared + 6 failover)", len(opened))
	}
	if got := strings.Count(progress.String(), "\n"); got != 12 {
		t.Errorf("%d progress lines; want 12:\n%s", got, progress.String())
	}

	// Raw JSON: exactly the contract's field names and types.
	raw, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Scenarios []map[string]any `json:"scenarios"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	first := doc.Scenarios[0]
	for _, f := range []string{"lock", "fault", "seed", "ops", "lease", "resource", "liveness", "rejected", "expected", "history"} {
		if _, ok := first[f]; !ok {
			t.Errorf("summary.json scenario lacks %q: %v", f, first)
		}
	}
	if first["lock"] != "set-del" || first["fault"] != "pause-client" || first["seed"] != 1.0 ||
		first["history"] != "set-del-pause-client-1/history.jsonl" {
		t.Errorf("first scenario = %v", first)
	}

	run, err := reports.Load(out)
	if err != nil {
		t.Fatalf("reports.Load: %v", err)
	}
	for _, sc := range run.Scenarios {
		if len(sc.Problems) > 0 {
			t.Errorf("%s: problems %v", sc.ID, sc.Problems)
		}
	}
	byID := map[string]*contract.Row{}
	for _, s := range sum.Scenarios {
		byID[s.ID()] = s
	}
	sd := byID["set-del-pause-client-1"]
	if sd.Verdict(contract.PropLease) != contract.Violated || sd.Expected[contract.PropLease] != contract.Violated || !sd.AsExpected {
		t.Errorf("set-del pause-client: %+v", sd)
	}
	if sd.DetectMs[contract.PropLease] != 200 { // b's acquire at 300ms completes the violation; the fault began at 100ms
		t.Errorf("set-del detection = %v; want lease 200ms", sd.DetectMs)
	}
	if _, err := os.Stat(filepath.Join(out, sd.ID(), "porcupine.html")); err != nil {
		t.Errorf("violated scenario without porcupine.html: %v", err)
	}
	fe := byID["fenced-pause-client-2"]
	if fe.Rejected != 1 || fe.Verdict(contract.PropResource) != contract.OK || !fe.AsExpected {
		t.Errorf("fenced pause-client: %+v", fe)
	}
	if _, err := os.Stat(filepath.Join(out, fe.ID(), "porcupine.html")); err == nil {
		t.Error("scenario without violation has a porcupine.html")
	}
	// Under failover, "may" properties give no summary expectation.
	fo := byID["lua-failover-1"]
	if fo.Expected[contract.PropLease] != "" || !slices.Contains(fo.MayViolate, contract.PropLease) || !fo.AsExpected {
		t.Errorf("lua failover: %+v", fo)
	}
	// Every fake history shows what its lock is expected to show under
	// pause-client, and anything goes for "may" under failover: status 0.
	if st := sum.Status(); st != 0 {
		for _, s := range sum.Scenarios {
			t.Logf("%s: %v", s.ID(), s.Mismatches)
		}
		t.Errorf("Status() = %d; want 0", st)
	}
	for _, f := range []string{"report.md", "report.html", "junit.xml", "report.json"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("report file: %v", err)
		}
	}
	// The fault point and the workload's shape reach chaos.
	if len(fr.seen) != 12 {
		t.Errorf("runner saw %d scenarios", len(fr.seen))
	}
	for _, sc := range fr.seen {
		wantAfter, wantClients := "", 3
		if sc.Fault == contract.FaultPauseClient {
			wantClients = 5
			if sc.Lock != "fenced" {
				wantAfter = contract.LeaseCheckPoint
			}
		}
		f, _ := chaos.Lookup(sc.Fault)
		if sc.Point != (contract.Point{After: wantAfter}) || sc.Clients != wantClients || sc.TTL != DefaultTTL ||
			sc.Workload.Hold != f.WorkloadShape().Hold || sc.Workload.OpTimeout != f.WorkloadShape().OpTimeout {
			t.Errorf("%s/%s: Point %+v, Clients %d, TTL %v, workload %+v", sc.Lock, sc.Fault, sc.Point, sc.Clients, sc.TTL, sc.Workload)
		}
	}
}

// A mismatch makes Status 1; a failing runner gives unknown verdicts and 3.
func TestRunStatus(t *testing.T) {
	var opened []env.Spec
	var mu sync.Mutex
	fr := &fakeRunner{}
	// setnx's fake history is clean: under crash-client its liveness is
	// expected to break, so the run does not match.
	sum, err := Run(context.Background(), Config{Registry: zoo.Builtin(), Locks: []string{"setnx"}, Faults: []string{contract.FaultCrashClient},
		Seeds: []uint64{1}, Out: t.TempDir(), Open: fakeOpener(&opened, &mu), Runner: fr.run, NoReport: true})
	if err != nil {
		t.Fatal(err)
	}
	if st := sum.Status(); st != 1 || len(sum.Scenarios[0].Mismatches) != 1 {
		t.Fatalf("Status() = %d, mismatches %v; want 1 and one mismatch", st, sum.Scenarios[0].Mismatches)
	}

	out := t.TempDir()
	boom := func(ctx context.Context, e env.Env, sc chaos.Scenario, dir string) (chaos.Outcome, error) {
		return chaos.Outcome{}, errors.New("boom")
	}
	sum, err = Run(context.Background(), Config{Registry: zoo.Builtin(), Locks: []string{"lua"}, Faults: []string{contract.FaultNone},
		Seeds: []uint64{1}, Out: out, Open: fakeOpener(&opened, &mu), Runner: boom})
	if err != nil {
		t.Fatal(err)
	}
	s := sum.Scenarios[0]
	if st := sum.Status(); st != 3 || s.Verdict(contract.PropLease) != contract.Unknown || !strings.Contains(s.Error, "boom") {
		t.Fatalf("Status() = %d, scenario %+v; want 3, unknown verdicts and the error", st, s)
	}
	// The report of such a run is inconclusive, never a pass.
	run, err := reports.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if rep := reports.Build(run); rep.Status == reports.Pass {
		t.Errorf("report status %s for a run that could not run", rep.Status)
	}

	failOpen := func(ctx context.Context, spec env.Spec) (env.Env, error) { return nil, errors.New("no redis") }
	sum, err = Run(context.Background(), Config{Registry: zoo.Builtin(), Locks: []string{"lua"}, Faults: []string{contract.FaultNone, contract.FaultFailover},
		Seeds: []uint64{1}, Out: t.TempDir(), Open: failOpen, Runner: fr.run})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sum.Scenarios {
		if !s.Unknown() || !strings.Contains(s.Error, "no redis") {
			t.Errorf("%s: %+v; want unknown verdicts naming the environment error", s.ID(), s)
		}
	}
}

// The crash-client fault point of setnx-expire reaches chaos as Point.Before.
func TestFaultPointReachesChaos(t *testing.T) {
	var opened []env.Spec
	var mu sync.Mutex
	fr := &fakeRunner{}
	_, err := Run(context.Background(), Config{Registry: zoo.Builtin(), Locks: []string{"setnx-expire", "get-del"}, Faults: []string{contract.FaultCrashClient, contract.FaultPauseClient},
		Seeds: []uint64{1}, Out: t.TempDir(), Open: fakeOpener(&opened, &mu), Runner: fr.run, NoReport: true, Parallel: 1})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, sc := range fr.seen {
		got[sc.Lock+"/"+sc.Fault] = sc.Point.String()
	}
	want := map[string]string{
		"setnx-expire/crash-client": "before pexpire", "setnx-expire/pause-client": "after " + contract.LeaseCheckPoint,
		"get-del/crash-client": "", "get-del/pause-client": "after get",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: Point %q; want %q", k, got[k], w)
		}
	}
}

func TestRunBadConfig(t *testing.T) {
	var opened []env.Spec
	var mu sync.Mutex
	for _, c := range []Config{
		{Out: t.TempDir(), Open: fakeOpener(&opened, &mu)},                                                     // no scenarios
		{Locks: []string{"lua"}, Faults: []string{"none"}, Seeds: []uint64{1}, Open: fakeOpener(&opened, &mu)}, // no Out
		{Locks: []string{"lua"}, Faults: []string{"none"}, Seeds: []uint64{1}, Out: t.TempDir()},               // no Open
		{Specs: []Spec{{Lock: "lua", Fault: "none"}, {Lock: "lua", Fault: "none"}}, Out: t.TempDir(), Open: fakeOpener(&opened, &mu)},
		{Specs: []Spec{{Lock: "lua", Fault: "none", Point: contract.Point{After: "get"}}}, Out: t.TempDir(), Open: fakeOpener(&opened, &mu)},
		{Specs: []Spec{{Lock: "lua", Fault: "pause-client", Point: contract.Point{Before: "get"}}}, Out: t.TempDir(), Open: fakeOpener(&opened, &mu)},
		{Specs: []Spec{{Lock: "lua", Fault: "no-such-fault"}}, Out: t.TempDir(), Open: fakeOpener(&opened, &mu)},
		// A fault the environment cannot run (chaos.Fault Available).
		{Specs: []Spec{{Lock: "lua", Fault: contract.FaultFailoverSkew}}, Kind: env.Docker, Out: t.TempDir(), Open: fakeOpener(&opened, &mu)},
		{Specs: []Spec{{Lock: "lua", Fault: contract.FaultPauseServer}}, Kind: env.BYO, Out: t.TempDir(), Open: fakeOpener(&opened, &mu)},
	} {
		if _, err := Run(context.Background(), c); !errors.Is(err, ErrBadConfig) {
			t.Errorf("Run(%+v) err = %v; want ErrBadConfig", c, err)
		}
	}
	if len(opened) != 0 {
		t.Errorf("a refused run opened %d environments", len(opened))
	}
}

// TestAvailableFaults leaves out of the default matrix what an environment
// cannot run, with the reason, and nothing else.
func TestAvailableFaults(t *testing.T) {
	all, left := AvailableFaults("", "")
	if !slices.Equal(all, Faults()) || len(left) != 0 {
		t.Errorf("unknown kind: %v, left %v; want every fault", all, left)
	}
	docker, left := AvailableFaults(env.Docker, "")
	if slices.Contains(docker, contract.FaultFailoverSkew) || len(docker) != len(Faults())-1 || len(left) != 1 ||
		!errors.Is(left[0], chaos.ErrNeedsProcesses) {
		t.Errorf("docker: %v, left %v; want all but failover-skew, and why", docker, left)
	}
	byo, left := AvailableFaults(env.BYO, "")
	if slices.Contains(byo, contract.FaultPauseServer) || slices.Contains(byo, contract.FaultPubSubReset) || len(left) != 4 ||
		!errors.Is(left[3], chaos.ErrCannotChangeACL) {
		t.Errorf("byo: %v, left %v; want neither failover, pause-server, failover-skew nor pubsub-reset", byo, left)
	}
	if f, _ := chaos.Lookup(contract.FaultRestart); !errors.Is(f.Available(env.BYO, ""), chaos.ErrNotOurServers) ||
		!strings.Contains(f.Available(env.BYO, "").Error(), "restart") {
		t.Errorf("restart on byo: %v, want ErrNotOurServers saying it does not restart", f.Available(env.BYO, ""))
	}
	// Issue 47 item 4: a default matrix on a user's deployment never
	// fails it over; each fault that would is left out, saying why. (The
	// consensus stores run as lockproof's processes only: Prepare refuses
	// them on a deployment you bring.)
	for _, topo := range []string{contract.TopologySentinel, contract.TopologyCluster} {
		byo, left := AvailableFaults(env.BYO, topo)
		for _, name := range FaultsOn(topo) {
			f, _ := chaos.Lookup(name)
			if f.Available(env.BYO, topo) == nil && f.ChangesDeployment == slices.Contains(byo, name) {
				t.Errorf("byo %s: %s (changes the deployment: %v) in the default matrix: %v", topo, name, f.ChangesDeployment, !f.ChangesDeployment)
			}
		}
		consent := 0
		for _, err := range left {
			if errors.Is(err, ErrNeedsConsent) {
				consent++
			}
		}
		if want := map[string]int{contract.TopologySentinel: 1, contract.TopologyCluster: 2}[topo]; consent != want {
			t.Errorf("byo %s: %d faults left out for consent, want %d (failover, and takeover on a cluster): %v", topo, consent, want, left)
		}
	}
}

func TestRegressionsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	start := int64(835)
	sum := &contract.Summary{Scenarios: []*contract.Row{
		{Lock: "set-del", Fault: "pause-client", Seed: 3,
			Verdicts: verdicts(contract.Violated, contract.OK, contract.NA), History: "set-del-pause-client-3/history.jsonl",
			FaultStartMs: &start, DetectMs: map[string]int64{contract.PropLease: 1510}, FaultName: "pause-client c0-1",
			SpecRecord: contract.SpecRecord{DurationMs: 3000, TTLMs: 500}},
		{Lock: "lua", Fault: "none", Seed: 1,
			Verdicts: verdicts(contract.OK, contract.OK, contract.NA), History: "lua-none-1/history.jsonl", SpecRecord: contract.SpecRecord{DurationMs: 3000, TTLMs: 500}},
	}}
	paths, err := SaveRegressions(dir, t.TempDir(), "set-del-pause", sum)
	if err != nil || len(paths) != 1 || filepath.Base(paths[0]) != "set-del-pause.json" {
		t.Fatalf("SaveRegressions = %v, %v", paths, err)
	}
	r, err := LoadRegression(dir, "set-del-pause")
	if err != nil {
		t.Fatal(err)
	}
	want := Spec{Lock: "set-del", Fault: "pause-client", Seed: 3, Duration: 3 * time.Second, TTL: 500 * time.Millisecond}
	if got := r.Spec(); got.ID() != want.ID() || recordOf(got) != recordOf(want) || r.Property != contract.PropLease || r.DetectMs != 1510 || r.FaultStartMs != 835 {
		t.Errorf("loaded %+v; spec %+v", r, r.Spec())
	}
	all, err := LoadRegressions(dir)
	if err != nil || len(all) != 1 {
		t.Fatalf("LoadRegressions = %v, %v", all, err)
	}
	// Bad files are refused with their name.
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"name":"bad","lock":"lua","fault":"none","duration_ms":1000,"ttl_ms":500,"property":"speed"}`), 0o644)
	if _, err := LoadRegressions(dir); !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "bad.json") {
		t.Errorf("bad property: err = %v", err)
	}
	os.WriteFile(bad, []byte(`{"name":"other","lock":"lua","fault":"none","duration_ms":1000,"ttl_ms":500,"property":"lease"}`), 0o644)
	if _, err := LoadRegression(dir, "bad"); !errors.Is(err, ErrBadConfig) {
		t.Errorf("name mismatch: err = %v", err)
	}
	if err := CheckRegressionName("../x"); !errors.Is(err, ErrBadConfig) {
		t.Errorf("CheckRegressionName(../x) = %v", err)
	}
	// Several violated scenarios get one file each; the property is the one
	// expected to break (set-del under pause-client: lease, also when the
	// resource broke too).
	sum.Scenarios[1].Verdicts[contract.PropResource] = contract.Violated
	sum.Scenarios[0].Verdicts[contract.PropResource] = contract.Violated
	regs, err := regressionsFrom("found", sum)
	if err != nil || len(regs) != 2 || regs[0].Name != "found-set-del-pause-client-3" || regs[0].Property != contract.PropLease ||
		regs[1].Name != "found-lua-none-1" || regs[1].Property != contract.PropResource {
		t.Errorf("regressionsFrom = %+v, %v", regs, err)
	}
}

// Replay reruns the saved scenario and says whether its property broke again.
func TestReplay(t *testing.T) {
	var opened []env.Spec
	var mu sync.Mutex
	fr := &fakeRunner{}
	regs := []Regression{
		{Name: "a", Lock: "set-del", Fault: "pause-client", Seed: 4, SpecRecord: contract.SpecRecord{DurationMs: 2000, TTLMs: 300}, Property: contract.PropLease},
		{Name: "b", Lock: "lua", Fault: "pause-client", Seed: 4, SpecRecord: contract.SpecRecord{DurationMs: 2000, TTLMs: 300}, Property: contract.PropLease},
	}
	res, err := Replay(context.Background(), Config{Registry: zoo.Builtin(), Out: t.TempDir(), Open: fakeOpener(&opened, &mu), Runner: fr.run, NoReport: true}, regs)
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Reproduced || res[1].Reproduced || res[1].Verdict != contract.OK {
		t.Errorf("replay: %+v / %+v", res[0], res[1])
	}
	// The one not reproduced was replayed ReplayAttempts times, the other once.
	runs := map[string]int{}
	for _, sc := range fr.seen {
		runs[sc.Lock]++
	}
	if res[0].Attempts != 1 || res[1].Attempts != ReplayAttempts || runs["set-del"] != 1 || runs["lua"] != ReplayAttempts {
		t.Errorf("attempts %d, %d; runs %v; want 1 and %d", res[0].Attempts, res[1].Attempts, runs, ReplayAttempts)
	}
	for _, sc := range fr.seen {
		if sc.Seed != 4 || sc.Duration != 2*time.Second || sc.TTL != 300*time.Millisecond {
			t.Errorf("replayed scenario %+v; want seed 4, 2s, ttl 300ms", sc)
		}
	}
}

func TestDetectRows(t *testing.T) {
	var opened []env.Spec
	var mu sync.Mutex
	fr := &fakeRunner{}
	rows, _, err := Detect(context.Background(), DetectConfig{
		Config: Config{Registry: zoo.Builtin(), Seeds: []uint64{1, 2, 3}, Out: t.TempDir(), Open: fakeOpener(&opened, &mu), Runner: fr.run, NoReport: true},
		Locks:  []string{"set-del", "setnx"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("rows %+v", rows)
	}
	sx, sd := rows[0], rows[1] // DecisiveScenarios order
	if sd.Lock != "set-del" || sd.Found != 3 || sd.Misses != 0 || sd.Median != 200*time.Millisecond || !sd.MeetsTarget() {
		t.Errorf("set-del row %+v", sd)
	}
	if sx.Lock != "setnx" || sx.Found != 0 || sx.Misses != 3 || sx.MeetsTarget() {
		t.Errorf("setnx row %+v (its fake history breaks nothing)", sx)
	}
	var b strings.Builder
	WriteDetectMarkdown(&b, rows, 10*time.Second)
	if !strings.Contains(b.String(), "| set-del | pause-client (after check) | lease | 3 | 3 | 0.20s | 0.20s | 0 | 0 | yes |") ||
		!strings.Contains(b.String(), "| setnx | crash-client | liveness | 3 | 0 | - | - | 3 | 0 | **no** |") {
		t.Errorf("markdown:\n%s", b.String())
	}
	if (DetectRow{Seeds: 20, Misses: 1}).MeetsTarget() != true || (DetectRow{Seeds: 20, Misses: 2}).MeetsTarget() != false {
		t.Error("MeetsTarget: 19 of 20 is the bar")
	}
}

// TestErrorIsNeverAsExpected: a row whose scenario or fault failed is
// inconclusive however good its verdicts look (the fault may never have
// run: pause-process once "passed" without pausing anything), and a run
// with one exits 3 (1 if a verdict contradicts the expectation).
func TestErrorIsNeverAsExpected(t *testing.T) {
	good := func() *contract.Row {
		row := (&matrix{}).newRow(resolved(Spec{Lock: "fenced", Fault: contract.FaultPauseClient, Seed: 1}))
		row.Verdicts, row.Rejected = verdicts(contract.OK, contract.OK, contract.NA), 3
		return row
	}
	row := good()
	judge.Row(judge.Named(zoo.Builtin(), row.Lock, row.Fault, contract.TopologySentinel), row)
	if !row.AsExpected {
		t.Fatalf("clean row not as expected: %+v", row.Mismatches)
	}
	for _, spoil := range []func(*contract.Row){
		func(r *contract.Row) { r.FaultError = "wait for p0 to hold: context deadline exceeded" },
		func(r *contract.Row) { r.Error = `unknown command "-test.run=^$"` },
	} {
		row := good()
		spoil(row)
		judge.Row(judge.Named(zoo.Builtin(), row.Lock, row.Fault, contract.TopologySentinel), row)
		sum := contract.Summary{Scenarios: []*contract.Row{good(), row}}
		if row.AsExpected || !row.Unknown() || sum.Status() != 3 {
			t.Errorf("row with error %q / fault error %q: as expected %v, unknown %v, status %d; want false, true, 3",
				row.Error, row.FaultError, row.AsExpected, row.Unknown(), sum.Status())
		}
		row.Verdicts[contract.PropResource] = contract.Violated // a contradiction found despite the error still counts
		judge.Row(judge.Named(zoo.Builtin(), row.Lock, row.Fault, contract.TopologySentinel), row)
		if sum.Status() != 1 {
			t.Errorf("violated row with an error: status %d, want 1", sum.Status())
		}
	}
}

// TestCellsJudgeOverSeeds: a must-break property found on one seed of its
// cell makes the seeds that missed it as expected (found_elsewhere), and
// the cell reports its rate and median detection; a cell where no seed
// found it stays not as expected; a must-hold property broken on one seed
// fails its cell.
func TestCellsJudgeOverSeeds(t *testing.T) {
	row := func(seed int64, lease contract.Verdict, det int64) *contract.Row {
		r := (&matrix{}).newRow(resolved(Spec{Lock: "set-del", Fault: contract.FaultPauseClient, Seed: uint64(seed)}))
		r.Verdicts = verdicts(lease, contract.Violated, contract.NA)
		if lease == contract.Violated {
			r.DetectMs = map[string]int64{contract.PropLease: det}
		}
		judge.Row(judge.Named(zoo.Builtin(), r.Lock, r.Fault, contract.TopologySentinel), r)
		return r
	}
	rows := []*contract.Row{row(1, contract.Violated, 1500), row(2, contract.OK, 0), row(3, contract.Violated, 1400)}
	if rows[1].AsExpected {
		t.Fatal("seed 2 missed a must-break property: not as expected on its own")
	}
	// The mismatch in structured form beside its text.
	want := []contract.Mismatch{{Kind: contract.MismatchVerdict, Property: contract.PropLease, Verdict: contract.OK,
		Expected: contract.WantViolated, Text: rows[1].Mismatches[0]}}
	if !slices.Equal(rows[1].MismatchDetails, want) || len(rows[1].Mismatches) != 1 {
		t.Fatalf("seed 2's mismatches %q, details %+v; want one, %+v", rows[1].Mismatches, rows[1].MismatchDetails, want)
	}
	cells := judge.Cells(rows, builtinExps(rows))
	if len(cells) != 1 {
		t.Fatalf("%d cells; want 1", len(cells))
	}
	c := cells[0]
	if !c.AsExpected || c.Seeds != 3 || c.Found[contract.PropLease] != 2 || c.Rate[contract.PropLease] != 2.0/3 || c.DetectMedianMs[contract.PropLease] != 1500 {
		t.Fatalf("cell = %+v; want as expected, lease found 2 of 3, median 1500ms", c)
	}
	if !rows[1].AsExpected || !slices.Equal(rows[1].FoundElsewhere, []string{contract.PropLease}) || len(rows[1].Mismatches) != 0 || len(rows[1].MismatchDetails) != 0 {
		t.Fatalf("seed 2 after judging the cell: %+v", rows[1])
	}

	// A seed whose fault did not bite proves nothing of the fault: its
	// violation is not counted in the rate (which stays within 0..1), yet it
	// still settles the seeds that missed the break.
	failed := row(4, contract.Violated, 900)
	failed.FaultError = "the fault did not bite"
	judge.Row(judge.Named(zoo.Builtin(), failed.Lock, failed.Fault, contract.TopologySentinel), failed)
	missed := row(5, contract.OK, 0)
	c = judge.Cells([]*contract.Row{failed, missed}, builtinExps([]*contract.Row{failed, missed}))[0]
	if c.Seeds != 1 || c.Found[contract.PropLease] != 0 || c.Rate[contract.PropLease] != 0 || c.DetectMedianMs[contract.PropLease] != 0 {
		t.Fatalf("cell with a failed seed = %+v; want 1 seed, lease found on none", c)
	}
	if !slices.Equal(missed.FoundElsewhere, []string{contract.PropLease}) {
		t.Fatalf("the seed that missed it: %+v; want found elsewhere", missed)
	}

	none := []*contract.Row{row(1, contract.OK, 0), row(2, contract.OK, 0)}
	if c := judge.Cells(none, builtinExps(none))[0]; c.AsExpected || none[0].AsExpected || len(none[0].FoundElsewhere) != 0 {
		t.Fatalf("a cell where no seed found the break: %+v, %+v; want not as expected", c, none[0])
	}

	hold := func(seed uint64, lease contract.Verdict) *contract.Row {
		r := (&matrix{}).newRow(resolved(Spec{Lock: "fenced", Fault: contract.FaultNone, Seed: seed}))
		r.Verdicts = verdicts(lease, contract.OK, contract.NA)
		judge.Row(judge.Named(zoo.Builtin(), r.Lock, r.Fault, contract.TopologySentinel), r)
		return r
	}
	rs := []*contract.Row{hold(1, contract.OK), hold(2, contract.Violated)}
	if c := judge.Cells(rs, builtinExps(rs))[0]; c.AsExpected {
		t.Fatalf("a must-hold property broken on one seed: cell %+v; want not as expected", c)
	}
}

// TestRateBelowPromiseIsARegression: a must-break cell whose found count
// is too low to be chance under the promised rate is a regression and
// fails the run; a count that chance explains (one miss in ten, or a lone
// seed that found it) is not; may-break cells promise nothing.
func TestRateBelowPromiseIsARegression(t *testing.T) {
	rows := func(lock, fault string, found, seeds int) []*contract.Row {
		var rs []*contract.Row
		for i := range seeds {
			r := (&matrix{}).newRow(resolved(Spec{Lock: lock, Fault: fault, Seed: uint64(i + 1)}))
			r.Verdicts = verdicts(contract.OK, contract.Violated, contract.NA)
			if i < found {
				r.Verdicts[contract.PropLease] = contract.Violated
			}
			judge.Row(judge.Named(zoo.Builtin(), r.Lock, r.Fault, contract.TopologySentinel), r)
			rs = append(rs, r)
		}
		return rs
	}
	for _, tc := range []struct {
		lock, fault  string
		found, seeds int
		regression   bool
		wantPromised bool
	}{
		{"set-del", contract.FaultPauseClient, 9, 10, false, true},
		{"set-del", contract.FaultPauseClient, 6, 10, false, true}, // P(<=6) = 0.013
		{"set-del", contract.FaultPauseClient, 4, 10, true, true},  // P(<=4) = 1.5e-4
		{"set-del", contract.FaultPauseClient, 1, 1, false, true},
		{"set-del", contract.FaultPauseClient, 10, 20, true, true},
		{"fenced", contract.FaultFailover, 1, 10, false, false}, // lease may: no promise
	} {
		rs := rows(tc.lock, tc.fault, tc.found, tc.seeds)
		c := judge.Cells(rs, builtinExps(rs))[0]
		sum := &contract.Summary{Scenarios: rs, Cells: []*contract.Cell{c}}
		got := len(c.Regressions) > 0
		if got != tc.regression || (c.Promised[contract.PropLease] == judge.PromisedRate) != tc.wantPromised {
			t.Errorf("%s × %s found %d of %d: regressions %v, promised %v; want regression %v",
				tc.lock, tc.fault, tc.found, tc.seeds, c.Regressions, c.Promised, tc.regression)
		}
		if tc.regression && sum.Status() != 1 {
			t.Errorf("%s × %s found %d of %d: status %d; a regression fails the run (1)", tc.lock, tc.fault, tc.found, tc.seeds, sum.Status())
		}
		if !tc.regression && c.AsExpected && sum.Status() != 0 {
			t.Errorf("%s × %s found %d of %d: status %d; want 0", tc.lock, tc.fault, tc.found, tc.seeds, sum.Status())
		}
	}
}

// TestTraceValidation: Config.Trace validates the histories of the locks it
// names; the outcome lands in the row, a rejected trace is a mismatch, and
// so is a model's verdict that disagrees with the checker's (the fenced
// fake history is ok for the checker: a rejection disagrees, unless the
// trace was bounded).
func TestTraceValidation(t *testing.T) {
	for _, tc := range []struct {
		accepted, bounded bool
		line              int
		err               error
		want              string
		asExp, disagrees  bool
	}{
		{accepted: true, want: contract.TraceAccepted, asExp: true},
		{line: 4, want: contract.TraceRejected, disagrees: true},
		{line: 4, bounded: true, want: contract.TraceRejected},
		{err: errors.New("no TLC"), want: contract.TraceError, asExp: true},
	} {
		var opened []env.Spec
		var mu sync.Mutex
		var got []int
		fr := &fakeRunner{}
		sum, err := Run(context.Background(), Config{Registry: zoo.Builtin(),
			Locks: []string{"fenced", "lua"}, Faults: []string{contract.FaultPauseClient}, Seeds: []uint64{1},
			Out: t.TempDir(), Open: fakeOpener(&opened, &mu), Runner: fr.run, NoReport: true,
			Trace: map[string]TraceCheck{"fenced": func(ctx context.Context, ops []history.Op) (tla.Result, error) {
				mu.Lock()
				got = append(got, len(ops))
				mu.Unlock()
				return tla.Result{Accepted: tc.accepted, Line: tc.line, Bounded: tc.bounded}, tc.err
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0] != len(fakeHistory("fenced")) {
			t.Errorf("trace check called with %v ops; want once, with the fenced history", got)
		}
		for _, row := range sum.Scenarios {
			switch row.Lock {
			case "fenced":
				if row.Trace != tc.want || row.TraceLine != tc.line || (tc.err != nil) != (row.TraceError != "") || row.AsExpected != tc.asExp {
					t.Errorf("%+v: row trace %q line %d error %q, as expected %v (mismatches %v)",
						tc, row.Trace, row.TraceLine, row.TraceError, row.AsExpected, row.Mismatches)
				}
				if got := row.TraceDisagrees != "" && slices.Contains(row.Mismatches, row.TraceDisagrees); got != tc.disagrees {
					t.Errorf("%+v: trace_disagrees %q among the mismatches %v: %v; want %v", tc, row.TraceDisagrees, row.Mismatches, got, tc.disagrees)
				}
			case "lua":
				if row.Trace != "" {
					t.Errorf("lua validated: %q", row.Trace)
				}
			}
		}
	}
}

// verdicts are a row's verdicts on lease, resource and liveness.
func verdicts(lease, resource, liveness contract.Verdict) contract.Verdicts {
	return contract.Verdicts{contract.PropLease: lease, contract.PropResource: resource, contract.PropLiveness: liveness}
}

// builtinExps is the prediction for each row's built-in lock (Expected).
func builtinExps(rows []*contract.Row) []locker.Prediction {
	exps := make([]locker.Prediction, len(rows))
	for i, r := range rows {
		exps[i] = judge.Named(zoo.Builtin(), r.Lock, r.Fault, contract.TopologySentinel)
	}
	return exps
}

// resolved is s as planning resolves it against the built-in locks.
func resolved(s Spec) Spec {
	s.entry, _ = zoo.Builtin().Lookup(s.Lock)
	s.fault, _ = chaos.Lookup(s.Fault)
	s.exp = judge.Predict(s.entry, s.Fault)
	return s
}

// TestFaultsOnTopologies: the Sentinel topology's default matrix is what
// it was (the summary.json columns), and the cluster's has the faults of
// both topologies that belong there and the cluster's own; a fault of the
// cluster alone is refused on the Sentinel topology, and the cluster
// topology is refused up front on an environment that builds no cluster.
func TestFaultsOnTopologies(t *testing.T) {
	sentinel, cluster := FaultsOn(contract.TopologySentinel), FaultsOn(contract.TopologyCluster)
	if !slices.Equal(sentinel, Faults()) {
		t.Errorf("FaultsOn(sentinel) = %v; want Faults() %v", sentinel, Faults())
	}
	for _, f := range []string{contract.FaultTakeover, contract.FaultMinorityPartition, contract.FaultMigrate, contract.FaultShardOutage} {
		if slices.Contains(sentinel, f) || !slices.Contains(cluster, f) {
			t.Errorf("%s: in the sentinel matrix %v, in the cluster's %v; want the cluster's alone", f, slices.Contains(sentinel, f), slices.Contains(cluster, f))
		}
		fault, _ := chaos.Lookup(f)
		if err := fault.Available(env.Process, contract.TopologySentinel); !errors.Is(err, chaos.ErrNotOnTopology) {
			t.Errorf("%s on the sentinel topology: %v; want ErrNotOnTopology", f, err)
		}
	}
	for _, f := range []string{contract.FaultFailover, contract.FaultPauseServer, contract.FaultPauseClient, contract.FaultKeyLoss} {
		if !slices.Contains(cluster, f) {
			t.Errorf("%s is not in the cluster's default matrix %v", f, cluster)
		}
	}
	if slices.Contains(cluster, contract.FaultPubSubReset) {
		t.Errorf("pubsub-reset is in the cluster's default matrix: nobody subscribes there but a lock that does")
	}
	// The cluster topology on Docker: the matrix less the fault whose
	// clock shim only processes have.
	cfg := Config{Registry: zoo.Builtin(), Topology: contract.TopologyCluster, Locks: []string{"fenced"}, Seeds: []uint64{1}, Out: t.TempDir()}
	left, err := Prepare(context.Background(), &cfg, env.Options{Kind: env.Docker,
		Docker:      func(context.Context, env.Spec) (env.Env, error) { return nil, nil },
		DockerCheck: func(context.Context) error { return nil }})
	if err != nil || cfg.Kind != env.Docker {
		t.Fatalf("the cluster topology on docker: %v (kind %s)", err, cfg.Kind)
	}
	if slices.Contains(cfg.Faults, contract.FaultFailoverSkew) || !slices.Contains(cfg.Faults, contract.FaultShardOutage) || len(left) != 1 {
		t.Errorf("docker cluster faults %v, left %v; want all but failover-skew", cfg.Faults, left)
	}
	// Bring your own: the deployment's topology must be the one asked
	// for, said up front; a cluster's own links are not proxied, so the
	// faults that cut them are left out.
	// A Toxiproxy that answers (the preflight asks GET /version), so
	// that what is judged is the deployment's topology.
	toxi := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "2.12.0") }))
	defer toxi.Close()
	byo := func(c env.BYOConfig) env.Options {
		c.ToxiproxyURL, c.Fenced = toxi.URL, "127.0.0.1:2"
		return env.Options{Kind: env.BYO, BYO: &c}
	}
	sentinelDeployment := byo(env.BYOConfig{Sentinels: []string{"127.0.0.1:3"}})
	clusterDeployment := byo(env.BYOConfig{Cluster: []string{"127.0.0.1:3"}})
	for _, c := range []struct {
		topology string
		o        env.Options
	}{{contract.TopologyCluster, sentinelDeployment}, {contract.TopologySentinel, clusterDeployment}} {
		cfg = Config{Registry: zoo.Builtin(), Topology: c.topology, Locks: []string{"fenced"}, Seeds: []uint64{1}, Out: t.TempDir()}
		if _, err := Prepare(context.Background(), &cfg, c.o); !errors.Is(err, ErrBadConfig) || !errors.Is(err, env.ErrWrongTopology) || !strings.Contains(err.Error(), "LOCKPROOF_CLUSTER") {
			t.Errorf("the %s topology on a deployment of the other: %v; want ErrBadConfig, ErrWrongTopology naming LOCKPROOF_CLUSTER", c.topology, err)
		}
	}
	cfg = Config{Registry: zoo.Builtin(), Topology: contract.TopologyCluster, Locks: []string{"fenced"}, Seeds: []uint64{1}, Out: t.TempDir()}
	if _, err := Prepare(context.Background(), &cfg, clusterDeployment); err != nil {
		t.Fatalf("the cluster topology on a cluster deployment: %v", err)
	}
	for _, f := range []string{contract.FaultMinorityPartition, contract.FaultShardOutage, contract.FaultMigrate, contract.FaultPauseServer} {
		if slices.Contains(cfg.Faults, f) {
			t.Errorf("%s is in a bring-your-own cluster's matrix %v; it needs the environment's own servers or links", f, cfg.Faults)
		}
	}
	for _, f := range []string{contract.FaultKeyLoss, contract.FaultPauseClient} {
		if !slices.Contains(cfg.Faults, f) {
			t.Errorf("%s is not in a bring-your-own cluster's matrix %v", f, cfg.Faults)
		}
	}
	// A failover or takeover moves the user's master for good: named, with consent.
	for _, f := range []string{contract.FaultFailover, contract.FaultTakeover} {
		if slices.Contains(cfg.Faults, f) {
			t.Errorf("%s is in a bring-your-own cluster's default matrix %v without consent", f, cfg.Faults)
		}
	}
	cfg = Config{Registry: zoo.Builtin(), Topology: contract.TopologyCluster, Locks: []string{"fenced"}, Seeds: []uint64{1}, Out: t.TempDir(),
		Faults: []string{contract.FaultFailover, contract.FaultTakeover}, ChangeDeployment: true}
	if _, err := Prepare(context.Background(), &cfg, clusterDeployment); err != nil {
		t.Errorf("failover and takeover named with consent on a bring-your-own cluster: %v", err)
	}
	// The plan judges a cluster's scenario by the cluster's prediction:
	// under its failover, set-del's liveness may break (PredictOn), where
	// on Sentinel it is to hold.
	for _, c := range []struct {
		topology string
		want     contract.Want
	}{{contract.TopologySentinel, contract.WantOK}, {contract.TopologyCluster, contract.WantMay}} {
		specs, err := Config{Topology: c.topology, Kind: env.Process, Registry: zoo.Builtin(), Locks: []string{"set-del"}, Faults: []string{contract.FaultFailover}, Seeds: []uint64{1}}.specs()
		if err != nil {
			t.Fatal(err)
		}
		if got := specs[0].exp.Want(contract.PropLiveness); got != c.want {
			t.Errorf("set-del × failover on the %s topology: liveness %s; want %s", c.topology, got, c.want)
		}
	}
	cfg = Config{Registry: zoo.Builtin(), Topology: "ring", Locks: []string{"fenced"}, Seeds: []uint64{1}, Out: t.TempDir()}
	if _, err := Prepare(context.Background(), &cfg, env.Options{Kind: env.Process}); !errors.Is(err, ErrBadConfig) {
		t.Errorf("topology ring: %v; want ErrBadConfig", err)
	}
}

// TestStoreTopologies: a consensus store's default matrix is the clients'
// faults and its leader's (failover, minority-partition, pause-server),
// not Redis's own (clock-skew, key-loss, a cluster's takeover); on a
// store you bring, every fault that would strike its servers is left
// out, saying so; its leases default to whole seconds; and each lock
// runs on its own topology only.
func TestStoreTopologies(t *testing.T) {
	want := []string{contract.FaultNone, contract.FaultLatency, contract.FaultPartition, contract.FaultPauseClient,
		contract.FaultPauseServer, contract.FaultFailover, contract.FaultCrashClient, contract.FaultMinorityPartition}
	for _, topo := range contract.StoreTopologies() {
		if got := FaultsOn(topo); !slices.Equal(got, want) {
			t.Errorf("FaultsOn(%s) = %v; want %v", topo, got, want)
		}
		byo, left := AvailableFaults(env.BYO, topo)
		if want := []string{contract.FaultNone, contract.FaultLatency, contract.FaultPartition, contract.FaultPauseClient, contract.FaultCrashClient}; !slices.Equal(byo, want) {
			t.Errorf("byo %s: %v; want the clients' faults %v", topo, byo, want)
		}
		for _, err := range left {
			if !errors.Is(err, chaos.ErrNotOurServers) {
				t.Errorf("byo %s: left out %v; want ErrNotOurServers", topo, err)
			}
		}
		if defaultTTL(topo) != time.Second {
			t.Errorf("%s: default TTL %v; want 1s", topo, defaultTTL(topo))
		}
	}
	redis := locker.Entry{Name: "r"}
	onEtcd := locker.Entry{Name: "e", Needs: locker.Needs{Store: contract.TopologyEtcd}}
	for _, tc := range []struct {
		e    locker.Entry
		topo string
		ok   bool
	}{
		{redis, "", true}, {redis, contract.TopologyCluster, true}, {redis, contract.TopologyEtcd, false},
		{onEtcd, contract.TopologyEtcd, true}, {onEtcd, contract.TopologyZooKeeper, false}, {onEtcd, "", false},
	} {
		if err := RunsOn(tc.e, tc.topo); (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrWrongStore)) {
			t.Errorf("RunsOn(%s, %q) = %v; want ok %v", tc.e.Name, tc.topo, err, tc.ok)
		}
	}
}
