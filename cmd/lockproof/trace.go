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

	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/tla/trace"
)

// traceCommand is `lockproof trace [--out PATH] [--drift F] [--settle D] FILE`.
func traceCommand() command {
	return command{summary: "turn a history FILE into a trace for TLC (tla/TraceFencedLock.tla)", run: runTrace}
}

// runTrace converts a history into the trace the TLA+ trace spec reads.
// With --out ending in .tla it writes a module named after the file; with
// another --out it writes JSON Lines; without --out it writes the module
// trace.ModuleName to stdout. Exit 0 written, 2 bad input or failed write.
func runTrace(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("trace", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "write the trace here: a .tla module (named after the file) or, for any other name, JSON Lines")
	drift := fs.Float64("drift", 0.01, "relative clock drift bound, in (0, 1)")
	settle := fs.Duration("settle", trace.DefaultSettle, "how long after a failover fault ends the old master may still serve clients")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: lockproof trace [--out PATH] [--drift F] [--settle D] FILE")
		fs.PrintDefaults()
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
	tr, err := trace.Convert(ops, trace.Options{DriftPPM: ppm, Settle: *settle})
	if err != nil {
		fmt.Fprintf(stderr, "lockproof trace: %s: %v\n", file, err)
		return exitBadInput
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
