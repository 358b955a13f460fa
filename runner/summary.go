package runner

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/judge"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/reports"
)

// summary returns the finished rows in plan order, and the cells once
// judgeCells has run.
func (m *matrix) summary() *contract.Summary {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := &contract.Summary{Scenarios: []*contract.Row{}, Cells: m.cells, Shard: m.shard, Topology: contract.WrittenTopology(m.cfg.Topology)}
	for _, r := range m.rows {
		if r != nil {
			s.Scenarios = append(s.Scenarios, r)
		}
	}
	return s
}

// judgeCells sums each lock × fault up over its seeds (Cell) and settles
// the rows of must-break properties: a seed that missed what another seed
// of its cell found is as expected (FoundElsewhere), not a mismatch.
func (m *matrix) judgeCells() {
	m.mu.Lock()
	defer m.mu.Unlock()
	exps := make([]locker.Prediction, len(m.specs))
	for i, s := range m.specs {
		exps[i] = s.exp
	}
	m.cells = judge.Cells(m.rows, exps)
}

// writeSummary writes summary.json atomically (temporary file, rename).
func (m *matrix) writeSummary() error {
	sum := m.summary()
	m.mu.Lock()
	defer m.mu.Unlock()
	p := filepath.Join(m.cfg.Out, contract.SummaryFile)
	if err := writeJSON(p, sum); err != nil {
		m.writeErr = err
		return err
	}
	return nil
}

// writeJSON writes v as indented JSON to p through a temporary file.
func writeJSON(p string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	return nil
}

// writeJSONIn is writeJSON of the file name inside root.
func writeJSONIn(root *os.Root, name string, v any) error {
	p := filepath.Join(root.Name(), name)
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	tmp := name + ".tmp"
	if err := root.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	if err := root.Rename(tmp, name); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	return nil
}

// ReadSummary reads a run directory's summary.json through the one reader
// of the file, the reports' validating one (reports.LoadWith, summary only).
func ReadSummary(dir string) (*contract.Summary, error) {
	run, err := reports.LoadWith(dir, reports.LoadOptions{SummaryOnly: true})
	if err != nil {
		return nil, err
	}
	return summaryOf(run), nil
}

// summaryOf is the summary of a loaded run.
func summaryOf(run *reports.Run) *contract.Summary {
	sum := &contract.Summary{Cells: run.Cells, Shard: run.Shard, Topology: contract.WrittenTopology(run.Topology)}
	for _, sc := range run.Scenarios {
		sum.Scenarios = append(sum.Scenarios, &sc.Row)
	}
	return sum
}
