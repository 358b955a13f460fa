package tla

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRecoveryModel: the model of the lock's recovery paths
// (LockRecovery.tla) passes as the scripts are shipped, with at least the
// distinct states its config's floor names, and fails on the old release
// script, the one that did not look its id up in gone (round three's
// defect 1: a release landing after its own undo ends another hold of the
// owner), and on the two other switches that take a defence out. tla/run.sh
// checks the same in CI; this runs it inside `go test` whenever
// TLA2TOOLS_JAR is set.
func TestRecoveryModel(t *testing.T) {
	checkModel(t)
}

// TestSharedModel: the model of the read-write lock and the semaphore
// (SharedHolds.tla) passes as the scripts are shipped, over a network
// that delivers late and twice and loses replies, with crashes and
// expiries; and fails on the mechanism of each broken specimen of the zoo
// (a read unlock that deletes the lock, one TTL set by the latest grant,
// permits that never expire, a count raced by GET then SET) and on a
// reader-preference line that starves writers.
func TestSharedModel(t *testing.T) {
	checkModel(t)
}

// TestLineModel: the model of the line by call (LockLine.tla) passes as
// the scripts are shipped, and fails with hand-offs by token (the owner's
// other call took the hand-off given at its waiting call's place: the
// scripts before 2026-11-29, TestHandOffIsItsPlacesCall in lock/), with
// places by token (ZADD NX kept the place an owner's earlier call left)
// and with a served waiter that keeps its place (round three's defect 4).
func TestLineModel(t *testing.T) {
	checkModel(t)
}

var (
	reGoTest = regexp.MustCompile(`(?m)^\\\* go test: *(\w+)`)
	reExpect = regexp.MustCompile(`(?m)^\\\* expect: *(\w+)`)
)

// modelTests are the tests that model-check configs (checkModel), with
// their spec.
var modelTests = map[string]string{"TestRecoveryModel": "LockRecovery.tla", "TestLineModel": "LockLine.tla", "TestSharedModel": "SharedHolds.tla"}

// goTested are the cases of test (a test of modelTests): the configs whose "\* go test: NAME"
// line names it, each with the violation its "\* expect:" line names when
// it is an _unsafe config. tla/run.sh skips these configs when
// TLC_SKIP_GO_TESTED=1 (.ci/run, after go test has run them), so that
// line is what keeps a config checked once, by one of the two: a line
// naming no test of modelTests, or a config of another spec, fails here,
// and so does a test left with no must-pass or no must-fail config.
func goTested(t *testing.T, test string) []modelCase {
	t.Helper()
	cfgs, err := filepath.Glob("*.cfg")
	if err != nil {
		t.Fatal(err)
	}
	var cases []modelCase
	pass, fail := 0, 0
	for _, cfg := range cfgs {
		b, err := os.ReadFile(cfg)
		if err != nil {
			t.Fatal(err)
		}
		m := reGoTest.FindSubmatch(b)
		if m == nil {
			continue
		}
		spec, ok := modelTests[string(m[1])]
		switch {
		case !ok:
			t.Fatalf("%s: \"\\* go test: %s\" names no test that model-checks configs (modelTests)", cfg, m[1])
		case strings.TrimSuffix(spec, ".tla") != strings.SplitN(strings.TrimSuffix(cfg, ".cfg"), "_", 2)[0]:
			t.Fatalf("%s: \"\\* go test: %s\" checks %s, not this config's spec", cfg, m[1], spec)
		case string(m[1]) != test:
			continue
		}
		tc := modelCase{cfg: cfg}
		if strings.Contains(cfg, "_unsafe") {
			m := reExpect.FindSubmatch(b)
			if m == nil {
				t.Fatalf("%s: an _unsafe config with no \"\\* expect: NAME\" line", cfg)
			}
			tc.violation = string(m[1])
			fail++
		} else {
			pass++
		}
		cases = append(cases, tc)
	}
	if pass == 0 || fail == 0 {
		t.Fatalf("%s: %d must-pass and %d must-fail configs marked \"\\* go test: %s\"; want some of each", test, pass, fail, test)
	}
	return cases
}

// modelCase is a config of a spec and what TLC must say of it.
type modelCase struct {
	cfg       string
	violation string // "": must pass, with at least its min-states
}

// checkModel model-checks the spec of t (modelTests) with each config
// marked for t (goTested).
func checkModel(t *testing.T) {
	t.Helper()
	spec := modelTests[t.Name()]
	cases := goTested(t, t.Name())
	v := validator(t)
	for _, tc := range cases {
		t.Run(strings.TrimSuffix(tc.cfg, ".cfg"), func(t *testing.T) {
			out, states := runTLC(t, v, spec, tc.cfg)
			if tc.violation == "" {
				if !reNoError.MatchString(out) {
					t.Fatalf("TLC found an error in the scripts as shipped:\n%s", tail([]byte(out), 3000))
				}
				floor := minStates(t, tc.cfg)
				if states < floor {
					t.Errorf("%d distinct states, below the config's floor %d: some action is disabled", states, floor)
				}
				t.Logf("%d distinct states (floor %d)", states, floor)
				return
			}
			if !strings.Contains(out, "Invariant "+tc.violation+" is violated") && !temporalViolated(t, out, tc) {
				t.Fatalf("want a violation of %s, TLC said:\n%s", tc.violation, tail([]byte(out), 2000))
			}
		})
	}
}

// temporalViolated reports whether TLC found a temporal property violated
// and tc's config checks tc.violation as one (PROPERTIES): TLC does not
// name the property, so the config must check that one alone.
func temporalViolated(t *testing.T, out string, tc modelCase) bool {
	t.Helper()
	if !strings.Contains(out, "Temporal properties were violated") {
		return false
	}
	b, err := os.ReadFile(tc.cfg)
	if err != nil {
		t.Fatal(err)
	}
	props := regexp.MustCompile(`(?m)^PROPERT(?:Y|IES)\s+(.+)$`).FindSubmatch(b)
	return props != nil && strings.TrimSpace(string(props[1])) == tc.violation
}

// runTLC model-checks spec with cfg (files of this directory) in a temp
// dir, and returns TLC's output and its distinct states.
func runTLC(t *testing.T, v *Validator, spec, cfg string) (string, int) {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{spec, cfg} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, v.java(), "-XX:+UseParallelGC", "-Xmx1g", "-Djava.io.tmpdir="+dir, "-cp", v.Jar, "tlc2.TLC",
		"-workers", "1", "-metadir", filepath.Join(dir, "meta"), "-config", cfg, spec)
	cmd.Dir = dir
	cmd.WaitDelay = 5 * time.Second
	b, _ := cmd.CombinedOutput() // a violation exits non-zero: the output says which
	if ctx.Err() != nil {
		t.Fatalf("TLC did not finish within 5 minutes: %v", ctx.Err())
	}
	states := 0
	if m := reStates.FindAllSubmatch(b, -1); len(m) > 0 {
		states, _ = strconv.Atoi(strings.ReplaceAll(string(m[len(m)-1][1]), ",", ""))
	}
	return string(b), states
}

var reMinStates = regexp.MustCompile(`(?m)^\\\* min-states: *(\d+)`)

// minStates is cfg's "\* min-states: N" floor (tla/run.sh reads it too).
func minStates(t *testing.T, cfg string) int {
	t.Helper()
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := reMinStates.FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s: no \"\\* min-states: N\" line", cfg)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}
