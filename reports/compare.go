package reports

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/lockproof/lockproof/contract"
)

// Diff is what changed between two runs, scenario by scenario (matched by
// lock, fault and seed).
type Diff struct {
	// NotAsPredicted are the new run's scenarios not as predicted (its
	// judged rows' mismatches), whether or not a verdict changed: what
	// makes the new run fail.
	NotAsPredicted []Mismatched `json:"not_as_predicted,omitempty"`
	// NewViolations: properties violated in the new run and not in the old.
	NewViolations []Change `json:"new_violations"`
	// Fixed: properties violated in the old run and holding (or n/a) in
	// the new.
	Fixed []Change `json:"fixed"`
	// Inconclusive: properties whose verdict became unknown (new
	// unknowns): the new run could not tell (a budget ran out, the
	// scenario or its fault failed). A violation that became unknown is
	// not fixed.
	Inconclusive []Change `json:"inconclusive"`
	// RateDrops: cells (lock × fault) where a property predicted to break
	// was found on a smaller share of the seeds than before.
	RateDrops []CellChange `json:"rate_drops"`
	// Slowdowns: cells whose median detection time of a property grew by
	// more than half and by at least half a second.
	Slowdowns []CellChange `json:"slowdowns"`
	// Changed: other verdict changes (to or from unknown, ok to n/a...).
	Changed []Change `json:"changed"`
	// Added and Removed name scenarios present in one run only.
	Added   []string `json:"added"`
	Removed []string `json:"removed"`
	// Topologies are the old and the new run's topologies when they
	// differ: the comparison is then of two deployments, and Sides sets
	// every cell of either run side by side.
	Topologies []string `json:"topologies,omitempty"`
	Sides      []Side   `json:"sides,omitempty"`
}

// Mismatched is one scenario not as predicted: its ID and what the judge
// found (contract.Mismatch texts).
type Mismatched struct {
	Scenario   string   `json:"scenario"`
	Mismatches []string `json:"mismatches"`
}

// Side is one lock × fault of a comparison of topologies: what each
// run's cell found ("—" where the run has no such cell: a fault of one
// topology alone).
type Side struct {
	Cell string `json:"cell"` // lock × fault
	Old  string `json:"old"`
	New  string `json:"new"`
}

// found says what a cell found over its seeds: the properties violated,
// each with its count of seeds, or that all held.
func found(c *CellReport) string {
	if c == nil {
		return "—"
	}
	var parts []string
	seeds := 0
	for _, p := range c.Properties {
		seeds = max(seeds, p.Decided())
		if p.Violated > 0 {
			parts = append(parts, fmt.Sprintf("%s %d/%d", p.Property, p.Violated, p.Decided()))
		}
	}
	out := "violated: " + strings.Join(parts, ", ")
	if len(parts) == 0 {
		out = fmt.Sprintf("all held (%d seeds)", seeds)
	}
	if c.Status == Fail {
		out += " (not as predicted)"
	}
	return out
}

// Change is one property whose verdict changed.
type Change struct {
	Scenario string           `json:"scenario"` // lock/fault/seed-N
	Property string           `json:"property"`
	Old      contract.Verdict `json:"old"`
	New      contract.Verdict `json:"new"`
	Expected contract.Verdict `json:"expected,omitempty"` // in the new run
	Evidence string           `json:"evidence,omitempty"` // from the new run
}

// CellChange is one property of one lock × fault that got worse at being
// caught: found on fewer seeds, or later after the fault.
type CellChange struct {
	Cell     string `json:"cell"` // lock × fault
	Property string `json:"property"`
	// Old and New are "violated on found of decided seeds", and the median
	// detection times when known.
	OldFound    int    `json:"old_found"`
	OldSeeds    int    `json:"old_seeds"`
	NewFound    int    `json:"new_found"`
	NewSeeds    int    `json:"new_seeds"`
	OldMedianMs *int64 `json:"old_median_ms,omitempty"`
	NewMedianMs *int64 `json:"new_median_ms,omitempty"`
}

// Slowdown thresholds: a median detection time that grew by more than
// half and by at least this much is a slowdown (smaller moves are noise of
// a loaded machine).
const slowdownMinMs = 500

func scenarioKey(s *ScenarioReport) string {
	return fmt.Sprintf("%s/%s/seed-%d", s.Lock, s.Fault, s.Seed)
}

// Compare lists what changed from old to new.
func Compare(old, new *Report) Diff {
	var d Diff
	olds := map[string]*ScenarioReport{}
	for _, s := range old.Scenarios {
		olds[scenarioKey(s)] = s
	}
	news := map[string]bool{}
	for _, s := range new.Scenarios {
		if s.Status == Fail {
			m := Mismatched{Scenario: s.ID}
			for _, x := range s.Mismatches {
				m.Mismatches = append(m.Mismatches, x.Text)
			}
			d.NotAsPredicted = append(d.NotAsPredicted, m)
		}
		k := scenarioKey(s)
		news[k] = true
		o, ok := olds[k]
		if !ok {
			d.Added = append(d.Added, k)
			continue
		}
		for _, p := range s.Properties {
			op := o.Property(p.Property)
			if op == nil || op.Verdict == p.Verdict {
				continue
			}
			c := Change{Scenario: k, Property: p.Property, Old: op.Verdict, New: p.Verdict, Expected: p.Expected, Evidence: p.Evidence}
			switch {
			case p.Verdict == contract.Violated:
				d.NewViolations = append(d.NewViolations, c)
			case p.Verdict == contract.Unknown:
				d.Inconclusive = append(d.Inconclusive, c)
			case op.Verdict == contract.Violated:
				d.Fixed = append(d.Fixed, c)
			default:
				d.Changed = append(d.Changed, c)
			}
		}
	}
	for _, s := range old.Scenarios {
		if k := scenarioKey(s); !news[k] {
			d.Removed = append(d.Removed, k)
		}
	}
	if ot, nt := contract.TopologyOf(old.Topology), contract.TopologyOf(new.Topology); ot != nt {
		d.Topologies = []string{ot, nt}
		seen := map[string]bool{}
		for _, c := range old.Cells {
			d.Sides = append(d.Sides, Side{Cell: c.Lock + " × " + c.Fault, Old: found(c), New: found(new.CellOf(c.Lock, c.Fault))})
			seen[c.Lock+"\x00"+c.Fault] = true
		}
		for _, c := range new.Cells {
			if !seen[c.Lock+"\x00"+c.Fault] {
				d.Sides = append(d.Sides, Side{Cell: c.Lock + " × " + c.Fault, Old: "—", New: found(c)})
			}
		}
	}
	for _, c := range new.Cells {
		o := old.CellOf(c.Lock, c.Fault)
		if o == nil {
			continue
		}
		for _, p := range c.Properties {
			op := o.Property(p.Property)
			if op == nil || p.Decided() == 0 || op.Decided() == 0 {
				continue
			}
			ch := CellChange{Cell: c.Lock + " × " + c.Fault, Property: p.Property,
				OldFound: op.Violated, OldSeeds: op.Decided(), NewFound: p.Violated, NewSeeds: p.Decided(),
				OldMedianMs: op.DetectMedianMs, NewMedianMs: p.DetectMedianMs}
			predicted := p.Want == contract.WantViolated || p.Want == contract.WantMay
			if predicted && op.Violated > 0 && p.Rate < op.Rate {
				d.RateDrops = append(d.RateDrops, ch)
			}
			if om, nm := op.DetectMedianMs, p.DetectMedianMs; om != nil && nm != nil && *nm-*om >= slowdownMinMs && *nm*2 > *om*3 {
				d.Slowdowns = append(d.Slowdowns, ch)
			}
		}
	}
	return d
}

// WriteDiff renders a Diff as Markdown.
func WriteDiff(w io.Writer, d Diff) error {
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "# lockproof: changes between runs\n\n")
	if len(d.Topologies) == 2 {
		fmt.Fprintf(b, "The runs are of two topologies, %s (old) and %s (new): each lock under each fault, side by side.\n\n", d.Topologies[0], d.Topologies[1])
		fmt.Fprintf(b, "| lock × fault | %s | %s |\n|---|---|---|\n", d.Topologies[0], d.Topologies[1])
		for _, s := range d.Sides {
			fmt.Fprintf(b, "| %s | %s | %s |\n", mdEscape(s.Cell), mdEscape(s.Old), mdEscape(s.New))
		}
		fmt.Fprintln(b)
	}
	if len(d.NewViolations)+len(d.Fixed)+len(d.Inconclusive)+len(d.Changed)+len(d.Added)+len(d.Removed)+len(d.RateDrops)+len(d.Slowdowns) == 0 {
		fmt.Fprintf(b, "No verdict changed.\n")
	}
	if len(d.NotAsPredicted) > 0 {
		fmt.Fprintf(b, "\n## Not as predicted in the new run (%d)\n\n| scenario | what is not as predicted |\n|---|---|\n", len(d.NotAsPredicted))
		for _, m := range d.NotAsPredicted {
			fmt.Fprintf(b, "| %s | %s |\n", mdEscape(m.Scenario), mdEscape(strings.Join(m.Mismatches, "; ")))
		}
		fmt.Fprintln(b)
	}
	section := func(title string, cs []Change) {
		if len(cs) == 0 {
			return
		}
		fmt.Fprintf(b, "## %s\n\n| scenario | property | old | new | expected | evidence |\n|---|---|---|---|---|---|\n", title)
		for _, c := range cs {
			exp := string(c.Expected)
			if exp == "" {
				exp = "—"
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", mdEscape(c.Scenario), c.Property, c.Old, c.New, exp, mdEscape(c.Evidence))
		}
		fmt.Fprintln(b)
	}
	section(fmt.Sprintf("New violations (%d)", len(d.NewViolations)), d.NewViolations)
	section(fmt.Sprintf("New unknowns: the new run could not tell (%d)", len(d.Inconclusive)), d.Inconclusive)
	cells := func(title string, cs []CellChange) {
		if len(cs) == 0 {
			return
		}
		fmt.Fprintf(b, "## %s\n\n| lock × fault | property | old: found | new: found | old median | new median |\n|---|---|---|---|---|---|\n", title)
		for _, c := range cs {
			med := func(p *int64) string {
				if p == nil {
					return "—"
				}
				return msText(*p)
			}
			fmt.Fprintf(b, "| %s | %s | %d/%d | %d/%d | %s | %s |\n", mdEscape(c.Cell), c.Property,
				c.OldFound, c.OldSeeds, c.NewFound, c.NewSeeds, med(c.OldMedianMs), med(c.NewMedianMs))
		}
		fmt.Fprintln(b)
	}
	cells(fmt.Sprintf("Detection rate drops (%d)", len(d.RateDrops)), d.RateDrops)
	cells(fmt.Sprintf("Detection slowdowns (%d)", len(d.Slowdowns)), d.Slowdowns)
	section(fmt.Sprintf("Fixed (%d)", len(d.Fixed)), d.Fixed)
	section(fmt.Sprintf("Changed verdicts (%d)", len(d.Changed)), d.Changed)
	list := func(title string, ks []string) {
		if len(ks) == 0 {
			return
		}
		fmt.Fprintf(b, "## %s\n\n", title)
		for _, k := range ks {
			fmt.Fprintf(b, "- %s\n", mdEscape(k))
		}
		fmt.Fprintln(b)
	}
	list(fmt.Sprintf("Scenarios only in the new run (%d)", len(d.Added)), d.Added)
	list(fmt.Sprintf("Scenarios only in the old run (%d)", len(d.Removed)), d.Removed)
	if err := b.Flush(); err != nil {
		return fmt.Errorf("write diff: %w", err)
	}
	return nil
}

// WriteAll writes report.md, report.html, junit.xml and report.json into dir
// (the run directory, so that the HTML's relative links resolve).
func WriteAll(dir string, r *Report) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("write report %s: %w", filepath.Join(dir, contract.MarkdownFile), err)
	}
	defer root.Close()
	for _, f := range []struct {
		name  string
		write func(io.Writer, *Report) error
	}{
		{contract.MarkdownFile, WriteMarkdown}, {contract.HTMLFile, WriteHTML}, {contract.JUnitFile, WriteJUnit}, {contract.JSONFile, WriteJSON},
	} {
		if err := writeFile(root, f.name, r, f.write); err != nil {
			return err
		}
	}
	return WritePages(dir, r)
}

// writeFile writes name inside root (the run directory): a link there
// that leads out of it is refused.
func writeFile(root *os.Root, name string, r *Report, write func(io.Writer, *Report) error) (err error) {
	path := filepath.Join(root.Name(), name)
	out, err := root.Create(name)
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	defer func() {
		if cerr := out.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("write report %s: %w", path, cerr))
		}
	}()
	if err := write(out, r); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
