package reports

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/lockproof/lockproof/checker"
)

// glyph is the matrix symbol of a verdict.
func glyph(v checker.Verdict) string {
	switch v {
	case checker.OK:
		return "✅"
	case checker.Violated:
		return "❌"
	case checker.Unknown:
		return "❓"
	}
	return "➖"
}

// statusGlyph is the symbol of a report or scenario status.
func statusGlyph(s Status) string {
	switch s {
	case Pass:
		return "✅"
	case Fail:
		return "❌"
	}
	return "❓"
}

// WriteMarkdown renders the report as Markdown, fit for a CI step summary:
// the headline, the lock × fault matrix, the unexpected and unknown verdicts
// with their evidence, broken files, and every scenario.
func WriteMarkdown(w io.Writer, r *Report) error {
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "# lockproof safety report\n\n")
	fmt.Fprintf(b, "%s **%s**\n\n", statusGlyph(r.Status), r.Headline)
	if r.Status != Pass && r.Counts.Unknown > 0 {
		fmt.Fprintf(b, "Unknown verdicts are not passes: a property whose check did not finish is not shown to hold.\n\n")
	}

	if len(r.Scenarios) > 0 {
		fmt.Fprintf(b, "## Matrix\n\n")
		fmt.Fprintf(b, "Each cell: lease (G1) · resource (G2) · liveness (G3), the worst verdict over its seeds. ")
		fmt.Fprintf(b, "✅ holds · ❌ violated · ❓ unknown · ➖ not applicable · ⚠️ not what was expected (a ❌ without ⚠️ is a known-broken lock caught as expected).\n\n")
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
				fmt.Fprintf(b, " %s |", markdownCell(r.Cell(l, f)))
			}
			fmt.Fprintln(b)
		}
		fmt.Fprintln(b)
	}

	var unexpected, unknown []string
	for _, s := range r.Scenarios {
		for _, p := range s.Properties {
			switch p.Outcome {
			case Unexpected:
				unexpected = append(unexpected, fmt.Sprintf("| %s | %s | %s | %s | %s |",
					mdEscape(s.ID), p.Property, p.Expected, p.Verdict, mdEscape(p.Evidence)))
			case Undecided:
				unknown = append(unknown, fmt.Sprintf("| %s | %s | %s |", mdEscape(s.ID), p.Property, mdEscape(p.Evidence)))
			}
		}
	}
	if len(unexpected) > 0 {
		fmt.Fprintf(b, "## Not as expected\n\n| scenario | property | expected | got | evidence |\n|---|---|---|---|---|\n%s\n\n",
			strings.Join(unexpected, "\n"))
	}
	if len(unknown) > 0 {
		fmt.Fprintf(b, "## Unknown\n\n| scenario | property | why |\n|---|---|---|\n%s\n\n", strings.Join(unknown, "\n"))
	}
	var problems []string
	for _, s := range r.Scenarios {
		for _, p := range s.Problems {
			problems = append(problems, fmt.Sprintf("- %s: %s", mdEscape(s.ID), mdEscape(p)))
		}
	}
	if len(problems) > 0 {
		fmt.Fprintf(b, "## Broken files\n\n%s\n\n", strings.Join(problems, "\n"))
	}

	if len(r.Scenarios) > 0 {
		fmt.Fprintf(b, "## Scenarios\n\n| scenario | lock | fault | seed | ops | rejected | lease | resource | liveness | status |\n|---|---|---|---|---:|---:|---|---|---|---|\n")
		for _, s := range r.Scenarios {
			fmt.Fprintf(b, "| [%s](%s) | %s | %s | %d | %d | %d |", mdEscape(s.ID), s.History, mdEscape(s.Lock), mdEscape(s.Fault), s.Seed, s.Ops, s.Rejected)
			for _, p := range s.Properties {
				fmt.Fprintf(b, " %s |", verdictText(p))
			}
			fmt.Fprintf(b, " %s %s |\n", statusGlyph(s.Status), s.Status)
		}
	}
	if err := b.Flush(); err != nil {
		return fmt.Errorf("write markdown report: %w", err)
	}
	return nil
}

// verdictText is "ok", or "violated (expected ok)" when not as expected.
func verdictText(p PropertyOutcome) string {
	s := string(p.Verdict)
	if p.Outcome == Unexpected {
		s = fmt.Sprintf("⚠️ %s (expected %s)", p.Verdict, p.Expected)
	}
	return s
}

func markdownCell(ss []*ScenarioReport) string {
	if len(ss) == 0 {
		return " "
	}
	s := glyph(worst(ss, "lease")) + glyph(worst(ss, "resource")) + glyph(worst(ss, "liveness"))
	if cellStatus(ss) == Fail {
		s += " ⚠️"
	}
	if len(ss) > 1 {
		s += fmt.Sprintf(" ×%d", len(ss))
	}
	return s
}
