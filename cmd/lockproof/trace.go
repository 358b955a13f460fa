package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/tla"
	"github.com/lockproof/lockproof/tla/trace"
)

// traceCommand is `lockproof trace [--out PATH] [--drift F] [--settle D] FILE`
// and `lockproof trace --validate [--tla-jar JAR] FILE`.
func traceCommand() command {
	return command{summary: "turn a history FILE into a trace for TLC (tla/TraceFencedLock.tla), or validate it with TLC", run: runTrace}
}

// runTrace converts a history into the trace the TLA+ trace spec reads.
// With --out ending in .tla it writes a module named after the file; with
// another --out it writes JSON Lines; without --out it writes the module
// trace.ModuleName to stdout. Exit 0 written, 2 bad input or failed write.
//
// With --validate it runs TLC on the trace instead (tla.Validator, the one
// place that reads TLC's verdict) and prints one line: "accepted: ..."
// (exit 0) or "rejected: FILE:LINE: ..." (exit 1), the history line of the
// first event no real-time order could take; exit 3 when TLC gave no
// verdict (not available, timed out, failed).
func runTrace(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("trace", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "write the trace here: a .tla module (named after the file) or, for any other name, JSON Lines")
	drift := fs.Float64("drift", 0.01, "relative clock drift bound, in (0, 1)")
	settle := fs.Duration("settle", trace.DefaultSettle, "how long after a failover fault ends the old master may still serve clients")
	validate := fs.Bool("validate", false, "run TLC on the trace against tla/TraceFencedLock.tla and print accepted or rejected (with the history line)")
	jar := fs.String("tla-jar", os.Getenv(tla.JarEnv), "with --validate: tla2tools.jar (needs java; default $TLA2TOOLS_JAR)")
	timeout := fs.Duration("timeout", tla.DefaultTimeout, "with --validate: TLC's time budget")
	heap := fs.String("heap", "1g", "with --validate: TLC's heap (java -Xmx)")
	fs.Usage = func() {
		commandUsage(stderr, fs, []string{
			"lockproof trace [--out PATH] [--drift F] [--settle D] FILE",
			"lockproof trace --validate [--tla-jar JAR] [--timeout D] [--heap SIZE] [--drift F] [--settle D] FILE",
		})
	}
	// Flags may come before or after FILE.
	file, code, ok := parseFileArgs(fs, args, stderr)
	if !ok {
		return code
	}
	if !(*drift > 0 && *drift < 1) {
		fmt.Fprintf(stderr, "lockproof trace: --drift %v: must be in (0, 1)\n", *drift)
		return exitBadInput
	}
	if *settle <= 0 {
		fmt.Fprintf(stderr, "lockproof trace: --settle %v: must be positive\n", *settle)
		return exitBadInput
	}
	ppm := max(int64(math.Round(*drift*1e6)), 1)
	ops, err := history.ReadFile(file)
	if err != nil {
		fmt.Fprintf(stderr, "lockproof trace: %v\n", err)
		return exitBadInput
	}
	opts := trace.Options{DriftPPM: ppm, Settle: *settle}
	tr, err := trace.Convert(ops, opts)
	if err != nil {
		fmt.Fprintf(stderr, "lockproof trace: %s: %v\n", file, err)
		return exitBadInput
	}
	if *validate {
		if *out != "" {
			fmt.Fprintln(stderr, "lockproof trace: --validate writes no --out")
			return exitBadInput
		}
		return validateTrace(ctx, &tla.Validator{Jar: *jar, Timeout: *timeout, Heap: *heap, Trace: opts}, file, ops, stdout, stderr)
	}
	if err := writeTrace(tr, *out, file, stdout); err != nil {
		fmt.Fprintf(stderr, "lockproof trace: %v\n", err)
		return exitBadInput
	}
	return exitOK
}

func writeTrace(tr *trace.Trace, out, source string, stdout io.Writer) (err error) {
	if out == "" {
		return tr.WriteModule(stdout, trace.ModuleName, source)
	}
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("write trace: %w", err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("write trace %s: %w", out, cerr)
		}
	}()
	if strings.HasSuffix(out, ".tla") {
		return tr.WriteModule(f, strings.TrimSuffix(filepath.Base(out), ".tla"), source)
	}
	return tr.WriteNDJSON(f)
}

// validateTrace runs v on the history ops of file and prints its verdict.
func validateTrace(ctx context.Context, v *tla.Validator, file string, ops []history.Op, stdout, stderr io.Writer) int {
	res, err := v.Validate(ctx, ops) // ops convert: runTrace checked
	if err != nil {
		fmt.Fprintf(stderr, "lockproof trace: %s: no verdict: %v\n", file, err)
		return exitUnknown
	}
	took := fmt.Sprintf("%d distinct states, %v", res.States, res.Elapsed.Round(time.Millisecond))
	if res.Accepted {
		fmt.Fprintf(stdout, "accepted: some real-time order of %s follows TraceFencedLock (%s)\n", file, took)
		return exitOK
	}
	fmt.Fprintf(stdout, "rejected: %s:%d: the first event TraceFencedLock refused (%s)\n", file, res.Line, took)
	return exitViolation
}
