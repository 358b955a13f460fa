package runner

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/reports"
)

// Scenario is one scenario of summary.json (the contract's row), with the
// runner's methods.
type Scenario struct {
	contract.Row
}

// ID is the scenario's directory name.
func (s *Scenario) ID() string { return path.Dir(s.History) }

// Verdict returns the verdict of the property of ID prop (contract.PropLease,
// ...); unknown when the row has none.
func (s *Scenario) Verdict(prop string) contract.Verdict {
	if v, ok := s.Verdicts[prop]; ok {
		return v
	}
	return contract.Unknown
}

// Unknown reports whether the row is inconclusive (not
// contract.Row.Conclusive): some verdict is unknown, or the scenario or its
// fault failed (Error, FaultError). A fault that never ran proves nothing,
// so such a row is never "as expected", and the run exits 3 for it unless a
// verdict contradicts the expectation.
func (s *Scenario) Unknown() bool { return !s.Conclusive() }

// Summary is summary.json.
type Summary struct {
	Scenarios []*Scenario `json:"scenarios"`
	// Cells sum the seeds of each lock × fault up (additive to the
	// contract: tools that read only scenarios are unaffected).
	Cells []*contract.Cell `json:"cells,omitempty"`
	// Shard is the part of the plan the run holds (Config.Shard); nil for
	// a whole plan or a merge (contract.Summary's).
	Shard *contract.Shard `json:"shard,omitempty"`
	// Topology is the deployment's shape (Config.Topology); omitted for
	// the Sentinel topology, as files written before the choice read.
	Topology string `json:"topology,omitempty"`
}

// written is a topology as summary.json writes it: "" for the Sentinel
// topology, so that a run on it writes the file it always wrote.
func written(topology string) string {
	if topology == contract.TopologySentinel {
		return ""
	}
	return topology
}

// Status sums a run up as `lockproof run` exits: 0 every verdict as
// expected, 1 some verdict not as expected or some cell's detection rate
// a regression (Cell.Regressions), 3 some verdict unknown (and nothing
// unexpected).
func (s *Summary) Status() int {
	unknown := false
	for _, sc := range s.Scenarios {
		if len(sc.Mismatches) > 0 {
			return contract.ExitViolation
		}
		unknown = unknown || sc.Unknown()
	}
	for _, c := range s.Cells {
		if len(c.Regressions) > 0 {
			return contract.ExitViolation
		}
	}
	if unknown {
		return contract.ExitUnknown
	}
	return contract.ExitOK
}

// summary returns the finished rows in plan order, and the cells once
// judgeCells has run.
func (m *matrix) summary() *Summary {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := &Summary{Scenarios: []*Scenario{}, Cells: m.cells, Shard: m.shard, Topology: written(m.cfg.Topology)}
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
	m.cells = cellsOf(m.rows, exps)
}

// cellsOf judges rows by cell (see judgeCells) and returns the cells in
// plan order; exps[i] is the prediction for rows[i] (its spec's).
func cellsOf(rows []*Scenario, exps []locker.Prediction) []*contract.Cell {
	type id struct{ lock, fault string }
	var order []id
	byCell := map[id][]*Scenario{}
	expOf := map[id]locker.Prediction{}
	for i, r := range rows {
		if r == nil || r.NotRun {
			continue
		}
		k := id{r.Lock, r.Fault}
		if _, ok := byCell[k]; !ok {
			order = append(order, k)
			expOf[k] = exps[i]
		}
		byCell[k] = append(byCell[k], r)
	}
	var cells []*contract.Cell
	for _, k := range order {
		rs := byCell[k]
		exp := expOf[k]
		c := &contract.Cell{Lock: k.lock, Fault: k.fault, Found: map[string]int{}, Rate: map[string]float64{}, DetectMedianMs: map[string]int64{},
			Want: map[string]contract.Want{}, Why: exp.Why}
		for _, p := range contract.PropertyIDs() {
			var det []int64
			anywhere := false // violated on some seed, conclusive or not
			for _, r := range rs {
				if r.Verdict(p) != contract.Violated {
					continue
				}
				anywhere = true
				if r.Unknown() {
					continue // not a seed of the rate: it proves nothing of the fault
				}
				c.Found[p]++
				if d, ok := r.DetectMs[p]; ok {
					det = append(det, d)
				}
			}
			if m, ok := contract.Median(det); ok {
				c.DetectMedianMs[p] = m
			}
			c.Want[p] = exp.Want(p)
			if exp.Want(p) != contract.WantViolated || !anywhere {
				continue
			}
			// Found on some seed: the seeds that missed it are as expected.
			for _, r := range rs {
				if r.DropMismatch(mismatch(p, r.Verdict(p), contract.WantViolated)) {
					r.FoundElsewhere = append(r.FoundElsewhere, p)
					r.AsExpected = len(r.Mismatches) == 0 && !r.Unknown()
				}
			}
		}
		c.AsExpected = true
		for _, r := range rs {
			if !r.Unknown() {
				c.Seeds++
			}
			c.AsExpected = c.AsExpected && r.AsExpected
		}
		for p, n := range c.Found {
			if c.Seeds > 0 {
				c.Rate[p] = float64(n) / float64(c.Seeds)
			}
		}
		promise(c, exp)
		cells = append(cells, c)
	}
	return cells
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

// ReadSummary reads a run directory's summary.json through the one reader
// of the file, the reports' validating one (reports.LoadWith, summary only).
func ReadSummary(dir string) (*Summary, error) {
	run, err := reports.LoadWith(dir, reports.LoadOptions{SummaryOnly: true})
	if err != nil {
		return nil, err
	}
	sum := &Summary{Cells: run.Cells, Shard: run.Shard, Topology: written(run.Topology)}
	for _, sc := range run.Scenarios {
		sum.Scenarios = append(sum.Scenarios, &Scenario{Row: sc.Row})
	}
	return sum, nil
}
