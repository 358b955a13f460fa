package reports

import (
	"github.com/lockproof/lockproof/contract"
)

// CellReport is one lock × fault over its seeds: per property how many
// seeds held it and how many broke it, against the prediction. It is the
// unit of the guarantee sheet and of the matrix.
type CellReport struct {
	Lock  string `json:"lock"`
	Fault string `json:"fault"`
	// Scenarios are the IDs of the cell's scenarios, in seed order.
	Scenarios []string `json:"scenarios"`
	// Ran counts the scenarios that ran (an interruption kept NotRun from it).
	Ran        int            `json:"ran"`
	Properties []CellProperty `json:"properties"`
	// Why is the mechanism behind every prediction that is not plain ok,
	// in one sentence per mechanism.
	Why string `json:"why,omitempty"`
	// Regressions say which found rates are too far below the promised
	// rate to be chance.
	Regressions []string `json:"regressions,omitempty"`
	// Status is the cell's: fail when a scenario is not as expected or the
	// cell has a regression, inconclusive when a verdict is unknown.
	Status Status `json:"status"`

	seeds []*ScenarioReport
}

// CellProperty is one property of a cell over its seeds.
type CellProperty struct {
	Property string `json:"property"`
	// Want is the prediction (WantOK, WantViolated, WantMay, WantAny, or ""
	// when the run recorded none).
	Want contract.Want `json:"want,omitempty"`
	// Held, Violated, Unknown and NA count the seeds by verdict (a seed
	// whose scenario or fault failed counts as Unknown, as summary.json's
	// cells leave it out); Rate is Violated over the seeds that decided
	// (Held + Violated + NA).
	Held     int `json:"held"`
	Violated int `json:"violated"`
	Unknown  int `json:"unknown,omitempty"`
	NA       int `json:"na,omitempty"`
	// NotChecked counts the seeds whose rows predate the property.
	NotChecked int     `json:"not_checked,omitempty"`
	Rate       float64 `json:"rate"`
	// Promised is the detection rate the docs promise for a predicted
	// break (0: no promise).
	Promised float64 `json:"promised_rate,omitempty"`
	// DetectMedianMs is the median time from the fault to the first
	// violation over the seeds that found one with a fault window.
	DetectMedianMs *int64 `json:"detect_median_ms,omitempty"`
	// Counterexample is the first scenario that broke the property, and
	// Lines the history lines of its first violation; Evidence says what.
	Counterexample string `json:"counterexample,omitempty"`
	Lines          []int  `json:"lines,omitempty"`
	Evidence       string `json:"evidence,omitempty"`
	// Outcome sums the seeds' outcomes: unexpected if any seed is, else
	// unknown if any is, else as expected (or no-expectation).
	Outcome Outcome `json:"outcome"`
}

// Decided is the number of seeds whose verdict on the property is known.
func (p CellProperty) Decided() int { return p.Held + p.Violated + p.NA }

// Seeds returns the cell's scenarios, in seed order.
func (c *CellReport) Seeds() []*ScenarioReport { return c.seeds }

// Property returns the cell's view of property name, or nil.
func (c *CellReport) Property(name string) *CellProperty {
	for i := range c.Properties {
		if c.Properties[i].Property == name {
			return &c.Properties[i]
		}
	}
	return nil
}

// buildCells groups r's scenarios (already in matrix order) by lock ×
// fault, and takes what summary.json's cells add: the prediction in words,
// the mechanism, the promised rate and the regressions.
func buildCells(r *Report, sum []*contract.Cell) []*CellReport {
	type id struct{ lock, fault string }
	given := map[id]*contract.Cell{}
	for _, c := range sum {
		if c != nil {
			given[id{c.Lock, c.Fault}] = c
		}
	}
	byID := map[id]*CellReport{}
	var cells []*CellReport
	for _, s := range r.Scenarios {
		k := id{s.Lock, s.Fault}
		c, ok := byID[k]
		if !ok {
			c = &CellReport{Lock: s.Lock, Fault: s.Fault}
			byID[k] = c
			cells = append(cells, c)
		}
		c.Scenarios = append(c.Scenarios, s.ID)
		c.seeds = append(c.seeds, s)
	}
	for _, c := range cells {
		g := given[id{c.Lock, c.Fault}]
		if g != nil {
			c.Why, c.Regressions = g.Why, g.Regressions
		}
		c.Status = Pass
		for _, s := range c.seeds {
			if !s.NotRun {
				c.Ran++
			}
			switch {
			case s.Status == Fail:
				c.Status = Fail
			case s.Status == Inconclusive && c.Status == Pass:
				c.Status = Inconclusive
			}
		}
		if len(c.Regressions) > 0 {
			c.Status = Fail
		}
		for _, name := range propertyNames() {
			cp := CellProperty{Property: name, Outcome: AsExpected}
			var det []int64
			sawExpectation := false
			for _, s := range c.seeds {
				if s.NotRun {
					continue
				}
				p := s.Property(name)
				if p == nil {
					continue
				}
				if cp.Want == "" {
					cp.Want = p.Want
				}
				switch {
				case s.failed:
					// Its scenario or fault failed: not a seed of the
					// tallies (summary.json's cells agree).
					cp.Unknown++
				case p.Verdict == contract.OK:
					cp.Held++
				case p.Verdict == contract.Violated:
					cp.Violated++
					if cp.Counterexample == "" {
						cp.Counterexample, cp.Lines, cp.Evidence = s.ID, p.Lines, p.Evidence
					}
					if p.DetectMs != nil {
						det = append(det, *p.DetectMs)
					}
				case p.Verdict == contract.Unknown:
					cp.Unknown++
				case p.Verdict == contract.NotChecked:
					cp.NotChecked++ // newer than the row: not a decided seed
				default:
					cp.NA++
				}
				switch p.Outcome {
				case Unexpected:
					cp.Outcome = Unexpected
				case Undecided:
					if cp.Outcome != Unexpected {
						cp.Outcome = Undecided
					}
				case AsExpected:
					sawExpectation = true
				}
			}
			if cp.Outcome == AsExpected && !sawExpectation {
				cp.Outcome = NoExpected
			}
			if g != nil {
				if w, ok := g.Want[name]; ok {
					cp.Want = w
				}
				cp.Promised = g.Promised[name]
			}
			if n := cp.Decided(); n > 0 {
				cp.Rate = float64(cp.Violated) / float64(n)
			}
			if m, ok := contract.Median(det); ok {
				cp.DetectMedianMs = &m
			}
			c.Properties = append(c.Properties, cp)
		}
	}
	return cells
}

// Cell returns the cell of lock under fault, or nil.
func (r *Report) CellOf(lock, fault string) *CellReport {
	for _, c := range r.Cells {
		if c.Lock == lock && c.Fault == fault {
			return c
		}
	}
	return nil
}
