package runner

import (
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/judge"
	"github.com/lockproof/lockproof/zoo"
)

// TestTrimKeepsTheEvidence: trimming compresses the histories of
// as-expected rows and drops their Porcupine pages, but keeps as written
// each cell's first counterexample per property and every row not as
// expected or unknown; a compressed history reads back op for op.
func TestTrimKeepsTheEvidence(t *testing.T) {
	out := t.TempDir()
	ops := []history.Op{
		{Client: "a", Kind: history.Acquire, Key: "k", Call: 1, Return: 2, Completed: true, Result: history.OK, TTLMillis: 100, Token: 1, HasToken: true},
		{Client: "a", Kind: history.Release, Key: "k", Call: 3, Return: 4, Completed: true, Result: history.OK, Token: 1, HasToken: true},
	}
	row := func(lock, fault string, seed uint64, lease contract.Verdict) *contract.Row {
		r := (&matrix{}).newRow(resolved(Spec{Lock: lock, Fault: fault, Seed: seed}))
		r.Verdicts = verdicts(lease, contract.Violated, contract.NA)
		if lock == "fenced" {
			r.Verdicts[contract.PropResource] = contract.OK
		}
		judge.Row(judge.Named(zoo.Builtin(), r.Lock, r.Fault, contract.TopologySentinel), r)
		dir := filepath.Join(out, r.ID())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := history.WriteFile(filepath.Join(dir, contract.HistoryFile), ops); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, contract.VisualizationFile), []byte("<html>"), 0o644); err != nil {
			t.Fatal(err)
		}
		return r
	}
	rows := []*contract.Row{
		row("set-del", contract.FaultPauseClient, 1, contract.OK),       // first resource counterexample (lease: found elsewhere)
		row("set-del", contract.FaultPauseClient, 2, contract.Violated), // first lease counterexample
		row("set-del", contract.FaultPauseClient, 3, contract.Violated), // trimmed
		row("fenced", contract.FaultNone, 1, contract.OK),               // trimmed
		row("fenced", contract.FaultNone, 2, contract.OK),               // trimmed
		row("fenced", contract.FaultNone, 3, contract.Violated),         // not as expected: kept
	}
	judge.Cells(rows, builtinExps(rows))
	if err := trim(out, rows); err != nil {
		t.Fatal(err)
	}
	wantTrimmed := []bool{false, false, true, true, true, false}
	for i, r := range rows {
		trimmed := strings.HasSuffix(r.History, ".gz")
		if trimmed != wantTrimmed[i] {
			t.Errorf("%s: history %s; trimmed = %v, want %v", r.ID(), r.History, trimmed, wantTrimmed[i])
			continue
		}
		got, err := history.ReadFile(filepath.Join(out, r.History))
		if err != nil {
			t.Fatalf("%s: %v", r.ID(), err)
		}
		for j := range got {
			got[j].Line = 0
		}
		if !reflect.DeepEqual(got, ops) {
			t.Errorf("%s: history reads back %+v", r.ID(), got)
		}
		_, visErr := os.Stat(filepath.Join(out, path.Dir(r.History), contract.VisualizationFile))
		if trimmed != os.IsNotExist(visErr) {
			t.Errorf("%s: trimmed %v but porcupine.html stat: %v", r.ID(), trimmed, visErr)
		}
		if trimmed {
			if _, err := os.Stat(filepath.Join(out, r.ID(), contract.HistoryFile)); !os.IsNotExist(err) {
				t.Errorf("%s: the uncompressed history is still there (%v)", r.ID(), err)
			}
		}
	}
	// Trimming again changes nothing.
	before := rows[2].History
	if err := trim(out, rows); err != nil || rows[2].History != before {
		t.Errorf("second trim: %v, history %s (was %s)", err, rows[2].History, before)
	}
}
