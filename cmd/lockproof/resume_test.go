package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/internal/redistest"
)

// runDirWith makes a run directory to resume: a summary.json (checkOut
// wants one) and, unless flags is nil, the flags of the run that made it
// as a run of args would record them.
func runDirWith(t *testing.T, args []string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, contract.SummaryFile), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if args != nil {
		var f runFlags
		fs := runFlagSet(&f, &bytes.Buffer{})
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		if err := writeRunFlags(dir, definingFlags(fs)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestResumeTakesTheRunsFlags: a resume's flags not given are the run's
// own, so that it continues the same rows; a run directory of an earlier
// lockproof (no flags recorded) is said to be unchecked; a broken record
// is an error naming its file.
func TestResumeTakesTheRunsFlags(t *testing.T) {
	dir := runDirWith(t, []string{"--locks", "lua", "--faults", "none", "--seeds", "2-4", "--ttl", "700ms"})
	var stderr bytes.Buffer
	r, code, ok := parseRun([]string{"--out", dir, "--resume"}, &stderr)
	if !ok {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if r.f.locks != "lua" || r.f.faults != "none" || r.f.ttl.String() != "700ms" || !slices.Equal(r.seeds, []uint64{2, 3, 4}) {
		t.Errorf("resumed flags: locks %q faults %q ttl %v seeds %v; want the run's lua, none, 700ms, 2-4", r.f.locks, r.f.faults, r.f.ttl, r.seeds)
	}

	stderr.Reset()
	_, code, ok = parseRun([]string{"--out", dir, "--resume", "--ttl", "1s", "--faults", "none"}, &stderr)
	if ok || code != exitBadInput || !strings.Contains(stderr.String(), `--ttl "1s" (the run's: "700ms")`) || strings.Contains(stderr.String(), "--faults") {
		t.Errorf("resume with another --ttl: ok %v exit %d, %q; want 2 naming --ttl only", ok, code, stderr.String())
	}

	old := runDirWith(t, nil)
	stderr.Reset()
	if _, code, ok = parseRun([]string{"--out", old, "--resume", "--locks", "lua"}, &stderr); !ok || !strings.Contains(stderr.String(), "has no "+runFlagsFile) {
		t.Errorf("an earlier run directory: ok %v exit %d, %q; want ok, said unchecked", ok, code, stderr.String())
	}

	if err := os.WriteFile(filepath.Join(old, runFlagsFile), []byte("{\"flags\": 3}"), 0o644); err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	if _, code, ok = parseRun([]string{"--out", old, "--resume"}, &stderr); ok || code != exitBadInput || !strings.Contains(stderr.String(), runFlagsFile) {
		t.Errorf("a broken %s: ok %v exit %d, %q; want 2 naming the file", runFlagsFile, ok, code, stderr.String())
	}
}

// TestLockCmdCheckedFirst (issue 63.3): a --lock-cmd lock that cannot
// start fails the run before anything runs: exit 4, its stderr once, no
// run directory made.
func TestLockCmdCheckedFirst(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		if redistest.InCI() {
			t.Fatalf("CI=true but %v", err)
		}
		t.Skip(err)
	}
	p := filepath.Join(t.TempDir(), "adapter.py")
	if err := os.WriteFile(p, []byte("import no_such_module_lockproof\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "run")
	code, _, stderr := runRunArgs(t, "--lock-cmd", py+" "+p, "--lock-name", "broken", "--faults", "none", "--out", out)
	if code != exitEnvironment || strings.Count(stderr, "ModuleNotFoundError") != 1 {
		t.Fatalf("exit %d, stderr %q; want 4 with the process's error once", code, stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("--out %s: %v; want it not made", out, err)
	}
}
