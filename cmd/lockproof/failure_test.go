package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/chaos/docker"
	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/runner"
)

// TestRunInterruptedThenResumed: an interrupted run says so once, keeps
// what finished, exits 130; --resume runs only what did not and completes
// the run directory.
func TestRunInterruptedThenResumed(t *testing.T) {
	redistest.Require(t, true)
	out := filepath.Join(t.TempDir(), "run")
	args := []string{"run", "--locks", "lua", "--faults", "none", "--seeds", "1-3", "--parallel", "1",
		"--duration", "1500ms", "--out", out, "--no-report"}
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- dispatch(ctx, args, &stdout, &stderr) }()
	// Interrupt once the first scenario finished (its progress line).
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(stderr.String(), "] lua-none-1") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	code := <-done
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	if code != exitInterrupted || !strings.Contains(stdout.String(), "interrupted after ") {
		t.Fatalf("exit %d; want %d and an 'interrupted after' line", code, exitInterrupted)
	}
	if n := strings.Count(stderr.String(), "not run"); n != 0 {
		t.Errorf("%d 'not run' progress lines; want none (one summary line instead)", n)
	}
	sum, err := runner.ReadSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, s := range sum.Scenarios {
		if !s.NotRun {
			ran++
		}
	}
	if len(sum.Scenarios) != 3 || ran == 0 || ran == 3 {
		t.Fatalf("%d rows, %d ran; want 3 rows, some but not all ran", len(sum.Scenarios), ran)
	}
	first := sum.Scenarios[0].ElapsedMs

	// Reusing the directory without --resume or --force is refused.
	code, _, errs := runRunArgs(t, args[1:]...)
	if code != exitBadInput || !strings.Contains(errs, "--resume") {
		t.Fatalf("reused --out: exit %d, %q; want 2 naming --resume", code, errs)
	}
	// A resume with other flags than the run's is refused, naming them
	// (issue 63.1: it rewrote the run's summary into its own rows).
	code, _, errs = runRunArgs(t, "--out", out, "--resume", "--locks", "fenced", "--seeds", "1-3")
	if code != exitBadInput || !strings.Contains(errs, `--locks "fenced" (the run's: "lua")`) || strings.Contains(errs, "--seeds") {
		t.Fatalf("--resume with other --locks: exit %d, %q; want 2 naming --locks (and not --seeds, given the same)", code, errs)
	}
	// The flags not given are the run's own: the resume continues the
	// 3 lua × none scenarios, not the default matrix.
	var out2, err2 bytes.Buffer
	code = dispatch(context.Background(), []string{"run", "--out", out, "--resume", "--parallel", "1", "--no-report"}, &out2, &err2)
	t.Logf("resume stdout:\n%s\nstderr:\n%s", out2.String(), err2.String())
	if code != exitOK {
		t.Fatalf("--resume: exit %d, want 0", code)
	}
	if got := strings.Count(err2.String(), "] lua-none-"); got != 3-ran {
		t.Errorf("--resume ran %d scenarios, want the %d not run", got, 3-ran)
	}
	sum, err = runner.ReadSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sum.Scenarios {
		if s.NotRun || s.Error != "" || !s.AsExpected {
			t.Errorf("%s after --resume: not run %v, error %q, as expected %v", s.ID(), s.NotRun, s.Error, s.AsExpected)
		}
	}
	if len(sum.Scenarios) != 3 || sum.Scenarios[0].ElapsedMs != first {
		t.Errorf("%d rows, first row's elapsed %d (was %d): want 3 rows, the finished one kept as it was",
			len(sum.Scenarios), sum.Scenarios[0].ElapsedMs, first)
	}
}

// TestRunOutRules: --out must be new or empty, unless --force clears it or
// --resume continues it; a file is refused.
func TestRunOutRules(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	used := filepath.Join(dir, "used")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(used, "lua-none-9"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--out", file}, "is a file"},
		{[]string{"--out", used}, "not empty"},
		{[]string{"--out", used, "--resume"}, "nothing to continue"},
		{[]string{"--out", filepath.Join(dir, "new"), "--resume"}, "does not exist"},
		{[]string{"--out", used, "--force", "--resume"}, "exclude each other"},
		{[]string{"--out", filepath.Join(dir, "new"), "--resume", "--detect"}, "not with --detect"},
	} {
		code, _, errs := runRunArgs(t, append([]string{"--locks", "lua", "--faults", "none"}, c.args...)...)
		if code != exitBadInput || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, %q; want 2 with %q", c.args, code, errs, c.want)
		}
	}
	// --force clears nothing before the run is sure to start: here the
	// environment is missing, so the run stops at its preflight, and the
	// stale run directory stays as it was.
	if err := os.WriteFile(filepath.Join(used, runMarker), []byte(`{"run":"0badf00d","note":"a lockproof run directory: lockproof run --force may clear it"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", t.TempDir())
	code, _, errs := runRunArgs(t, "--locks", "lua", "--faults", "none", "--provider", "process", "--out", used, "--force")
	if code != exitEnvironment {
		t.Fatalf("exit %d (%q), want %d", code, errs, exitEnvironment)
	}
	if ents, _ := os.ReadDir(used); len(ents) != 2 {
		t.Errorf("--force with a run that could not start left %d entries in %s, want the 2 it had", len(ents), used)
	}
}

// TestForceClearsOnlyARunDirectory (review, the tool made safe): --force
// refuses a directory lockproof did not make (a home folder's .ssh and a
// source tree were emptied), the root, the home directory and the current
// directory, and clears nothing when a flag or the config is bad; it
// clears a run directory (summary.json, or the marker a run writes first)
// right before the run, and follows no link inside it.
func TestForceClearsOnlyARunDirectory(t *testing.T) {
	precious := t.TempDir()
	for _, f := range []string{".ssh/id_ed25519", "src/main.go"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(precious, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(precious, f), []byte("keep"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	if err := os.WriteFile(filepath.Join(home, "summary.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	for _, c := range []struct {
		out, want string
		extra     []string
	}{
		{precious, "not a run directory", nil},
		{home, "home directory", nil},
		{wd, "current directory", nil},
		{filepath.Dir(wd), "current directory", nil},
		{"/", "root", nil},
		{home, "--seeds", []string{"--seeds", "x"}}, // a bad flag: refused before --out is looked at
	} {
		args := append([]string{"--locks", "lua", "--faults", "none", "--out", c.out, "--force"}, c.extra...)
		code, _, errs := runRunArgs(t, args...)
		if code != exitBadInput || !strings.Contains(errs, c.want) {
			t.Errorf("--out %s --force %v: exit %d, %q; want 2 naming %q", c.out, c.extra, code, errs, c.want)
		}
	}
	for _, f := range []string{".ssh/id_ed25519", "src/main.go"} {
		if b, err := os.ReadFile(filepath.Join(precious, f)); err != nil || string(b) != "keep" {
			t.Errorf("%s after the refused runs: %q, %v", f, b, err)
		}
	}
	if _, err := os.Stat(filepath.Join(home, "summary.json")); err != nil {
		t.Errorf("the home directory was touched: %v", err)
	}

	// A run directory is cleared right before the run, links inside it
	// removed and not followed, and marked as a run directory anew.
	run := filepath.Join(t.TempDir(), "run")
	if _, err := runner.CreateRunDir(run, runner.NewRunID()); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(run, "lua-none-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(precious, filepath.Join(run, "link")); err != nil {
		t.Fatal(err)
	}
	if err := checkOut(run, true, false); err != nil {
		t.Fatalf("a run directory with --force: %v", err)
	}
	var said bytes.Buffer
	if err := prepareOut(run, true, false, &said); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(said.String(), "clearing "+run) || !strings.Contains(said.String(), "lua-none-1") {
		t.Errorf("--force said %q; want what it removes", said.String())
	}
	ents, _ := os.ReadDir(run)
	if len(ents) != 1 || ents[0].Name() != runMarker {
		t.Errorf("after --force: %v, want only %s", ents, runMarker)
	}
	if _, err := os.Stat(filepath.Join(precious, "src/main.go")); err != nil {
		t.Errorf("clearing a link inside the run directory removed what it points to: %v", err)
	}
	// A link to a directory that is not a run directory is judged by its target.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(precious, link); err != nil {
		t.Fatal(err)
	}
	if err := checkOut(link, true, false); err == nil || !strings.Contains(err.Error(), "not a run directory") {
		t.Errorf("--out a link to a precious folder: %v", err)
	}
}

// TestRunPreflight: what the environment lacks is said once, before any
// scenario, with its own exit code.
func TestRunPreflight(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no redis-server, no redis-sentinel
	code, stdout, stderr := runRunArgs(t, "--locks", "lua", "--faults", "none", "--provider", "process", "--out", filepath.Join(t.TempDir(), "r"))
	if code != exitEnvironment || strings.Count(stderr, "\n") != 1 ||
		!strings.Contains(stderr, "redis-server") || !strings.Contains(stderr, "redis-sentinel") || stdout != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q; want %d and one line naming both binaries", code, stdout, stderr, exitEnvironment)
	}
	noDocker := func(context.Context) error { return errors.New("no Docker engine answers") }
	open := func(context.Context, env.Spec) (env.Env, error) { return nil, nil }
	_, err := env.Preflight(context.Background(), env.Options{Kind: env.Docker, Docker: open, DockerCheck: noDocker})
	if !errors.Is(err, env.ErrUnavailable) || !strings.Contains(err.Error(), "Docker") {
		t.Errorf("docker without an engine: %v", err)
	}
	_, err = env.Preflight(context.Background(), env.Options{Docker: open, DockerCheck: noDocker})
	if !errors.Is(err, env.ErrUnavailable) || !strings.Contains(err.Error(), "redis-server") {
		t.Errorf("neither processes nor docker: %v", err)
	}
	// Without a redis-server on PATH the local image has nothing to be
	// built from: docker.Check says so up front (and that no engine
	// answers, on a machine without one), not every scenario's error.
	err = docker.Check(docker.Options{})(context.Background())
	if err == nil || !strings.Contains(err.Error(), "apt-get install -y redis-server") || !strings.Contains(err.Error(), docker.ImageEnvVar) {
		t.Errorf("docker without a redis-server to build from: %v", err)
	}
	if err := docker.Check(docker.Options{Image: "redis:7"})(context.Background()); err != nil && strings.Contains(err.Error(), "redis-server") {
		t.Errorf("docker with an image named: %v", err)
	}
}

func TestHelpAndVersion(t *testing.T) {
	var out, errb bytes.Buffer
	if code := dispatch(context.Background(), []string{"help", "run"}, &out, &errb); code != exitOK ||
		!strings.Contains(errb.String(), "-resume") || !strings.Contains(errb.String(), "-faults") {
		t.Errorf("help run: exit %d, %q; want run's flags", code, errb.String())
	}
	out.Reset()
	if code := dispatch(context.Background(), []string{"--version"}, &out, &errb); code != exitOK ||
		!strings.HasPrefix(out.String(), "lockproof ") || !strings.Contains(out.String(), "go1.") {
		t.Errorf("--version: exit %d, %q", code, out.String())
	}
}

// TestRunTopologyFlag: --topology takes the contract's topologies only,
// and names them when refused.
func TestRunTopologyFlag(t *testing.T) {
	code, _, stderr := runRunArgs(t, "--topology", "ring", "--locks", "lua", "--faults", "none", "--out", filepath.Join(t.TempDir(), "r"))
	if code != exitBadInput || !strings.Contains(stderr, "--topology") || !strings.Contains(stderr, "cluster") {
		t.Errorf("--topology ring: exit %d, %q; want %d naming the topologies", code, stderr, exitBadInput)
	}
}

// TestForceNeedsTheRunsOwnMarker (issue 62.3): a folder that merely holds
// a file named summary.json (a coverage report beside a source tree) is
// not a run directory and --force leaves it alone; a run directory is
// marked when it is made, the marker holding the run's id; an old run
// directory without a marker is cleared only when its summary.json is a
// run's and it holds nothing but a run's files.
func TestForceNeedsTheRunsOwnMarker(t *testing.T) {
	write := func(dir, name, body string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	project := t.TempDir()
	write(project, "summary.json", `{"coverage": 87}`)
	write(project, "src/main.c", "int main(void) { return 0; }\n")
	write(project, "notes.txt", "keep")
	if err := checkOut(project, true, false); err == nil || !strings.Contains(err.Error(), "not a run directory") {
		t.Errorf("--force on a folder with a foreign summary.json: %v; want refused as not a run directory", err)
	}
	for _, f := range []string{"summary.json", "src/main.c", "notes.txt"} {
		if _, err := os.Stat(filepath.Join(project, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}

	// A new run directory: the marker is its first file, with the run's id.
	run := filepath.Join(t.TempDir(), "run")
	if err := prepareOut(run, false, false, io.Discard); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(run, runMarker))
	if err != nil {
		t.Fatal(err)
	}
	var mark struct {
		Run string `json:"run"`
	}
	if err := json.Unmarshal(b, &mark); err != nil || len(mark.Run) < 8 {
		t.Errorf("the marker of a new run directory: %q (%v); want JSON holding the run's id", b, err)
	}
	if err := checkOut(run, true, false); err != nil {
		t.Errorf("--force on a marked run directory: %v", err)
	}
	// A marker that is not one this tool wrote does not make a run directory.
	fake := t.TempDir()
	write(fake, runMarker, "whatever")
	write(fake, "notes.txt", "keep")
	if err := checkOut(fake, true, false); err == nil || !strings.Contains(err.Error(), "not a run directory") {
		t.Errorf("--force on a folder with a foreign marker: %v; want refused", err)
	}

	// An old run directory (no marker): its summary.json is a run's and
	// it holds a run's files only; one more file of the user's and it is
	// refused, naming the file.
	old := t.TempDir()
	write(old, "summary.json", `{"scenarios": [{"lock": "lua", "fault": "none", "seed": 1, "history": "lua-none-1/history.jsonl"}]}`)
	write(old, "lua-none-1/history.jsonl", "")
	write(old, "report.md", "")
	if err := checkOut(old, true, false); err != nil {
		t.Errorf("--force on an old run directory without a marker: %v", err)
	}
	write(old, "notes.txt", "keep")
	if err := checkOut(old, true, false); err == nil || !strings.Contains(err.Error(), "notes.txt") {
		t.Errorf("--force on an old run directory holding notes.txt: %v; want refused naming it", err)
	}
}
