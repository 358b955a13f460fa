package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/internal/keeprun"
	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/reports"
	"github.com/lockproof/lockproof/runner"
)

func runRunArgs(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = dispatch(context.Background(), append([]string{"run"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// Bad flags exit 2 with a message naming the flag, before anything runs.
func TestRunBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--seeds", "5-2"}, "--seeds"},
		{[]string{"--seeds", "x"}, "--seeds"},
		{[]string{"--locks", "lua,nope"}, "--locks"},
		{[]string{"--faults", "earthquake"}, "--faults"},
		{[]string{"--provider", "cloud"}, "--provider"},
		{[]string{"--provider", "byo"}, "--byo-config"},
		{[]string{"--duration", "-1s"}, "--duration"},
		{[]string{"--detect", "--regression", "x"}, "exclude"},
		{[]string{"--save-regression", "../escape"}, "--save-regression"},
		{[]string{"--regression", "no-such-regression", "--regressions", "testdata/none"}, "no-such-regression"},
		{[]string{"stray"}, "unexpected arguments"},
		{[]string{"--no-such-flag"}, "no-such-flag"},
		{[]string{"--mix", "nap=0.5"}, "--mix"},
		{[]string{"--mix", "blocking=2"}, "blocking"},
		{[]string{"--shard", "3/2"}, "--shard"},
		{[]string{"--shard", "1/2", "--detect"}, "--shard"},
		{[]string{"--locks", "lua", "--faults", "none", "--shard", "1/2"}, "holds none"},
		{[]string{"--lock-cmd", `python3 "adapter.py`, "--lock-name", "mine"}, "unterminated"},
		{[]string{"--lock-cmd", "sh adapter.sh"}, "--lock-name"},
		{[]string{"--lock-cmd", "sh adapter.sh", "--lock-name", "fenced"}, "built-in"},
		{[]string{"--lock-cmd", "sh adapter.sh", "--lock-name", "Mine"}, "lowercase"},
		{[]string{"--lock-cmd", "sh adapter.sh", "--lock-name", "mine", "--profile", "strong"}, "--profile"},
		{[]string{"--lock-cmd", "sh adapter.sh", "--lock-name", "mine", "--topology", "cluster"}, "--topology cluster"},
		{[]string{"--lock-cmd", "sh adapter.sh", "--lock-name", "mine", "--faults", "kill-process"}, "child processes"},
		{[]string{"--profile", "lease"}, "go with --lock-cmd"},
		{[]string{"--lock-env", "PYTHONPATH"}, "go with --lock-cmd"},
		{[]string{"--predict", "predictions.json"}, "go with --lock-cmd"},
		{[]string{"--lock-cmd", "sh adapter.sh", "--lock-name", "mine", "--predict", "testdata/no-such-predictions.json"}, "--predict"},
		{[]string{"--lock-cmd", "sh adapter.sh", "--lock-name", "mine", "--lock-env", "LOCKPROOF_SENTINEL_PASSWORD"}, "not the lock's"},
		{[]string{"--lock-cmd", "sh adapter.sh", "--lock-name", "mine", "--lock-env", "A=b"}, "--lock-env"},
		{[]string{"--lock-cmd", "no-such-interpreter-here adapter.py", "--lock-name", "mine"}, "no-such-interpreter-here"},
		{[]string{"--byo-config", "deployment.json", "--plan"}, "goes with --provider byo"},
		{[]string{"--byo-config", "deployment.json", "--provider", "process"}, "goes with --provider byo"},
		{[]string{"--locks", "etcd-mutex", "--plan"}, "choose --topology etcd"},
		{[]string{"--locks", "fenced", "--topology", "zookeeper"}, "it runs on Redis"},
	} {
		// A new --out: a refused run must not make it (issue 63.4: a lock
		// of another store left an empty --out behind).
		out := filepath.Join(t.TempDir(), "run")
		code, _, stderr := runRunArgs(t, append(tc.args, "--out", out)...)
		if code != exitBadInput || !strings.Contains(stderr, tc.want) {
			t.Errorf("run %v: exit %d, stderr %q; want exit 2 naming %q", tc.args, code, stderr, tc.want)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("run %v: --out %s made (%v); want nothing made", tc.args, out, err)
		}
	}
}

// A bad --byo-config file is refused with its file and line, and a bad
// login variable with its name, before anything runs.
func TestRunBadBYOConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		file, text, want string
	}{
		{"unknown.json", "{\n  \"ToxiproxyURL\": \"http://127.0.0.1:1\",\n  \"Pasword\": \"x\"\n}\n", "unknown.json:3: json: unknown field \"Pasword\""},
		{"type.json", "{\n  \"DB\": \"two\"\n}\n", "type.json:2:"},
		{"syntax.json", "{\n\n  \"Data\": [\"a:1\",]\n}\n", "syntax.json:3:"},
		{"two.json", "{}\n{}\n", "two.json:2: more after the JSON object"},
	} {
		code, _, stderr := runRunArgs(t, "--provider", "byo", "--byo-config", write(tc.file, tc.text), "--out", filepath.Join(dir, "out"))
		if code != exitBadInput || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 saying %q", tc.file, code, stderr, tc.want)
		}
	}
	t.Setenv("LOCKPROOF_REDIS_DB", "first")
	code, _, stderr := runRunArgs(t, "--provider", "byo", "--byo-config", write("ok.json", "{}"), "--out", filepath.Join(dir, "out"))
	if code != exitBadInput || !strings.Contains(stderr, "LOCKPROOF_REDIS_DB") {
		t.Errorf("a bad LOCKPROOF_REDIS_DB: exit %d, stderr %q; want exit 2 naming it", code, stderr)
	}
}

// A small real matrix (real redis-server, Sentinel, Toxiproxy): the run
// directory holds summary.json per the contract and the rendered report,
// progress goes to stderr, and the exit code says every verdict matched.
// The nightly workflow's seed syntax ("1-2" here) is accepted.
func TestRunSmallMatrix(t *testing.T) {
	redistest.Require(t, true)
	out := keeprun.Dir(t)
	code, stdout, stderr := runRunArgs(t, "--locks", "lua,fenced", "--faults", "none,pause-client", "--seeds", "1-2",
		"--out", out)
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	if code != exitOK {
		t.Fatalf("exit %d; want 0", code)
	}
	if got := strings.Count(stderr, "] "); got < 8 {
		t.Errorf("%d progress lines on stderr; want one per scenario (8)", got)
	}
	run, err := reports.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Scenarios) != 8 {
		t.Fatalf("%d scenarios in summary.json; want 8", len(run.Scenarios))
	}
	first := map[string]string{} // lock/fault: its first scenario with a violation
	for _, sc := range run.Scenarios {
		k := sc.Lock + "/" + sc.Fault
		if _, ok := first[k]; ok {
			continue
		}
		for _, p := range contract.PropertyIDs() {
			if sc.Verdicts[p] == "violated" {
				first[k] = sc.ID
			}
		}
	}
	if first["lua/pause-client"] == "" {
		t.Errorf("lua × pause-client: no seed found the resource violation")
	}
	for _, sc := range run.Scenarios {
		if len(sc.Problems) > 0 {
			t.Errorf("%s: %v", sc.ID, sc.Problems)
		}
		// Trimmed: a counterexample (lua's first resource violation under
		// pause-client) stays as written, a scenario that went as expected
		// without one is compressed; both read back.
		want := sc.ID + "/history.jsonl.gz"
		if first[sc.Lock+"/"+sc.Fault] == sc.ID {
			want = sc.ID + "/history.jsonl"
		}
		if sc.History != want || sc.Ops == 0 || sc.Plot == nil || sc.Plot.Ops == 0 {
			t.Errorf("%s: history %q (want %q), ops %d", sc.ID, sc.History, want, sc.Ops)
		}
		if _, err := os.Stat(filepath.Join(out, sc.Page)); err != nil {
			t.Errorf("%s: no page of its own: %v", sc.ID, err)
		}
	}
	for _, f := range []string{"report.md", "report.html", "junit.xml"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("report: %v", err)
		}
	}
	sum, err := runner.ReadSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sum.Scenarios {
		if s.Lock == "lua" && s.Fault == "pause-client" && s.Verdicts[contract.PropResource] != "violated" {
			t.Errorf("%s: resource %s; want violated (unfenced data under a pause)", s.ID(), s.Verdicts[contract.PropResource])
		}
	}
}

// TestRunShardsAndMerge: a small real matrix run as two shards (one lock
// each) and merged by "report --merge" exits as a whole run would, with
// every scenario and the report in the merged directory.
func TestRunShardsAndMerge(t *testing.T) {
	redistest.Require(t, true)
	base := t.TempDir()
	var shards []string
	for _, k := range []string{"1/2", "2/2"} {
		out := filepath.Join(base, "shard"+strings.ReplaceAll(k, "/", "of"))
		code, stdout, stderr := runRunArgs(t, "--locks", "lua,fenced", "--faults", "none", "--seeds", "1", "--shard", k, "--no-report", "--out", out)
		if code != exitOK {
			t.Fatalf("shard %s: exit %d\n%s\n%s", k, code, stdout, stderr)
		}
		shards = append(shards, out)
	}
	merged := filepath.Join(base, "merged")
	var out, errb bytes.Buffer
	code := dispatch(context.Background(), append([]string{"report", "--merge", "--out", merged}, shards...), &out, &errb)
	if code != exitOK {
		t.Fatalf("report --merge: exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	run, err := reports.Load(merged)
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Scenarios) != 2 || run.Scenarios[0].Lock != "lua" || run.Scenarios[1].Lock != "fenced" || run.Shard != nil {
		t.Fatalf("merged: %d scenarios, shard %v; want lua then fenced, no shard", len(run.Scenarios), run.Shard)
	}
	for _, sc := range run.Scenarios {
		if len(sc.Problems) > 0 {
			t.Errorf("%s: %v", sc.ID, sc.Problems)
		}
	}
	if _, err := os.Stat(filepath.Join(merged, "report.md")); err != nil {
		t.Errorf("no report: %v", err)
	}
	code = dispatch(context.Background(), []string{"report", "--merge", "--out", filepath.Join(base, "again"), shards[0]}, &out, &errb)
	if code != exitBadInput {
		t.Errorf("a merge with a shard missing: exit %d; want 2", code)
	}
}

// TestRunPauseProcessFromTheBinary: pause-process's child clients are the
// lockproof binary again; the fault must really run from it (it once failed
// in every scenario, the child's arguments refused by the command parser,
// and the row still said "as expected").
func TestRunPauseProcessFromTheBinary(t *testing.T) {
	redistest.Require(t, true)
	bin := buildBinary(t)
	out := filepath.Join(t.TempDir(), "run")
	cmd := exec.Command(bin, "run", "--locks", "fenced", "--faults", "pause-process", "--seeds", "1", "--out", out, "--no-report")
	b, err := cmd.CombinedOutput()
	t.Logf("%s", b)
	if err != nil {
		t.Fatalf("lockproof run: %v", err)
	}
	sum, err := runner.ReadSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Scenarios) != 1 {
		t.Fatalf("%d scenarios, want 1", len(sum.Scenarios))
	}
	s := sum.Scenarios[0]
	if s.Error != "" || s.FaultError != "" || !s.AsExpected || s.Rejected == 0 {
		t.Errorf("%s: error %q, fault error %q, as expected %v, rejected %d; want the fault to run and a late op refused",
			s.ID(), s.Error, s.FaultError, s.AsExpected, s.Rejected)
	}
}

// TestRunLockCmd: lockproof run --lock-cmd runs a lock in another language
// (redis-py's Lock, through its adapter) beside a built-in one, each row
// under its own name, and the report takes both.
func TestRunLockCmd(t *testing.T) {
	redistest.Require(t, true)
	py := redistest.Python(t)
	adapter, err := filepath.Abs(filepath.Join("..", "..", "examples", "redispy", "lockproof_redispy.py"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "run")
	code, stdout, stderr := runRunArgs(t, "--lock-cmd", py+" '"+adapter+"'", "--lock-name", "redis-py", "--profile", "lease",
		"--locks", "lua", "--faults", "none", "--out", out)
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	if code != exitOK {
		t.Fatalf("exit %d; want 0", code)
	}
	sum, err := runner.ReadSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	locks := map[string]bool{}
	for _, s := range sum.Scenarios {
		locks[s.Lock] = true
		if s.Ops == 0 || !s.AsExpected {
			t.Errorf("%s: %d ops, as expected %v", s.ID(), s.Ops, s.AsExpected)
		}
	}
	if !locks["redis-py"] || !locks["lua"] || len(locks) != 2 {
		t.Errorf("rows of %v; want redis-py and lua", locks)
	}
}
