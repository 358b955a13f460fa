package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/sim"
)

// runBin runs the built binary and returns its exit code and output.
func runBin(t *testing.T, bin string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errOut.String()
}

// TestSimBinary: `lockproof sim` runs seeds of two locks in worker
// processes, finds what the unfenced one breaks and nothing the shipped
// one is promised to keep, writes a run directory that `lockproof report`
// reads (rows of environment "sim"), and `--replay` replays every saved
// seed byte for byte; a saved digest that does not match is a difference
// (exit 1), and bad input names its flag or its file and line (exit 2).
func TestSimBinary(t *testing.T) {
	bin := buildBinary(t)
	dir := filepath.Join(t.TempDir(), "run")
	code, out, errOut := runBin(t, bin, "sim", "--locks", "fenced,setnx", "--seeds", "1-12", "--workers", "2", "--out", dir)
	if code != exitOK {
		t.Fatalf("sim: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"fenced       12 seeds: 12 as expected", "setnx        12 seeds: 12 as expected", "24 runs of 3s of virtual time"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	var sum sim.Totals
	b, err := os.ReadFile(filepath.Join(dir, contract.SimFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	if len(sum.Locks) != 2 || sum.Locks[1].Violated[contract.PropLiveness]+sum.Locks[1].Violated[contract.PropLease] == 0 {
		t.Errorf("sim.json: setnx broke nothing in 12 swarm seeds: %+v", sum.Locks)
	}
	var s contract.Summary
	b, err = os.ReadFile(filepath.Join(dir, contract.SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Scenarios) == 0 {
		t.Fatal("summary.json keeps no row")
	}
	for _, r := range s.Scenarios {
		if r.Environment != contract.EnvSim {
			t.Errorf("row %s seed %d: environment %q, want %q", r.Lock, r.Seed, r.Environment, contract.EnvSim)
		}
	}
	if code, out, errOut := runBin(t, bin, "report", dir); code != exitOK {
		t.Errorf("report of the sim's run directory: exit %d\n%s\n%s", code, out, errOut)
	}

	// Replay: locks without pub/sub or a watchdog replay every seed (the
	// fenced ones most, README).
	dir = filepath.Join(t.TempDir(), "replay")
	if code, out, errOut := runBin(t, bin, "sim", "--locks", "lua,setnx", "--seeds", "1-6", "--out", dir); code != exitOK {
		t.Fatalf("sim: exit %d\n%s\n%s", code, out, errOut)
	}
	regs := filepath.Join(dir, contract.RegressionsFile)
	saved, err := sim.ReadRegressions(regs)
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runBin(t, bin, "sim", "--replay", regs, "--tries", "1")
	if code != exitOK || strings.Count(out, "same history") != len(saved) {
		t.Fatalf("replay of %d seeds: exit %d\n%s\n%s", len(saved), code, out, errOut)
	}
	raw, _ := os.ReadFile(regs)
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(bad, bytes.Replace(raw, []byte(saved[0].SHA256), []byte(strings.Repeat("0", 64)), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := runBin(t, bin, "sim", "--replay", bad, "--tries", "2"); code != exitViolation || !strings.Contains(out, "DIFFERS") || !strings.Contains(out, "(2 tries)") {
		t.Errorf("a wrong digest: exit %d, want %d\n%s", code, exitViolation, out)
	}
	if err := os.WriteFile(bad, append(raw, []byte("{\"lock\":\"fenced\",\"seed\":1}\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runBin(t, bin, "sim", "--replay", bad); code != exitBadInput || !strings.Contains(errOut, "bad.jsonl:"+strconv.Itoa(len(saved)+1)+": duration_ms") {
		t.Errorf("a bad regression line: exit %d, want %d naming the line\n%s", code, exitBadInput, errOut)
	}
	if code, _, errOut := runBin(t, bin, "sim", "--faults", "nope"); code != exitBadInput || !strings.Contains(errOut, "--faults") {
		t.Errorf("--faults nope: exit %d\n%s", code, errOut)
	}
}

// TestSimWorkloadShape: --mix and --clients shape the simulated
// workload as lockproof run's do (issue 41): more clients make more
// ops, the shape is saved with each regression and replayed with it (a
// replay without it would run another workload and differ), and bad
// values name their flag or their file and line.
func TestSimWorkloadShape(t *testing.T) {
	bin := buildBinary(t)
	ops := func(dir string) int {
		b, err := os.ReadFile(filepath.Join(dir, contract.SummaryFile))
		if err != nil {
			t.Fatal(err)
		}
		var s contract.Summary
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range s.Scenarios {
			n += r.Ops
		}
		if len(s.Scenarios) == 0 {
			t.Fatalf("%s keeps no row", dir)
		}
		return n / len(s.Scenarios)
	}
	base, shaped := filepath.Join(t.TempDir(), "base"), filepath.Join(t.TempDir(), "shaped")
	if code, out, errOut := runBin(t, bin, "sim", "--locks", "setnx", "--seeds", "1-3", "--out", base); code == exitBadInput {
		t.Fatalf("sim: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, out, errOut := runBin(t, bin, "sim", "--locks", "setnx", "--seeds", "1-3", "--clients", "4",
		"--mix", "renew=0", "--out", shaped); code == exitBadInput {
		t.Fatalf("sim --clients 4: exit %d\n%s\n%s", code, out, errOut)
	}
	regs := filepath.Join(shaped, contract.RegressionsFile)
	saved, err := sim.ReadRegressions(regs)
	if err != nil {
		t.Fatal(err)
	}
	if saved[0].Clients != 4 || saved[0].Mix != "renew=0" {
		t.Fatalf("regression %+v: want the workload's shape saved", saved[0])
	}
	var sum sim.Totals
	if b, err := os.ReadFile(filepath.Join(shaped, contract.SimFile)); err != nil || json.Unmarshal(b, &sum) != nil || sum.Clients != 4 {
		t.Errorf("sim.json: clients %d (%v); want 4", sum.Clients, err)
	}
	if a, b := ops(base), ops(shaped); b <= a {
		t.Errorf("4 clients made %d ops a kept run, 3 made %d: --clients changed nothing", b, a)
	}
	if code, out, errOut := runBin(t, bin, "sim", "--replay", regs, "--tries", "1"); code != exitOK || strings.Count(out, "same history") != len(saved) {
		t.Fatalf("replay of the shaped seeds: exit %d\n%s\n%s", code, out, errOut)
	}
	raw, _ := os.ReadFile(regs)
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(bad, bytes.Replace(raw, []byte(`"clients":4`), []byte(`"clients":3`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := runBin(t, bin, "sim", "--replay", bad, "--tries", "1"); code != exitViolation || !strings.Contains(out, "DIFFERS") {
		t.Errorf("a replay with another client count: exit %d, want %d (another history)\n%s", code, exitViolation, out)
	}
	if err := os.WriteFile(bad, bytes.Replace(raw, []byte(`"mix":"renew=0"`), []byte(`"mix":"nap=1"`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runBin(t, bin, "sim", "--replay", bad); code != exitBadInput || !strings.Contains(errOut, "bad.jsonl:1: mix") {
		t.Errorf("a bad mix in a regression: exit %d\n%s", code, errOut)
	}
	for _, args := range [][]string{{"--clients", "-1"}, {"--clients", "1000"}, {"--mix", "nap=0.5"}} {
		flag := args[0]
		if code, _, errOut := runBin(t, bin, append([]string{"sim", "--seeds", "1"}, args...)...); code != exitBadInput || !strings.Contains(errOut, flag) {
			t.Errorf("sim %v: exit %d, want %d naming %s\n%s", args, code, exitBadInput, flag, errOut)
		}
	}
}

// TestSimFindsWhatAFaultBreaks: one fault alone holds a lock to its
// prediction under that fault: lua under pause-client is predicted to
// let a stale write in, and a seed shows it (exit 0).
func TestSimFindsWhatAFaultBreaks(t *testing.T) {
	bin := buildBinary(t)
	code, out, errOut := runBin(t, bin, "sim", "--locks", "lua", "--faults", "pause-client", "--seeds", "1-4")
	if code != exitOK || !strings.Contains(out, "resource on 4 (first seed 1)") {
		t.Fatalf("lua × pause-client: exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestSimSummary: seeds are summed up per lock; a property predicted to
// break that no seed broke is missed (exit 1), a seed not as expected is
// exit 1, an unknown verdict alone exit 3.
func TestSimSummary(t *testing.T) {
	row := func(seed int64, verdict contract.Verdict, expected contract.Verdict, asExpected bool) *sim.SeedResult {
		return &sim.SeedResult{Row: contract.Row{Lock: "x", Seed: seed, AsExpected: asExpected,
			Verdicts: contract.Verdicts{contract.PropLease: verdict}, Expected: contract.Verdicts{contract.PropLease: expected}}}
	}
	f := simFlags{faults: "pause-client", duration: time.Second}
	for _, c := range []struct {
		name string
		rows []*sim.SeedResult
		code int
	}{
		{"found on seed 2", []*sim.SeedResult{row(1, contract.OK, contract.Violated, true), row(2, contract.Violated, contract.Violated, true)}, exitOK},
		{"missed", []*sim.SeedResult{row(1, contract.OK, contract.Violated, true), row(2, contract.OK, contract.Violated, true)}, exitViolation},
		{"not as expected", []*sim.SeedResult{row(1, contract.Violated, contract.OK, false)}, exitViolation},
		{"unknown", []*sim.SeedResult{row(1, contract.Unknown, contract.OK, false)}, exitUnknown},
	} {
		s := sim.Summarize(f.campaign(), []string{"x"}, c.rows, time.Second)
		if got := s.Status(); got != c.code {
			t.Errorf("%s: exit %d, want %d (%s)", c.name, got, c.code, s.Locks[0].Line())
		}
		if c.name == "found on seed 2" && s.Locks[0].First[contract.PropLease] != 2 {
			t.Errorf("first finding on seed %d, want 2", s.Locks[0].First[contract.PropLease])
		}
		if c.name == "missed" && !slices.Equal(s.Locks[0].Missed, []string{contract.PropLease}) {
			t.Errorf("missed %v, want [lease]", s.Locks[0].Missed)
		}
	}
}

// TestSimShrink: `--shrink` reduces a saved finding's schedule to fewer
// faults with the same finding, and the shrunk line replays byte for
// byte and still breaks what it broke; a line with nothing to keep is
// left as it is, and a bad file is named.
func TestSimShrink(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	in, out := filepath.Join(dir, "regs.jsonl"), filepath.Join(dir, "small.jsonl")
	orig := sim.Regression{Lock: "setnx", Seed: 3, Faults: "pause-client+crash-client+clock-skew+failover+failover-skew",
		DurationMs: 3000, SHA256: strings.Repeat("0", 64), Why: "first violated liveness"}
	unknown := orig
	unknown.Seed, unknown.Why = 4, "unknown"
	var b bytes.Buffer
	for _, r := range []sim.Regression{orig, unknown} {
		line, _ := json.Marshal(r)
		b.Write(append(line, '\n'))
	}
	if err := os.WriteFile(in, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, errOut := runBin(t, bin, "sim", "--shrink", in, "--shrunk", out)
	if code != exitOK {
		t.Fatalf("shrink: exit %d\n%s\n%s", code, stdout, errOut)
	}
	got, err := sim.ReadRegressions(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1] != unknown {
		t.Fatalf("shrunk file: %+v; want two lines, the unknown one as it was", got)
	}
	if n, m := len(strings.Split(got[0].Faults, "+")), len(strings.Split(orig.Faults, "+")); n >= m || !strings.Contains(got[0].Why, "first violated liveness; shrunk from "+orig.Faults) {
		t.Errorf("shrunk %+v: want fewer than %d faults and the finding kept", got[0], m)
	}
	// The shrunk line alone: it replays, and breaks liveness again.
	line, _ := json.Marshal(got[0])
	if err := os.WriteFile(out, append(line, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, stdout, errOut := runBin(t, bin, "sim", "--replay", out, "--tries", "1"); code != exitOK || !strings.Contains(stdout, "same history") {
		t.Errorf("replay of the shrunk line: exit %d\n%s\n%s", code, stdout, errOut)
	}
	if code, stdout, _ := runBin(t, bin, "sim", "--locks", "setnx", "--seeds", "3", "--faults", got[0].Faults); !strings.Contains(stdout, "liveness on 1") {
		t.Errorf("the shrunk schedule (exit %d) no longer breaks liveness:\n%s", code, stdout)
	}
	if code, _, errOut := runBin(t, bin, "sim", "--shrink", filepath.Join(dir, "none.jsonl")); code != exitBadInput || !strings.Contains(errOut, "none.jsonl") {
		t.Errorf("a missing file: exit %d, want %d naming it\n%s", code, exitBadInput, errOut)
	}
}

// TestWorkerStderrKeepsTheSeed: a worker that hangs writes which seed
// hung, then every goroutine's stack; the error the run returns must
// still name the seed, not only the stacks' tail.
func TestWorkerStderrKeepsTheSeed(t *testing.T) {
	var b strings.Builder
	b.WriteString("lockproof sim: fenced seed 1546 ran 2m0s of wall time without ending: the simulation's clock stopped\n")
	for i := range 200 {
		fmt.Fprintf(&b, "goroutine %d [select]:\n\tmain.f()\n", i)
	}
	got := workerStderr(b.String(), 20)
	if !strings.Contains(got, "fenced seed 1546") {
		t.Errorf("the worker's error lost the seed:\n%s", got)
	}
	if !strings.HasSuffix(got, "main.f()") || strings.Count(got, "\n") > 25 {
		t.Errorf("want the seed's line and the last 20 lines, got:\n%s", got)
	}
	if got := workerStderr("a\nb", 20); got != "a\nb" {
		t.Errorf("a short stderr: %q, want it whole", got)
	}
}

// TestSimDurationBounded: --duration is bounded as a regressions file's
// duration_ms is (sim.MaxDuration, issue 62.7).
func TestSimDurationBounded(t *testing.T) {
	var out, errb bytes.Buffer
	code := dispatch(context.Background(), []string{"sim", "--duration", "1000h", "--seeds", "1"}, &out, &errb)
	if code != exitBadInput || !strings.Contains(errb.String(), "--duration") {
		t.Errorf("sim --duration 1000h: exit %d, %q; want 2 naming --duration", code, errb.String())
	}
}
