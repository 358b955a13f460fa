package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/lockproof/lockproof/checker"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/internal/jsonfile"
)

// checkCommand is `lockproof check [flags] FILE`.
func checkCommand() command {
	return command{summary: "check one history FILE (exit 0 ok, 1 violated, 2 bad input, 3 unknown)", run: runCheck}
}

// runCheck checks a history file and prints exactly one verdict line on
// stdout; details of violations and undecided keys go to stderr.
func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	drift := fs.Float64("drift", checker.DefaultDrift, "relative clock drift bound, in [0, 1); 0 checks with no drift at all (every bound exact)")
	timeout := fs.Duration("timeout", defaultCheckBudget, "wall-clock budget of the whole command: reading, checking and --html (0: none); what is not decided in time is unknown (exit 3)")
	var maxHeap byteSize = defaultMaxHeap
	fs.Var(&maxHeap, "max-heap", "heap budget of the check, e.g. 512MiB or 8GiB (0: none); past it the check stops, unknown (exit 3)")
	slack := fs.Duration("slack", checker.DefaultLivenessSlack, "liveness slack after a crashed holder's lease surely expired")
	waitBound := fs.Duration("wait-bound", 0, "what the lock promises waiters: a blocking acquire gets the key within this of it being surely free (0: no promise, the waiter-liveness rule is off)")
	fairBypass := fs.Int("fair-bypass", -1, "the lock declares a fair queue: a waiter is overtaken by at most this many waiters that joined after it (0: strict FIFO; -1: no fair queue, the fairness property is n/a)")
	lossBound := fs.Duration("loss-bound", 0, "what the lock promises its holders: a live holder is told (op lost) within this of another client taking its key (0: no promise, the loss-notice rule is off)")
	callSlack := fs.Duration("call-slack", 0, "what the lock promises its callers: a call returns within its context's deadline (op deadline) plus this (0: no promise, the late-return rule is off)")
	closeRefuses := fs.Bool("close-refuses", false, "the lock promises that a closed handle grants nothing: an acquire called after its client's close returned must not be ok (the closed-grant rule)")
	notReentrant := fs.Bool("not-reentrant", false, "the lock refuses its holder's acquire while the holder's lease stands (a plain SET NX): such an acquire is never a nested hold")
	footprint := fs.String("footprint", "", "the bound the lock states for what it keeps in Redis: BASE,HOLD,WAITER,UNKNOWN[,BURIED] (records at most BASE + HOLD×holds + WAITER×waiters + UNKNOWN×unknown calls of the last BURIED, default 1h); empty: no bound, the footprint property is n/a")
	htmlPath := fs.String("html", "", "write Porcupine's HTML visualization to this path")
	jsonPath := fs.String("json", "", "write the check result (check.json format) to this path")
	keysShown := fs.Int("keys-shown", defaultKeysShown, "stderr lists at most this many violations and undecided keys per property, then how many more (0: every one the result keeps)")
	fs.Usage = func() {
		commandUsage(stderr, fs, []string{
			"lockproof check [--drift F] [--slack D] [--timeout D] [--max-heap SIZE] [--keys-shown N] [--html PATH] [--json PATH] FILE",
			"                [--wait-bound D] [--loss-bound D] [--call-slack D] [--fair-bypass N] [--close-refuses] [--not-reentrant] [--footprint B,H,W,U[,G]]",
		})
	}
	// Flags may come before or after FILE.
	path, code, ok := parseFileArgs(fs, args, stderr)
	if !ok {
		return code
	}
	if *drift < 0 {
		fmt.Fprintf(stderr, "lockproof check: --drift %v: must be in [0, 1)\n", *drift)
		return exitBadInput
	}
	if *drift == 0 {
		// checker.Options reads 0 as its default; --drift 0 is exact.
		*drift = checker.NoDrift
	}
	if *slack <= 0 {
		fmt.Fprintf(stderr, "lockproof check: --slack %v: must be positive\n", *slack)
		return exitBadInput
	}
	if *callSlack < 0 {
		fmt.Fprintf(stderr, "lockproof check: --call-slack %v: must not be negative\n", *callSlack)
		return exitBadInput
	}
	if negativeBounds(stderr, "check", *timeout, "keys-shown", *keysShown) {
		return exitBadInput
	}
	fpBound, err := parseFootprint(*footprint)
	if err != nil {
		fmt.Fprintf(stderr, "lockproof check: --footprint %q: %v\n", *footprint, err)
		return exitBadInput
	}
	start := time.Now()
	ctx, stop := commandBudget(ctx, *timeout, maxHeap)
	defer stop()
	ops, err := history.ReadFileContext(ctx, path)
	if err != nil {
		if errors.Is(err, history.ErrStopped) {
			fmt.Fprintf(stdout, "unknown: %v\n", err)
			return exitUnknown
		}
		if errors.Is(err, history.ErrBadInput) {
			fmt.Fprintf(stdout, "bad input: %v\n", err)
		} else {
			fmt.Fprintf(stdout, "bad input: %s: %v\n", path, err)
		}
		return exitBadInput
	}
	opts := checker.Options{Drift: *drift, Timeout: left(*timeout, start), LivenessSlack: *slack, WaitBound: *waitBound, LossBound: *lossBound, MaxHeap: uint64(maxHeap),
		Fair: *fairBypass >= 0, Bypass: max(*fairBypass, 0), CallSlack: *callSlack, CloseRefuses: *closeRefuses,
		NotReentrant: *notReentrant, Footprint: fpBound}
	res, err := checker.Check(ctx, ops, opts)
	if err != nil {
		fmt.Fprintf(stdout, "bad input: %s: %v\n", path, err)
		return exitBadInput
	}
	// The verdict is decided: a failing --html or --json write is reported
	// on stderr but never replaces the verdict line or its exit code (a
	// violation must not turn into "bad input" because a disk was full).
	if *htmlPath != "" {
		opts.Timeout = left(*timeout, start)
		if err := writeHTML(ctx, *htmlPath, ops, res, opts); err != nil {
			fmt.Fprintf(stderr, "lockproof check: %v\n", err)
		}
	}
	if *jsonPath != "" {
		if err := jsonfile.Write(*jsonPath, res); err != nil {
			fmt.Fprintf(stderr, "lockproof check: %v\n", err)
		}
	}
	fmt.Fprintln(stdout, verdictLine(res))
	printDetails(stderr, path, res, *keysShown)
	switch res.Verdict {
	case contract.Violated:
		return exitViolation
	case contract.Unknown:
		return exitUnknown
	}
	return exitOK
}

// verdictLine renders the one line of stdout:
//
//	ok: lease ok, resource ok, liveness n/a (8 ops, 1 keys)
//	violated: lease mutual exclusion: lines 1,2: <explanation> (lease violated, resource n/a, liveness n/a; 2 ops, 1 keys)
//	unknown: lease unknown (key "cart": ...), resource ok, liveness ok (... ops, ... keys)
func verdictLine(r *checker.Result) string {
	var parts []string
	for _, pr := range r.Props {
		parts = append(parts, pr.ID+" "+string(pr.Verdict))
	}
	counts := fmt.Sprintf("%d ops, %d keys", r.Counts.Ops, r.Counts.Keys)
	switch r.Verdict {
	case contract.Violated:
		total := 0
		var first *checker.Violation
		for _, pr := range r.Props {
			total += pr.ViolationCount
			if first == nil && len(pr.Violations) > 0 {
				first = &pr.Violations[0]
			}
		}
		more := ""
		if total > 1 {
			more = fmt.Sprintf("; %d violations in all", total)
		}
		return fmt.Sprintf("violated: %s: lines %s: %s (%s; %s%s)", first.Property, joinInts(first.Lines),
			first.Explanation, strings.Join(parts, ", "), counts, more)
	case contract.Unknown:
		said := false
		for i, pr := range r.Props {
			switch {
			case pr.Verdict != contract.Unknown:
			case len(pr.Undecided) > 0:
				parts[i] += fmt.Sprintf(" (key %q: %s)", pr.Undecided[0].Key, pr.Undecided[0].Reason)
			case !said:
				// No key to name (the budget ran out before the keys
				// were known): the first says why, once.
				parts[i] += " (" + pr.Explanation + ")"
				said = true
			}
		}
	}
	return fmt.Sprintf("%s: %s (%s)", r.Verdict, strings.Join(parts, ", "), counts)
}

// printDetails writes, per property, its violations and undecided keys,
// at most shown of each (0: all the result keeps), and how many more: a
// history of a million keys once printed 116 MB here, a line per key.
func printDetails(w io.Writer, path string, res *checker.Result, shown int) {
	for _, pr := range res.Props {
		vs, us := pr.Violations, pr.Undecided
		if shown > 0 {
			vs, us = vs[:min(shown, len(vs))], us[:min(shown, len(us))]
		}
		for _, v := range vs {
			fmt.Fprintf(w, "%s: %s: %s: key %q: lines %s: %s\n", path, v.Property, v.Rule, v.Key, joinInts(v.Lines), v.Explanation)
		}
		if pr.ViolationCount > len(vs) {
			fmt.Fprintf(w, "%s: %s: %d more violations not listed\n", path, pr.Property, pr.ViolationCount-len(vs))
		}
		for _, u := range us {
			fmt.Fprintf(w, "%s: %s: key %q undecided: %s\n", path, pr.Property, u.Key, u.Reason)
		}
		if n := max(pr.UndecidedCount, len(pr.Undecided)); n > len(us) {
			fmt.Fprintf(w, "%s: %s: %d more keys undecided not listed\n", path, pr.Property, n-len(us))
		}
	}
}

// negativeBounds reports on stderr a negative --timeout or count flag
// (--keys-shown, --names-shown) of command cmd, and whether there was one.
func negativeBounds(stderr io.Writer, cmd string, timeout time.Duration, countFlag string, count int) bool {
	switch {
	case timeout < 0:
		fmt.Fprintf(stderr, "lockproof %s: --timeout %v: must not be negative\n", cmd, timeout)
	case count < 0:
		fmt.Fprintf(stderr, "lockproof %s: --%s %d: must not be negative\n", cmd, countFlag, count)
	default:
		return false
	}
	return true
}

// commandBudget bounds a command that reads a history (check, trace) from
// its start: the wall-clock budget and the heap budget (0: none) stop the
// reading as they stop the check. The Go runtime also collects harder as
// the heap nears its budget, so that garbage is not what trips it.
func commandBudget(ctx context.Context, timeout time.Duration, maxHeap byteSize) (context.Context, func()) {
	if maxHeap > 0 {
		debug.SetMemoryLimit(int64(maxHeap))
	}
	return checker.Budget(ctx, timeout, uint64(maxHeap))
}

// defaultCheckBudget and defaultMaxHeap bound `check` (and `trace`) unless
// told otherwise: a violated history of millions of ops once took 23 GB
// and kept going, and a nightly job must end with a verdict or an
// "unknown". defaultKeysShown bounds what check prints of each
// property's violations and undecided keys.
const (
	defaultCheckBudget = 5 * time.Minute
	defaultMaxHeap     = byteSize(4 << 30)
	defaultKeysShown   = 10
)

// left is what remains of budget since start (0: no budget); at least 1ns
// once spent, so that it never reads as "none".
func left(budget time.Duration, start time.Time) time.Duration {
	if budget == 0 {
		return 0
	}
	return max(budget-time.Since(start), time.Nanosecond)
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

func writeHTML(ctx context.Context, path string, ops []history.Op, res *checker.Result, opts checker.Options) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("html: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("html %s: %w", path, cerr)
		}
	}()
	if err := checker.Visualize(ctx, f, ops, res, opts); err != nil {
		return fmt.Errorf("html %s: %w", path, err)
	}
	return nil
}

// parseFootprint reads --footprint: "BASE,HOLD,WAITER,UNKNOWN[,BURIED]"
// (every count >= 0, BURIED a duration, 1h when left out); "" is no bound.
func parseFootprint(s string) (*checker.FootprintBound, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) != 4 && len(parts) != 5 {
		return nil, fmt.Errorf("want BASE,HOLD,WAITER,UNKNOWN[,BURIED]")
	}
	var n [4]int64
	for i := range n {
		v, err := strconv.ParseInt(strings.TrimSpace(parts[i]), 10, 64)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%q: want a count >= 0", parts[i])
		}
		n[i] = v
	}
	b := &checker.FootprintBound{Base: n[0], PerHold: n[1], PerWaiter: n[2], PerUnknown: n[3], BuriedFor: time.Hour}
	if len(parts) == 5 {
		d, err := time.ParseDuration(strings.TrimSpace(parts[4]))
		if err != nil || d < 0 {
			return nil, fmt.Errorf("%q: want a duration >= 0", parts[4])
		}
		b.BuriedFor = d
	}
	return b, nil
}
