package runner

import (
	"encoding/json"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockproof/lockproof/chaos"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/judge"
	"github.com/lockproof/lockproof/zoo"
)

var updateGolden = flag.Bool("update", false, "rewrite runner/testdata/predictions.json from the built-in locks' entries")

// goldenCell is what the matrix predicts for one built-in lock under one
// fault, and where the fault strikes it.
type goldenCell struct {
	Wants    map[string]contract.Want `json:"wants"`
	Rejected bool                     `json:"rejected,omitempty"`
	Why      string                   `json:"why,omitempty"`
	Point    string                   `json:"point,omitempty"`
}

// goldenFile is every built-in lock's predictions and decisive scenario.
type goldenFile struct {
	Cells    map[string]map[string]goldenCell `json:"cells"` // lock, fault
	Decisive []string                         `json:"decisive"`
}

func currentGolden() goldenFile {
	g := goldenFile{Cells: map[string]map[string]goldenCell{}}
	reg := zoo.Builtin()
	faults := []string{"outside-the-contract"}
	for _, f := range chaos.Catalogue() {
		faults = append(faults, f.Name)
	}
	for _, l := range reg.Names() {
		entry, _ := reg.Lookup(l)
		g.Cells[l] = map[string]goldenCell{}
		for _, f := range faults {
			e := judge.Predict(entry, f)
			g.Cells[l][f] = goldenCell{Wants: e.Wants, Rejected: e.Rejected, Why: e.Why, Point: judge.PointOf(entry, f).String()}
			// Where the cluster's prediction differs (PredictOn), it is
			// kept too, as "fault@cluster".
			if c := judge.PredictOn(entry, f, contract.TopologyCluster); c.Why != e.Why || !maps.Equal(c.Wants, e.Wants) {
				g.Cells[l][f+"@"+contract.TopologyCluster] = goldenCell{Wants: c.Wants, Rejected: c.Rejected, Why: c.Why, Point: judge.PointOf(entry, f).String()}
			}
		}
	}
	for _, d := range judge.DecisiveOf(zoo.Builtin()) {
		g.Decisive = append(g.Decisive, d.Lock+" × "+d.Fault+" "+d.Property+" "+d.Point.String())
	}
	return g
}

// TestBuiltinPredictionsAreKept: the built-in locks' predictions, fault
// points and decisive scenarios, as the specimens state them, equal the
// committed file (go test ./runner -run TestBuiltinPredictionsAreKept
// -update rewrites it; review the diff). A prediction changes on purpose,
// never as a side effect of moving code. A lock the file does not hold yet
// is only logged: adding a lock is its file and its registry entry.
func TestBuiltinPredictionsAreKept(t *testing.T) {
	path := filepath.Join("testdata", "predictions.json")
	g := currentGolden()
	if *updateGolden {
		b, err := json.MarshalIndent(g, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var w goldenFile
	if err := json.Unmarshal(b, &w); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for l, row := range w.Cells {
		if _, ok := g.Cells[l]; !ok {
			t.Errorf("%s: in %s but no longer built in (run with -update if it left on purpose)", l, path)
			continue
		}
		for f, c := range row {
			gc := g.Cells[l][f]
			for p := range gc.Wants {
				if _, ok := c.Wants[p]; !ok && c.Wants != nil {
					delete(gc.Wants, p) // a property added since: not recorded yet
				}
			}
			gj, _ := json.Marshal(gc)
			wj, _ := json.Marshal(c)
			if string(gj) != string(wj) {
				t.Errorf("%s × %s:\n got %s\nwant %s", l, f, gj, wj)
			}
		}
	}
	known := map[string]bool{}
	for l := range g.Cells {
		if _, ok := w.Cells[l]; !ok {
			t.Logf("%s: a new lock, not in %s yet (-update records its predictions)", l, path)
			continue
		}
		known[l] = true
	}
	var decisive []string
	for _, d := range g.Decisive {
		if known[strings.SplitN(d, " × ", 2)[0]] {
			decisive = append(decisive, d)
		}
	}
	if gj, wj := strings.Join(decisive, "\n"), strings.Join(w.Decisive, "\n"); gj != wj {
		t.Errorf("decisive scenarios:\n got %s\nwant %s", gj, wj)
	}
	if t.Failed() {
		t.Errorf("%s differs (run with -update to accept)", path)
	}
}
