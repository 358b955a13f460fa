package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// mutantsFile is mutants.json (docs/DESIGN.md, "Contract: lockproof
// mutants"): the budget, the control and each mutant with what each
// verifier made of it, and the score.
type mutantsFile struct {
	Started   string `json:"started"`
	ElapsedMs int64  `json:"elapsed_ms"`
	// Revision is the git revision of the source mutated ("+dirty" with
	// changes), absent outside a git work tree.
	Revision    string         `json:"revision,omitempty"`
	CompileOnly bool           `json:"compile_only,omitempty"`
	Budget      *mutantsBudget `json:"budget,omitempty"`
	// Control is the unpatched lock run at the same budget (absent with
	// --control=false).
	Control *mutantResult   `json:"control,omitempty"`
	Mutants []*mutantResult `json:"mutants"`
	Score   mutantsScore    `json:"score"`
}

// mutantsBudget is what each mutant was run at.
type mutantsBudget struct {
	// SimSeeds: lockproof sim --seeds 1-SimSeeds --faults SimFaults
	// ("swarm" unless --sim-faults); 0: the simulation was not run.
	SimSeeds  int    `json:"sim_seeds"`
	SimFaults string `json:"sim_faults,omitempty"`
	// MatrixSeeds: lockproof run --seeds 1-MatrixSeeds --faults
	// MatrixFaults; 0: the matrix was not run.
	MatrixSeeds  int    `json:"matrix_seeds"`
	MatrixFaults string `json:"matrix_faults,omitempty"`
}

// mutantResult is one mutant (or the control) and its verdicts.
type mutantResult struct {
	Name       string `json:"name"`
	File       string `json:"file,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Class      string `json:"class,omitempty"`
	What       string `json:"what,omitempty"`
	Equivalent string `json:"equivalent,omitempty"`
	// Locks are the locks the verifiers ran it as (the control: every
	// lock a mutant ran as). Absent from files written before
	// 2026-12-07: fenced alone.
	Locks []string `json:"locks,omitempty"`
	// Build is "ok", or why the mutant did not build (then no verifier ran).
	Build   string          `json:"build"`
	BuildMs int64           `json:"build_ms"`
	Sim     *verifierResult `json:"sim,omitempty"`
	Matrix  *verifierResult `json:"matrix,omitempty"`
}

// Verdicts of a verifier on a mutant.
const (
	verdictKilled       = "killed"
	verdictSurvived     = "survived"
	verdictInconclusive = "inconclusive"
)

// verifierResult is what one verifier's run made of a mutant.
type verifierResult struct {
	// Verdict is killed (a scenario not as predicted), survived (every
	// one as predicted) or inconclusive (the run could not decide: a
	// verdict unknown, a seed that failed, the run broke or ran out of
	// time; Note says which).
	Verdict string `json:"verdict"`
	// Seed, Fault and Property locate the kill: the first scenario not
	// as predicted (the simulation: the seed's own mix of faults), and the
	// property it broke (or the mismatch's kind, "trace" or "no-bite");
	// Mismatch is its line from summary.json.
	Seed     int64  `json:"seed,omitempty"`
	Fault    string `json:"fault,omitempty"`
	Property string `json:"property,omitempty"`
	Mismatch string `json:"mismatch,omitempty"`
	// Exit is the verifier's exit code; Note says more of a verdict that
	// is not a plain kill or survival.
	Exit int    `json:"exit"`
	Note string `json:"note,omitempty"`
	// Dir is the verifier's run directory, relative to mutants.json.
	Dir       string `json:"dir,omitempty"`
	ElapsedMs int64  `json:"elapsed_ms"`
	// notAsPredicted are the run's scenarios with a mismatch (fault/seed);
	// the control's kill no mutant.
	notAsPredicted []string
	// matrix: the real-time matrix's verdict (its kills name the fault).
	matrix bool
}

// cell is the verdict as the table shows it ("-" for a verifier not run).
func (v *verifierResult) cell() string {
	if v == nil {
		return "-"
	}
	switch v.Verdict {
	case verdictKilled:
		switch {
		case v.Seed == 0:
			return fmt.Sprintf("killed by %s (%s)", v.Property, v.Note)
		case v.matrix:
			return fmt.Sprintf("killed at %s seed %d by %s", v.Fault, v.Seed, v.Property)
		}
		return fmt.Sprintf("killed at seed %d by %s", v.Seed, v.Property)
	case verdictSurvived:
		if v.Note != "" {
			return "survived (" + v.Note + ")"
		}
		return "survived"
	}
	return fmt.Sprintf("%s (%s)", v.Verdict, v.Note)
}

// controlCell is the control's verdict as the table shows it: the
// unpatched lock is as predicted or not.
func (v *verifierResult) controlCell() string {
	switch {
	case v == nil:
		return "-"
	case v.clean():
		return "as predicted"
	case v.Verdict == verdictKilled:
		return "NOT as predicted: " + strings.TrimPrefix(v.cell(), "killed ")
	}
	return v.cell()
}

// cells are a row's verdicts as the tables show them.
func (r *mutantResult) cells(compileOnly bool) (simCell, matrixCell string) {
	switch {
	case r.Build != "ok":
		return "build failed: " + r.Build, "-"
	case compileOnly:
		return "compiles", "-"
	case r.Name == controlName:
		return r.Sim.controlCell(), r.Matrix.controlCell()
	}
	return r.Sim.cell(), r.Matrix.cell()
}

// scoreLine is one verifier's score: Killed of Of mutants.
type scoreLine struct {
	Killed int `json:"killed"`
	Of     int `json:"of"`
}

func (s *scoreLine) String() string {
	if s == nil {
		return "not run"
	}
	if s.Of == 0 {
		return "0 of 0"
	}
	return fmt.Sprintf("%d of %d (%.0f%%)", s.Killed, s.Of, 100*float64(s.Killed)/float64(s.Of))
}

// mutantsScore sums the mutants up. Counted are the mutants that built
// and are not marked equivalent; each verifier's line counts those it
// killed, Both those every verifier that ran killed.
type mutantsScore struct {
	Mutants    int        `json:"mutants"`
	Counted    int        `json:"counted"`
	Equivalent int        `json:"equivalent"`
	BuildFails int        `json:"build_failures"`
	Sim        *scoreLine `json:"sim,omitempty"`
	Matrix     *scoreLine `json:"matrix,omitempty"`
	Both       *scoreLine `json:"both,omitempty"`
	// EquivalentKilled lists the mutants marked equivalent that a verifier
	// killed: their reason is wrong.
	EquivalentKilled []string `json:"equivalent_killed,omitempty"`
	// Survivors lists the counted mutants some verifier that ran did not kill.
	Survivors []string `json:"survivors,omitempty"`
}

// score counts the results.
func score(rs []*mutantResult, b *mutantsBudget) mutantsScore {
	s := mutantsScore{Mutants: len(rs)}
	if b == nil {
		for _, r := range rs {
			if r.Build != "ok" {
				s.BuildFails++
			}
		}
		return s
	}
	if b.SimSeeds > 0 {
		s.Sim = &scoreLine{}
	}
	if b.MatrixSeeds > 0 {
		s.Matrix = &scoreLine{}
	}
	if s.Sim != nil && s.Matrix != nil {
		s.Both = &scoreLine{}
	}
	for _, r := range rs {
		switch {
		case r.Build != "ok":
			s.BuildFails++
			continue
		case r.Equivalent != "":
			s.Equivalent++
			if r.Sim.killed() || r.Matrix.killed() {
				s.EquivalentKilled = append(s.EquivalentKilled, r.Name)
			}
			continue
		}
		s.Counted++
		all := true
		for _, p := range []struct {
			line *scoreLine
			v    *verifierResult
		}{{s.Sim, r.Sim}, {s.Matrix, r.Matrix}} {
			if p.line == nil {
				continue
			}
			p.line.Of++
			if p.v.killed() {
				p.line.Killed++
			} else {
				all = false
			}
		}
		if s.Both != nil {
			s.Both.Of++
			if all {
				s.Both.Killed++
			}
		}
		if !all {
			s.Survivors = append(s.Survivors, r.Name)
		}
	}
	return s
}

func (v *verifierResult) killed() bool { return v != nil && v.Verdict == verdictKilled }

// status is the exit code of the run (runMutants says what each means).
func (f *mutantsFile) status() int {
	s := f.Score
	if s.BuildFails > 0 || len(s.EquivalentKilled) > 0 {
		return exitViolation
	}
	if c := f.Control; c != nil && (c.Build != "ok" || !c.Sim.clean() || !c.Matrix.clean()) {
		return exitViolation
	}
	inconclusive := false
	for _, r := range f.Mutants {
		if r.Build != "ok" || r.Equivalent != "" {
			continue
		}
		for _, v := range []*verifierResult{r.Sim, r.Matrix} {
			switch {
			case v == nil || v.killed():
			case v.Verdict == verdictInconclusive:
				inconclusive = true
			default:
				return exitViolation
			}
		}
	}
	if inconclusive {
		return exitUnknown
	}
	return exitOK
}

// clean reports whether a control's verifier found the lock as predicted
// (or did not run).
func (v *verifierResult) clean() bool {
	return v == nil || v.Verdict == verdictSurvived && v.Note == ""
}

// scoreText is the score in one paragraph.
func (f *mutantsFile) scoreText() string {
	s := f.Score
	if f.CompileOnly {
		return fmt.Sprintf("%d mutants compiled, %d failed to build", s.Mutants-s.BuildFails, s.BuildFails)
	}
	b := f.Budget
	var parts []string
	parts = append(parts, fmt.Sprintf("%d mutants, %d counted (%d equivalent, %d failed to build)", s.Mutants, s.Counted, s.Equivalent, s.BuildFails))
	if s.Sim != nil {
		parts = append(parts, fmt.Sprintf("simulation: %s killed within seeds 1-%d (%s)", s.Sim, b.SimSeeds, b.SimFaults))
	}
	if s.Matrix != nil {
		parts = append(parts, fmt.Sprintf("matrix: %s killed at seeds 1-%d of %s", s.Matrix, b.MatrixSeeds, b.MatrixFaults))
	}
	if s.Both != nil {
		parts = append(parts, fmt.Sprintf("both: %s", s.Both))
	}
	if len(s.EquivalentKilled) > 0 {
		parts = append(parts, "KILLED THOUGH MARKED EQUIVALENT (the reason is wrong): "+strings.Join(s.EquivalentKilled, ", "))
	}
	if c := f.Control; c != nil {
		switch {
		case c.Build != "ok":
			parts = append(parts, "the control did not build: "+c.Build)
		case !c.Sim.clean() || !c.Matrix.clean():
			parts = append(parts, fmt.Sprintf("THE CONTROL (the unpatched lock) WAS NOT AS PREDICTED: simulation %s; matrix %s (those scenarios kill no mutant)", c.Sim.controlCell(), c.Matrix.controlCell()))
		default:
			parts = append(parts, "the control (the unpatched lock) as predicted")
		}
	}
	return strings.Join(parts, "; ")
}

// printMutantsTable prints a line per mutant, then the score.
func printMutantsTable(w io.Writer, f *mutantsFile) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	if f.CompileOnly {
		fmt.Fprintln(tw, "MUTANT\tKIND\tCLASS\tBUILD")
		for _, r := range f.Mutants {
			b, _ := r.cells(true)
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Name, r.Kind, r.Class, b)
		}
		_ = tw.Flush()
		fmt.Fprintln(w, f.scoreText())
		return
	}
	fmt.Fprintln(tw, "MUTANT\tKIND\tCLASS\tSIMULATION\tMATRIX")
	rows := f.Mutants
	if f.Control != nil {
		rows = append([]*mutantResult{f.Control}, rows...)
	}
	for _, r := range rows {
		name := r.Name
		if r.Equivalent != "" {
			name += " (equivalent)"
		}
		simCell, matrixCell := r.cells(f.CompileOnly)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", name, r.Kind, r.Class, simCell, matrixCell)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, f.scoreText())
}

// writeMutantsMarkdown writes mutants.md: the table, with each defect,
// and the score (the nightly's step summary).
func writeMutantsMarkdown(w io.Writer, f *mutantsFile) {
	fmt.Fprintln(w, "## Mutation score")
	fmt.Fprintln(w)
	fmt.Fprintln(w, f.scoreText()+".")
	if f.Revision != "" {
		fmt.Fprintf(w, "\nSource: `%s`.\n", f.Revision)
	}
	fmt.Fprintln(w)
	if f.CompileOnly {
		fmt.Fprintln(w, "| mutant | kind | class | defect | build |")
		fmt.Fprintln(w, "|---|---|---|---|---|")
	} else {
		fmt.Fprintln(w, "| mutant | kind | class | defect | simulation | matrix |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|")
	}
	esc := func(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ") }
	rows := f.Mutants
	if f.Control != nil {
		rows = append([]*mutantResult{f.Control}, rows...)
	}
	for _, r := range rows {
		what := r.What
		if r.Name == controlName {
			what = "the lock as it is"
		}
		if r.Equivalent != "" {
			what += " (equivalent: " + r.Equivalent + ")"
		}
		simCell, matrixCell := r.cells(f.CompileOnly)
		if f.CompileOnly {
			fmt.Fprintf(w, "| `%s` | %s | %s | %s | %s |\n", r.Name, r.Kind, r.Class, esc(what), esc(simCell))
			continue
		}
		fmt.Fprintf(w, "| `%s` | %s | %s | %s | %s | %s |\n", r.Name, r.Kind, r.Class, esc(what), esc(simCell), esc(matrixCell))
	}
}
