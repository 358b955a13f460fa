package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
