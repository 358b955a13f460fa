package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/internal/testlong"
)

// runMutantsCLI runs `lockproof mutants args...` in this process.
func runMutantsCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := dispatch(context.Background(), append([]string{"mutants"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// TestMutantsBadInput: bad flags, a bad or rotten catalogue, a source
// tree that is not lockproof's and an --out that cannot be used are
// refused with exit 2, naming the flag, the file and line, or the mutant;
// --list prints the catalogue.
func TestMutantsBadInput(t *testing.T) {
	rotten := t.TempDir()
	if err := os.WriteFile(filepath.Join(rotten, "gone-away.mutant"), []byte("file: lock/scripts.go\nkind: lua\nclass: safety\nwhat: x\n--- search\nno such text in the lock\n--- replace\ny\n--- end\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	malformed := t.TempDir()
	if err := os.WriteFile(filepath.Join(malformed, "bad.mutant"), []byte("file: lock/scripts.go\nkind: lua\nclass: speed\nwhat: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	aFile := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(aFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	notEmpty := t.TempDir()
	if err := os.WriteFile(filepath.Join(notEmpty, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--seeds", "-1"}, "--seeds -1"},
		{[]string{"--matrix-seeds", "-2"}, "--matrix-seeds -2"},
		{[]string{"--seeds", "0", "--matrix-seeds", "0"}, "no verifier left"},
		{[]string{"--workers", "0"}, "--workers 0"},
		{[]string{"--timeout", "0s"}, "--timeout 0s"},
		{[]string{"--matrix-faults", "pause-client,bogus"}, "--matrix-faults"},
		{[]string{"--sim-faults", "bogus"}, "--sim-faults"},
		{[]string{"--mutants", "end-no-owner-check,nosuch", "--list"}, `"nosuch"`},
		{[]string{"--catalogue", rotten}, "gone-away.mutant:5: mutant gone-away: lock/scripts.go: the search text occurs 0 times"},
		{[]string{"--catalogue", malformed}, "bad.mutant:3: class: "},
		{[]string{"--src", t.TempDir()}, "--src"},
		{[]string{"--mutants", "end-no-owner-check", "--out", aFile}, "is a file"},
		{[]string{"--mutants", "end-no-owner-check", "--out", notEmpty}, "not empty"},
		{[]string{"stray"}, "unexpected arguments"},
	} {
		code, _, errOut := runMutantsCLI(t, c.args...)
		if code != exitBadInput || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, %q; want %d naming %q", c.args, code, errOut, exitBadInput, c.want)
		}
	}
	code, out, errOut := runMutantsCLI(t, "--list")
	if code != exitOK || !strings.Contains(out, "end-no-owner-check") || !strings.Contains(out, "[equivalent: ") || strings.Count(out, "\n") < 41 {
		t.Errorf("--list: exit %d\n%s%s", code, out, errOut)
	}
}

// fakeVerifier writes a shell script that plays a verifier: it copies
// $FAKE_SUMMARY to its --out directory's summary.json (its last
// argument) and exits $FAKE_EXIT, or sleeps with FAKE_SLEEP.
func fakeVerifier(t *testing.T) string {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("a shell script plays the verifier")
	}
	p := filepath.Join(t.TempDir(), "verifier")
	script := `#!/bin/sh
for last; do :; done
if [ -n "$FAKE_SLEEP" ]; then exec sleep "$FAKE_SLEEP"; fi
mkdir -p "$last"
if [ -n "$FAKE_SUMMARY" ]; then cp "$FAKE_SUMMARY" "$last/summary.json"; fi
echo "the verifier's last words" >&2
exit "$FAKE_EXIT"
`
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestMutantsVerdicts: what a verifier's exit code and summary.json make
// of a mutant: exit 0 survived; exit 1 killed by the first row not as
// predicted, by seed, that the control was as predicted on (a run whose
// only such rows are the control's kills nothing); exit 3 and any other
// inconclusive, saying the row or the verifier's last words; a run past
// --timeout inconclusive.
func TestMutantsVerdicts(t *testing.T) {
	bin := fakeVerifier(t)
	out := t.TempDir()
	summary := filepath.Join(t.TempDir(), "summary.json")
	rows := []*contract.Row{
		{Lock: "fenced", Fault: "swarm", FaultName: "latency+reset", Seed: 5, Verdicts: contract.Verdicts{contract.PropLease: contract.Violated},
			Mismatches: []string{"lease violated, expected ok"}},
		{Lock: "fenced", Fault: "swarm", FaultName: "partition", Seed: 2, Verdicts: contract.Verdicts{contract.PropClaims: contract.Violated},
			Mismatches: []string{"claims violated outside every window that excuses it (claim-overlap, lines 3,4; windows: partition)"}},
		{Lock: "fenced", Fault: "swarm", Seed: 9, Verdicts: contract.Verdicts{contract.PropLease: contract.Unknown}, Error: "the seed failed"},
	}
	b, err := json.Marshal(&contract.Summary{Scenarios: rows})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(summary, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FAKE_SUMMARY", summary)
	for i, c := range []struct {
		exit       string
		sleep      string
		controlBad []string
		want       verifierResult
		note       string
	}{
		{exit: "0", want: verifierResult{Verdict: verdictSurvived}},
		{exit: "1", want: verifierResult{Verdict: verdictKilled, Seed: 2, Fault: "partition", Property: contract.PropClaims}},
		{exit: "1", controlBad: []string{"fenced/swarm/2"}, want: verifierResult{Verdict: verdictKilled, Seed: 5, Fault: "latency+reset", Property: contract.PropLease}},
		{exit: "1", controlBad: []string{"fenced/swarm/2", "fenced/swarm/5"}, want: verifierResult{Verdict: verdictSurvived}, note: "the control's too: fenced/swarm/2, fenced/swarm/5"},
		// The control as another lock on the same seed excuses nothing:
		// the control runs as every lock a mutant names.
		{exit: "1", controlBad: []string{"fenced-rw/swarm/2"}, want: verifierResult{Verdict: verdictKilled, Seed: 2, Fault: "partition", Property: contract.PropClaims}},
		{exit: "3", want: verifierResult{Verdict: verdictInconclusive}, note: "swarm seed 9: the seed failed"},
		{exit: "2", want: verifierResult{Verdict: verdictInconclusive}, note: "exit 2: the verifier's last words"},
		{exit: "0", sleep: "30", want: verifierResult{Verdict: verdictInconclusive}, note: "ran past --timeout"},
	} {
		t.Setenv("FAKE_EXIT", c.exit)
		t.Setenv("FAKE_SLEEP", c.sleep)
		m := &mutation{f: mutantsFlags{out: out, timeout: 2 * time.Second}, copyDir: out, controlBad: map[string]bool{}}
		for _, k := range c.controlBad {
			m.controlBad[k] = true
		}
		dir := filepath.Join(out, "case"+string(rune('a'+i)))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		v := m.verify(context.Background(), bin, dir, "sim", []string{"sim"}, false)
		if v.Verdict != c.want.Verdict || v.Seed != c.want.Seed || v.Fault != c.want.Fault || v.Property != c.want.Property || !strings.Contains(v.Note, c.note) {
			t.Errorf("case %d (exit %s, control %v): %+v; want %+v noting %q", i, c.exit, c.controlBad, v, c.want, c.note)
		}
		if v.Dir != filepath.Base(dir)+"/sim" {
			t.Errorf("case %d: dir %q", i, v.Dir)
		}
		if _, err := os.Stat(filepath.Join(dir, "sim.log")); err != nil {
			t.Errorf("case %d: no sim.log: %v", i, err)
		}
	}
}

// TestMutantsScore: the score counts the mutants that built and are not
// equivalent, and the exit code says whether every one was killed by every
// verifier that ran, whether an equivalent one was killed (its reason is
// wrong) and whether the control was as predicted.
func TestMutantsScore(t *testing.T) {
	killed := &verifierResult{Verdict: verdictKilled, Seed: 1, Property: contract.PropLease}
	survived := &verifierResult{Verdict: verdictSurvived}
	inconclusive := &verifierResult{Verdict: verdictInconclusive, Note: "ran past --timeout 1h0m0s"}
	budget := &mutantsBudget{SimSeeds: 300, SimFaults: "swarm", MatrixSeeds: 1, MatrixFaults: "none"}
	mk := func(name, eq, build string, sim, matrix *verifierResult) *mutantResult {
		return &mutantResult{Name: name, Equivalent: eq, Build: build, Sim: sim, Matrix: matrix}
	}
	clean := mk(controlName, "", "ok", survived, survived)
	for _, c := range []struct {
		name    string
		control *mutantResult
		rs      []*mutantResult
		code    int
		both    string
	}{
		{"all killed", clean, []*mutantResult{mk("a", "", "ok", killed, killed), mk("e", "because", "ok", survived, survived)}, exitOK, "1 of 1 (100%)"},
		{"a survivor", clean, []*mutantResult{mk("a", "", "ok", killed, killed), mk("b", "", "ok", killed, survived)}, exitViolation, "1 of 2 (50%)"},
		{"inconclusive", clean, []*mutantResult{mk("a", "", "ok", killed, inconclusive)}, exitUnknown, "0 of 1 (0%)"},
		{"equivalent killed", clean, []*mutantResult{mk("a", "", "ok", killed, killed), mk("e", "because", "ok", killed, survived)}, exitViolation, "1 of 1 (100%)"},
		{"build failed", clean, []*mutantResult{mk("a", "", "go build: exit status 1", nil, nil)}, exitViolation, "0 of 0"},
		{"control not as predicted", mk(controlName, "", "ok", &verifierResult{Verdict: verdictKilled, Seed: 3}, survived),
			[]*mutantResult{mk("a", "", "ok", killed, killed)}, exitViolation, "1 of 1 (100%)"},
	} {
		f := &mutantsFile{Budget: budget, Control: c.control, Mutants: c.rs}
		f.Score = score(f.Mutants, f.Budget)
		if got := f.status(); got != c.code {
			t.Errorf("%s: exit %d, want %d (%s)", c.name, got, c.code, f.scoreText())
		}
		if got := f.Score.Both.String(); got != c.both {
			t.Errorf("%s: both %s, want %s", c.name, got, c.both)
		}
		var tbl, md bytes.Buffer
		printMutantsTable(&tbl, f)
		writeMutantsMarkdown(&md, f)
		if !strings.Contains(tbl.String(), "\na ") || !strings.Contains(tbl.String(), "as predicted") || !strings.Contains(md.String(), "| `a` |") ||
			c.rs[0].Build == "ok" && !strings.Contains(tbl.String(), "killed at seed 1 by lease") {
			t.Errorf("%s: table\n%s\nmarkdown\n%s", c.name, tbl.String(), md.String())
		}
	}
}

// TestMutantsCompileOnlyTable: --compile-only's table says whether each
// mutant built, and a mutant that did not fails the run.
func TestMutantsCompileOnlyTable(t *testing.T) {
	f := &mutantsFile{CompileOnly: true, Mutants: []*mutantResult{
		{Name: "a", Kind: "go", Class: "safety", Build: "ok"},
		{Name: "b", Kind: "lua", Class: "liveness", Build: "go build: exit status 1: undefined: x"},
	}}
	f.Score = score(f.Mutants, f.Budget)
	if got := f.status(); got != exitViolation {
		t.Errorf("exit %d, want %d", got, exitViolation)
	}
	var tbl, md bytes.Buffer
	printMutantsTable(&tbl, f)
	writeMutantsMarkdown(&md, f)
	for _, want := range []string{"BUILD", "compiles", "build failed: go build: exit status 1: undefined: x", "1 mutants compiled, 1 failed to build"} {
		if !strings.Contains(tbl.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, tbl.String())
		}
	}
	if !strings.Contains(md.String(), "| mutant | kind | class | defect | build |") || !strings.Contains(md.String(), "| `b` | lua | liveness |") {
		t.Errorf("markdown:\n%s", md.String())
	}
}

// TestMutantsKillInTheSimulation builds a mutant the harness surely kills
// (the end script ignores the owner: a waiter's leave ends the holder's
// hold) and runs it through 20 swarm seeds of the simulation: it is
// reported killed, with the seed and the property, in the table and in
// mutants.json; the source's copy is gone afterwards. It builds the CLI
// from a copy of the module (about a minute on 2 cores): nightly breadth
// only (LOCKPROOF_LONG=1).
func TestMutantsKillInTheSimulation(t *testing.T) {
	if !testlong.On() {
		t.Skipf("builds a mutant of the CLI (a minute or more): %s=1", testlong.EnvVar)
	}
	out := filepath.Join(t.TempDir(), "run")
	code, stdout, stderr := runMutantsCLI(t, "--mutants", "end-no-owner-check", "--seeds", "20", "--matrix-seeds", "0", "--control=false", "--out", out)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	var f mutantsFile
	b, err := os.ReadFile(filepath.Join(out, contract.MutantsFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Mutants) != 1 || f.Mutants[0].Sim == nil {
		t.Fatalf("mutants.json: %s", b)
	}
	v := f.Mutants[0].Sim
	if v.Verdict != verdictKilled || v.Seed < 1 || v.Seed > 20 || v.Property == "" || v.Fault == "" || v.Mismatch == "" {
		t.Errorf("the simulation's verdict: %+v", v)
	}
	if f.Score.Sim == nil || f.Score.Sim.Killed != 1 || f.Budget == nil || f.Budget.SimSeeds != 20 {
		t.Errorf("score %+v, budget %+v", f.Score, f.Budget)
	}
	if !strings.Contains(stdout, "end-no-owner-check") || !strings.Contains(stdout, "killed at seed") {
		t.Errorf("the table does not say it:\n%s", stdout)
	}
	if _, err := os.Stat(filepath.Join(out, v.Dir, contract.SimFile)); err != nil {
		t.Errorf("the simulation's run directory: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(out, "_src-*")); len(left) > 0 {
		t.Errorf("the source's copy was left behind: %v", left)
	}
}
