package main

import (
	"context"
	"errors"
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
// and `lockproof trace --validate [--tla-jar JAR] FILE`, both under the
// budgets of check (--timeout, --max-heap).
func traceCommand() command {
	return command{summary: "turn a history FILE into a trace for TLC (tla/TraceFencedLock.tla), or validate it with TLC", run: runTrace}
}

// runTrace converts a history into the trace the TLA+ trace spec reads.
// With --out ending in .tla it writes a module named after the file; with
// another --out it writes JSON Lines; without --out it writes the module
// trace.ModuleName to stdout. Exit 0 written, 2 bad input or failed write,
// 3 when the budget (--timeout for the whole command, --max-heap) ran out
// first: a history of a million keys took 1.7 GB and wrote 238 MB with no
// bound at all. What was written to --out by then is removed; stdout
// cannot take back what it got, and stderr says it is incomplete.
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
	timeout := fs.Duration("timeout", defaultCheckBudget, "wall-clock budget of the whole command: reading, converting, writing and, with --validate, TLC (0: none, TLC then gets its own 5m); past it, exit 3")
	var maxHeap byteSize = defaultMaxHeap
	fs.Var(&maxHeap, "max-heap", "heap budget of the command (not TLC's: see --heap), e.g. 512MiB or 8GiB (0: none); past it, exit 3")
	namesShown := fs.Int("names-shown", defaultNamesShown, "the module's comments name at most this many clients, keys and tokens each, then say how many more (0: all)")
	heap := fs.String("heap", "1g", "with --validate: TLC's heap (java -Xmx)")
	fs.Usage = func() {
		commandUsage(stderr, fs, []string{
			"lockproof trace [--out PATH] [--drift F] [--settle D] [--timeout D] [--max-heap SIZE] [--names-shown N] FILE",
			"lockproof trace --validate [--tla-jar JAR] [--timeout D] [--max-heap SIZE] [--heap SIZE] [--drift F] [--settle D] FILE",
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
	if negativeBounds(stderr, "trace", *timeout, "names-shown", *namesShown) {
		return exitBadInput
	}
	if *validate && *out != "" {
		fmt.Fprintln(stderr, "lockproof trace: --validate writes no --out")
		return exitBadInput
	}
	ppm := max(int64(math.Round(*drift*1e6)), 1)
	start := time.Now()
	ctx, stop := commandBudget(ctx, *timeout, maxHeap)
	defer stop()
	ops, err := history.ReadFileContext(ctx, file)
	if err != nil {
		fmt.Fprintf(stderr, "lockproof trace: %v\n", err)
		return stoppedOr(ctx, err, exitBadInput)
	}
	opts := trace.Options{DriftPPM: ppm, Settle: *settle}
	if *validate {
		// TLC gets what is left of the budget (0: its own default).
		v := &tla.Validator{Jar: *jar, Timeout: left(*timeout, start), Heap: *heap, Trace: opts}
		if _, err := trace.ConvertContext(ctx, ops, opts); err != nil {
			fmt.Fprintf(stderr, "lockproof trace: %s: %v\n", file, err)
			return stoppedOr(ctx, err, exitBadInput)
		}
		return validateTrace(ctx, v, file, ops, stdout, stderr)
	}
	tr, err := trace.ConvertContext(ctx, ops, opts)
	if err != nil {
		fmt.Fprintf(stderr, "lockproof trace: %s: %v\n", file, err)
		return stoppedOr(ctx, err, exitBadInput)
	}
	if err := writeTrace(ctx, tr, *out, file, *namesShown, stdout); err != nil {
		code := stoppedOr(ctx, err, exitBadInput)
		if code == exitUnknown && *out == "" {
			err = fmt.Errorf("%w (stdout got an incomplete trace)", err)
		}
		fmt.Fprintf(stderr, "lockproof trace: %v\n", err)
		return code
	}
	return exitOK
}

// defaultNamesShown bounds the names in a trace module's comments: more
// than a run's clients, far fewer than a history of a million keys.
const defaultNamesShown = 100

// stoppedOr is exitUnknown when err is ctx's end (the budget ran out, the
// process was told to stop), code otherwise.
func stoppedOr(ctx context.Context, err error, code int) int {
	if ctx.Err() != nil && errors.Is(err, context.Cause(ctx)) {
		return exitUnknown
	}
	return code
}

// writeTrace writes tr to out (stdout when ""), as long as ctx lasts: a
// write stopped by it leaves no --out file behind, as a failed one does
// not.
func writeTrace(ctx context.Context, tr *trace.Trace, out, source string, shown int, stdout io.Writer) (err error) {
	if out == "" {
		return tr.WriteModuleNames(stopWriter{ctx, stdout}, trace.ModuleName, source, shown)
	}
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("write trace: %w", err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("write trace %s: %w", out, cerr)
		}
		if err != nil {
			os.Remove(out) // half a trace is no trace; the error says why
		}
	}()
	w := stopWriter{ctx, f}
	if strings.HasSuffix(out, ".tla") {
		return tr.WriteModuleNames(w, strings.TrimSuffix(filepath.Base(out), ".tla"), source, shown)
	}
	return tr.WriteNDJSON(w)
}

// stopWriter is w until ctx is done; then every write fails with ctx's
// cause, so that a long write stops with the budget.
type stopWriter struct {
	ctx context.Context
	w   io.Writer
}

func (s stopWriter) Write(p []byte) (int, error) {
	if s.ctx.Err() != nil {
		return 0, fmt.Errorf("write stopped: %w", context.Cause(s.ctx))
	}
	return s.w.Write(p)
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
