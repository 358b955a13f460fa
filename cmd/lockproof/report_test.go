package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockproof/lockproof/contract"
)

// copyFixtureRun copies reports/testdata/run (a run directory with expected
// passes, expected and unexpected violations and an unknown verdict) and lets
// keep choose its scenarios (nil: all).
func copyFixtureRun(t *testing.T, keep func(id string) bool) string {
	t.Helper()
	src := filepath.Join("..", "..", "reports", "testdata", "run")
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	if keep != nil {
		var sum struct {
			Scenarios []map[string]any `json:"scenarios"`
		}
		b, _ := os.ReadFile(filepath.Join(dst, "summary.json"))
		if err := json.Unmarshal(b, &sum); err != nil {
			t.Fatal(err)
		}
		var kept []map[string]any
		for _, s := range sum.Scenarios {
			if keep(filepath.Dir(s["history"].(string))) {
				kept = append(kept, s)
			}
		}
		sum.Scenarios = kept
		b, _ = json.Marshal(sum)
		if err := os.WriteFile(filepath.Join(dst, "summary.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := dispatch(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestReportCommand(t *testing.T) {
	dir := copyFixtureRun(t, nil)
	code, out, errOut := runCLI(t, "report", dir)
	if code != exitViolation {
		t.Fatalf("exit %d, want %d (unexpected verdicts); stdout %q stderr %q", code, exitViolation, out, errOut)
	}
	if !strings.HasPrefix(out, "fail: 2 verdicts not as expected") {
		t.Errorf("stdout %q", out)
	}
	for _, f := range []string{"report.md", "report.html", "junit.xml", "report.json"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s not written: %v", f, err)
		}
	}

	pass := copyFixtureRun(t, func(id string) bool { return strings.HasPrefix(id, "fenced-none") || id == "setnx-pause-client-1" })
	if code, out, errOut := runCLI(t, "report", pass); code != exitOK || !strings.HasPrefix(out, "pass: ") {
		t.Errorf("passing run: exit %d stdout %q stderr %q, want 0", code, out, errOut)
	}
	unknown := copyFixtureRun(t, func(id string) bool { return id == "fenced-none-1" || id == "fenced-latency-1" })
	if code, out, _ := runCLI(t, "report", unknown); code != exitUnknown || !strings.HasPrefix(out, "inconclusive: ") {
		t.Errorf("run with an unknown verdict: exit %d stdout %q, want %d", code, out, exitUnknown)
	}
}

func TestReportBadInput(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-run")
	code, _, errOut := runCLI(t, "report", missing)
	if code != exitBadInput || !strings.Contains(errOut, filepath.Join(missing, "summary.json")) {
		t.Errorf("missing dir: exit %d stderr %q, want %d naming summary.json", code, errOut, exitBadInput)
	}
	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, "summary.json"), []byte("{not json"), 0o644)
	code, _, errOut = runCLI(t, "report", bad)
	if code != exitBadInput || !strings.Contains(errOut, filepath.Join(bad, "summary.json")) {
		t.Errorf("malformed summary: exit %d stderr %q, want %d naming the file", code, errOut, exitBadInput)
	}
	if code, _, _ := runCLI(t, "report"); code != exitBadInput {
		t.Errorf("no DIR: exit %d, want %d", code, exitBadInput)
	}
	if code, _, _ := runCLI(t, "report", "--compare", bad); code != exitBadInput {
		t.Errorf("--compare with one dir: exit %d, want %d", code, exitBadInput)
	}
}

func TestReportCompare(t *testing.T) {
	old := copyFixtureRun(t, nil)
	// The new run: lua no longer violates; its check.json and summary agree.
	newer := copyFixtureRun(t, nil)
	b, _ := os.ReadFile(filepath.Join(newer, "summary.json"))
	var sum struct {
		Scenarios []map[string]any `json:"scenarios"`
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	for _, s := range sum.Scenarios {
		if s["lock"] == "lua" {
			s["lease"] = "ok"
		}
	}
	b, _ = json.Marshal(sum)
	os.WriteFile(filepath.Join(newer, "summary.json"), b, 0o644)

	code, out, errOut := runCLI(t, "report", "--compare", old, newer)
	if code != exitOK || !strings.Contains(out, "## Fixed (1)") || !strings.Contains(out, "| lua/none/seed-1 | lease | violated | ok |") {
		t.Errorf("old->new: exit %d stdout %q stderr %q, want lua fixed", code, out, errOut)
	}
	code, out, _ = runCLI(t, "report", "--compare", newer, old)
	if code != exitViolation || !strings.Contains(out, "## New violations (1)") {
		t.Errorf("new->old: exit %d stdout %q, want a new violation and exit %d", code, out, exitViolation)
	}
	code, _, errOut = runCLI(t, "report", "--compare", old, filepath.Join(old, "nope"))
	if code != exitBadInput || !strings.Contains(errOut, "summary.json") {
		t.Errorf("missing new run: exit %d stderr %q", code, errOut)
	}
}

// TestReportBackends: report --backends sets runs of two topologies side
// by side, lock by lock, and exits as the worst run's report does;
// without a directory it is bad input.
func TestReportBackends(t *testing.T) {
	pass := copyFixtureRun(t, func(id string) bool { return strings.HasPrefix(id, "fenced-none") || id == "setnx-pause-client-1" })
	etcd := copyFixtureRun(t, func(id string) bool { return strings.HasPrefix(id, "fenced-none") })
	sum := filepath.Join(etcd, contract.SummaryFile)
	b, err := os.ReadFile(sum)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["topology"] = contract.TopologyEtcd
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sum, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "report", "--backends", pass, etcd)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q; want 0", code, errOut)
	}
	for _, want := range []string{"| topology | lock | none | pause-client |", "| sentinel | fenced | held | — |", "| etcd | fenced | held | — |", "| sentinel | setnx | — | "} {
		if !strings.Contains(out, want) {
			t.Errorf("report --backends lacks %q:\n%s", want, out)
		}
	}
	if code, out, _ := runCLI(t, "report", "--backends", pass, copyFixtureRun(t, nil)); code != exitViolation || !strings.Contains(out, "**(!)**") {
		t.Errorf("with a run not as expected: exit %d; want %d and the cell marked:\n%s", code, exitViolation, out)
	}
	if code, _, errOut := runCLI(t, "report", "--backends"); code != exitBadInput || !strings.Contains(errOut, "--backends") {
		t.Errorf("no directory: exit %d, stderr %q; want %d", code, errOut, exitBadInput)
	}
}

// TestRunStoreTopologyRefusals: a consensus store's topology runs its own
// locks only: a Redis lock there, a store's lock on Redis and a lock in
// its own process there are refused up front, each saying why.
func TestRunStoreTopologyRefusals(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--topology", "etcd", "--locks", "fenced"}, exitBadInput, "runs on Redis"},
		{[]string{"--locks", "etcd-mutex"}, exitBadInput, "runs on the etcd store"},
		{[]string{"--topology", "zookeeper", "--lock-cmd", "true", "--lock-name", "x"}, exitBadInput, "--topology zookeeper is not supported"},
	} {
		args := append([]string{"run", "--seeds", "1", "--faults", "none", "--out", filepath.Join(t.TempDir(), "out")}, tc.args...)
		code, _, errOut := runCLI(t, args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d saying %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
}
