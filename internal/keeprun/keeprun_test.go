package keeprun

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// logTB records what is logged to it.
type logTB struct {
	testing.TB
	name string
	logs []string
}

func (l *logTB) Helper()                    {}
func (l *logTB) Name() string               { return l.name }
func (l *logTB) Log(args ...any)            { l.logs = append(l.logs, fmt.Sprint(args...)) }
func (l *logTB) Logf(f string, args ...any) { l.logs = append(l.logs, fmt.Sprintf(f, args...)) }

// runDir writes a run directory of two scenarios, the second not as
// predicted: claims violated, citing lines 1 and 3, under a pause.
func runDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"summary.json": `{"scenarios":[
 {"lock":"fenced","fault":"none","seed":1,"history":"fenced-none-1/history.jsonl","as_expected":true},
 {"lock":"fenced","fault":"pause-client","seed":2,"history":"fenced-pause-client-2/history.jsonl","as_expected":false,
  "mismatch_details":[{"kind":"verdict","property":"claims","text":"claims violated, predicted ok"}]}]}`,
		"fenced-none-1/history.jsonl": `{"client":"c0-0","op":"acquire","result":"ok"}` + "\n",
		"fenced-pause-client-2/check.json": `{"verdict":"violated","lease":{"verdict":"ok"},
 "claims":{"verdict":"violated","violations":[{"rule":"checked-write","lines":[3,1],"explanation":"the holder acted on a lease that was gone"}]}}`,
		"fenced-pause-client-2/history.jsonl": strings.Join([]string{
			`{"client":"c0-3","op":"acquire","result":"ok","token":7}`,
			`{"op":"fault","name":"pause-client c0-3","call":1,"return":2}`,
			`{"client":"c0-3","op":"write","result":"fail","token":7}`,
			`{"op":"fault","name":"stall c0-1 c0-2","call":3,"return":4}`,
			`{"client":"c0-1","op":"release","result":"ok"}`,
		}, "\n") + "\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestTellSaysWhatDiffered: a scenario not as predicted is told with its
// mismatch, the check's first violation, the lines it cites and the fault
// and stall windows; one as predicted is not told.
func TestTellSaysWhatDiffered(t *testing.T) {
	tb := &logTB{name: "T"}
	Tell(tb, runDir(t))
	if len(tb.logs) != 1 {
		t.Fatalf("told %d times: %q; want the one scenario not as predicted", len(tb.logs), tb.logs)
	}
	got := tb.logs[0]
	for _, want := range []string{
		"fenced × pause-client seed 2",
		"claims violated, predicted ok",
		"claims violated (checked-write, 1 violations): the holder acted on a lease that was gone",
		`line 1: {"client":"c0-3","op":"acquire","result":"ok","token":7}`,
		`line 3: {"client":"c0-3","op":"write","result":"fail","token":7}`,
		`line 2: {"op":"fault","name":"pause-client c0-3"`,
		`line 4: {"op":"fault","name":"stall c0-1 c0-2"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("told:\n%s\nwant it to hold %q", got, want)
		}
	}
	if strings.Contains(got, "line 5") || strings.Contains(got, "fenced × none") {
		t.Errorf("told what was not cited or was as predicted:\n%s", got)
	}
}

// TestKeepCopiesUnderTheVariable: a failed test's run directory is copied
// under $LOCKPROOF_KEEP_FAILED, named after the test; a second failure of
// the same test does not overwrite the first.
func TestKeepCopiesUnderTheVariable(t *testing.T) {
	root := t.TempDir()
	t.Setenv(EnvVar, root)
	dir := runDir(t)
	tb := &logTB{name: "TestX/sub case"}
	keep(tb, dir)
	keep(tb, dir)
	for _, p := range []string{"TestX_sub_case/summary.json", "TestX_sub_case.2/fenced-pause-client-2/history.jsonl"} {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("not kept: %v (logs %q)", err, tb.logs)
		}
	}
}

// TestTellAllFindsRunsInFolders: a test whose run's --out is a folder of
// the kept directory (it must not exist beforehand) has that run told.
func TestTellAllFindsRunsInFolders(t *testing.T) {
	parent := t.TempDir()
	if err := os.Rename(runDir(t), filepath.Join(parent, "run")); err != nil {
		t.Fatal(err)
	}
	tb := &logTB{name: "T"}
	tellAll(tb, parent)
	if len(tb.logs) != 1 || !strings.Contains(tb.logs[0], "fenced × pause-client seed 2") {
		t.Errorf("told %q; want the run in the folder told", tb.logs)
	}
	tb = &logTB{name: "T"}
	tellAll(tb, t.TempDir())
	if len(tb.logs) != 1 || !strings.Contains(tb.logs[0], "holds no run's summary") {
		t.Errorf("told %q; want it said that there was nothing to tell", tb.logs)
	}
}
