package reports

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/lockproof/lockproof/contract"
)

// WriteMarkdown renders the report as Markdown, fit for a CI step summary
// (which GitHub cuts at 1 MiB): the headline, then what needs a person
// (verdicts not as expected, unknown verdicts and broken files, detection
// regressions), then the matrix with each cell's seeds summed up. Every
// mark is a word: a step summary may be read without an emoji font.
func WriteMarkdown(w io.Writer, r *Report) error {
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "# lockproof safety report\n\n")
	fmt.Fprintf(b, "**%s**: %s\n\n", statusWord(r.Status), mdEscape(r.Headline))
	if slices.Contains(contract.Topologies(), r.Topology) {
		fmt.Fprintf(b, "Topology: **%s** (`lockproof run --topology %s`).\n\n", r.Topology, r.Topology)
	} else if r.Topology != "" {
		// Not one lockproof knows (a summary.json from elsewhere): shown, escaped.
		fmt.Fprintf(b, "Topology: **%s**.\n\n", mdEscape(r.Topology))
	}
	if r.Status != Pass && r.Counts.Unknown > 0 {
		fmt.Fprintf(b, "Unknown verdicts are not passes: a property whose check did not finish is not shown to hold.\n\n")
	}

	if is := unexpectedOf(r); len(is) > 0 {
		fmt.Fprintf(b, "## Not as expected (%d)\n\n| scenario | property | what happened |\n|---|---|---|\n", len(is))
		for _, i := range is {
			fmt.Fprintf(b, "| %s | %s | %s |\n", mdEscape(i.Scenario.ID), i.Property, mdEscape(i.Text))
		}
		fmt.Fprintln(b)
	}
	if is := unknownOf(r); len(is) > 0 {
		fmt.Fprintf(b, "## Unknown (%d)\n\n| scenario | property | why it is not decided |\n|---|---|---|\n", len(is))
		for _, i := range is {
			fmt.Fprintf(b, "| %s | %s | %s |\n", mdEscape(i.Scenario.ID), i.Property, mdEscape(i.Text))
		}
		fmt.Fprintln(b)
	}
	if ss := stalledOf(r); len(ss) > 0 {
		fmt.Fprintf(b, "## Excused by stalls (%d)\n\nA process of the run did not run for a while (it waited for a core, or its runtime paused it): what a pause of its clients may cause is excused near the stall.\n\n| scenario | stalls |\n|---|---|\n", len(ss))
		for _, s := range ss {
			fmt.Fprintf(b, "| %s | %s |\n", mdEscape(s.ID), mdEscape(s.StallNote()))
		}
		fmt.Fprintln(b)
	}
	if r.Counts.Regressions > 0 {
		fmt.Fprintf(b, "## Regressions (%d)\n\n| lock × fault | what fell |\n|---|---|\n", r.Counts.Regressions)
		for _, c := range r.Cells {
			for _, g := range c.Regressions {
				fmt.Fprintf(b, "| %s × %s | %s |\n", mdEscape(c.Lock), mdEscape(c.Fault), mdEscape(g))
			}
		}
		fmt.Fprintln(b)
	}

	if len(r.Cells) > 0 {
		fmt.Fprintf(b, "## Matrix\n\n")
		var legend []string
		for _, p := range contract.Properties() {
			legend = append(legend, p.Letter+" "+p.ID+" "+p.Guarantee)
		}
		fmt.Fprintf(b, "Each cell: the properties violated, on how many of the seeds that decided (%s), or \"held\"; then the cell's status. ", strings.Join(legend, ", "))
		fmt.Fprintf(b, "A violation the guarantees predict is as expected (a known-broken lock caught); FAIL marks a cell not as expected.\n\n")
		fmt.Fprintf(b, "| lock \\ fault |")
		for _, f := range r.Faults {
			fmt.Fprintf(b, " %s |", mdEscape(f))
		}
		fmt.Fprintf(b, "\n|---|")
		for range r.Faults {
			fmt.Fprintf(b, "---|")
		}
		fmt.Fprintln(b)
		for _, l := range r.Locks {
			fmt.Fprintf(b, "| **%s** |", mdEscape(l))
			for _, f := range r.Faults {
				fmt.Fprintf(b, " %s |", markdownCell(r.CellOf(l, f)))
			}
			fmt.Fprintln(b)
		}
		fmt.Fprintln(b)
	}
	fmt.Fprintf(b, "%d scenarios; the HTML report (report.html) has the guarantee sheet and a page per scenario.\n", r.Counts.Scenarios)
	if r.Counts.TraceValidated > 0 {
		fmt.Fprintf(b, "\nTrace validation against the TLA+ model: %d fenced-lock histories validated, %d rejected.\n", r.Counts.TraceValidated, r.Counts.TraceRejected)
	}
	if err := b.Flush(); err != nil {
		return fmt.Errorf("write markdown report: %w", err)
	}
	return nil
}

// markdownCell sums a cell up: "L 9/10 R 10/10 · as predicted", "held ·
// as predicted", "L 1/1 · **FAIL**" (its seeds' judged rows, or a
// regression, say not as predicted).
func markdownCell(c *CellReport) string {
	if c == nil {
		return " "
	}
	var parts []string
	for _, p := range c.Properties {
		n := p.Decided()
		switch {
		case p.Violated > 0:
			parts = append(parts, fmt.Sprintf("%s %d/%d", strings.ToUpper(propLetter(p.Property)), p.Violated, n))
		case p.Unknown > 0:
			parts = append(parts, fmt.Sprintf("%s unknown", strings.ToUpper(propLetter(p.Property))))
		}
	}
	s := "held"
	if len(parts) > 0 {
		s = strings.Join(parts, " ")
	}
	switch c.Status {
	case Fail:
		s += " · **FAIL**"
	case Inconclusive:
		s += " · undecided"
	default:
		s += " · as predicted"
	}
	return s
}

// propLetter is the matrix letter of a property (contract.Property Letter).
func propLetter(id string) string {
	for _, p := range contract.Properties() {
		if p.ID == id {
			return p.Letter
		}
	}
	return id
}

// stalledOf are the scenarios whose verdicts a stall excused.
func stalledOf(r *Report) []*ScenarioReport {
	var out []*ScenarioReport
	for _, s := range r.Scenarios {
		if s.Stalls != nil && len(s.Stalls.Excused) > 0 {
			out = append(out, s)
		}
	}
	return out
}
