package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/reports"
	"github.com/lockproof/lockproof/runner"
)

// reportCommand is `lockproof report DIR` and `lockproof report --compare OLD NEW`.
func reportCommand() command {
	return command{summary: "render the report of a finished run DIR (report.md, report.html, junit.xml, report.json); --compare OLD NEW; --backends DIR... (topologies side by side, lock by lock); --merge --out DIR SHARD...", run: runReport}
}

// runReport renders a run directory's report into it, or compares two runs.
// Exit codes: 0 every verdict as expected (compare: no new violation), 1 some
// verdict not as expected (compare: new violations), 2 bad input, 3 some
// verdict unknown or some scenario's files broken (nothing unexpected).
func runReport(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	compare := fs.Bool("compare", false, "compare two runs: lockproof report --compare OLD NEW")
	backends := fs.Bool("backends", false, "set runs of several topologies side by side, lock by lock: lockproof report --backends DIR...")
	merge := fs.Bool("merge", false, "merge the run directories of a plan's shards (lockproof run --shard K/N) into --out, and report it: lockproof report --merge --out DIR SHARD...")
	out := fs.String("out", "", "with --merge: the run directory to write (new or empty)")
	fs.Usage = func() {
		commandUsage(stderr, fs, []string{
			"lockproof report DIR",
			"lockproof report --compare OLD NEW",
			"lockproof report --backends DIR...",
			"lockproof report --merge --out DIR SHARD...",
		})
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *merge {
		if *compare || *out == "" || fs.NArg() == 0 {
			fmt.Fprintln(stderr, "lockproof report --merge: want --out DIR and the shards' run directories (and not --compare)")
			fs.Usage()
			return exitBadInput
		}
		if _, err := runner.Merge(*out, fs.Args(), true); err != nil {
			fmt.Fprintf(stderr, "lockproof report --merge: %v\n", err)
			return exitBadInput
		}
		fmt.Fprintf(stdout, "merged %d shards into %s\n", fs.NArg(), *out)
		return runReport(ctx, []string{*out}, stdout, stderr)
	}
	if *out != "" {
		fmt.Fprintln(stderr, "lockproof report: --out goes with --merge")
		return exitBadInput
	}
	if *backends {
		if *compare || fs.NArg() == 0 {
			fmt.Fprintln(stderr, "lockproof report --backends: want one or more run directories (and not --compare)")
			return exitBadInput
		}
		return runBackends(fs.Args(), stdout, stderr)
	}
	if *compare {
		if fs.NArg() != 2 {
			fmt.Fprintf(stderr, "lockproof report --compare: want two run directories OLD NEW, got %d\n", fs.NArg())
			fs.Usage()
			return exitBadInput
		}
		return runCompare(fs.Arg(0), fs.Arg(1), stdout, stderr)
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "lockproof report: want one run directory DIR, got %d\n", fs.NArg())
		fs.Usage()
		return exitBadInput
	}
	dir := fs.Arg(0)
	run, err := reports.Load(dir)
	if err != nil {
		fmt.Fprintf(stderr, "lockproof report: %v\n", err)
		return exitBadInput
	}
	rep := reports.Build(run)
	if err := reports.WriteAll(dir, rep); err != nil {
		fmt.Fprintf(stderr, "lockproof report: %v\n", err)
		return exitBadInput
	}
	fmt.Fprintf(stdout, "%s: %s\n", rep.Status, rep.Headline)
	for _, f := range []string{contract.MarkdownFile, contract.HTMLFile, contract.JUnitFile, contract.JSONFile} {
		fmt.Fprintf(stdout, "wrote %s\n", filepath.Join(dir, f))
	}
	fmt.Fprintf(stdout, "wrote a page per scenario (%s in each scenario's directory)\n", contract.ScenarioPageFile)
	switch rep.Status {
	case reports.Fail:
		return exitViolation
	case reports.Inconclusive:
		return exitUnknown
	}
	return exitOK
}

// runBackends writes runs of several topologies side by side
// (reports.WriteBackends). Exit codes as a report's: 1 when a run is not
// as expected, 3 when one is inconclusive.
func runBackends(dirs []string, stdout, stderr io.Writer) int {
	reps := make([]*reports.Report, len(dirs))
	code := exitOK
	for i, dir := range dirs {
		run, err := reports.LoadWith(dir, reports.LoadOptions{SummaryOnly: true})
		if err != nil {
			fmt.Fprintf(stderr, "lockproof report --backends: %v\n", err)
			return exitBadInput
		}
		reps[i] = reports.Build(run)
		switch reps[i].Status {
		case reports.Fail:
			code = exitViolation
		case reports.Inconclusive:
			if code == exitOK {
				code = exitUnknown
			}
		}
	}
	if err := reports.WriteBackends(stdout, dirs, reps); err != nil {
		fmt.Fprintf(stderr, "lockproof report --backends: %v\n", err)
		return exitBadInput
	}
	return code
}

func runCompare(oldDir, newDir string, stdout, stderr io.Writer) int {
	var reps [2]*reports.Report
	for i, dir := range []string{oldDir, newDir} {
		// The verdicts and cells are all in summary.json: a previous
		// night's artifact may keep nothing else.
		run, err := reports.LoadWith(dir, reports.LoadOptions{SummaryOnly: true})
		if err != nil {
			fmt.Fprintf(stderr, "lockproof report --compare: %v\n", err)
			return exitBadInput
		}
		reps[i] = reports.Build(run)
	}
	d := reports.Compare(reps[0], reps[1])
	if err := reports.WriteDiff(stdout, d); err != nil {
		fmt.Fprintf(stderr, "lockproof report --compare: %v\n", err)
		return exitBadInput
	}
	if len(d.NewViolations) > 0 {
		return exitViolation
	}
	return exitOK
}
