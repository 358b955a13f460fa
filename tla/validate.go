// Package tla runs TLC's trace validation of a recorded fenced-lock history
// against TraceFencedLock.tla (embedded here), so that a run can say, per
// scenario, whether the model accepts what the real lock did.
//
// TLC is not a Go program: a Validator needs Java and a tla2tools.jar (see
// tla/README.md and tla/run.sh for where to get a verified one). The spec
// files are embedded, so a validator works from any directory.
package tla

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/tla/trace"
)

// specFS holds the trace spec and what it extends.
//
//go:embed TraceFencedLock.tla TraceFencedLock.cfg FencingRule.tla
var specFS embed.FS

// ErrNoTLC is returned when the validator has no jar or no java to run.
var ErrNoTLC = errors.New("tla: TLC not available")

// Validator runs TLC on histories. Its zero value is not usable: Jar is
// required.
type Validator struct {
	// Jar is the path of tla2tools.jar.
	Jar string
	// Java is the java binary; "" means "java" on PATH.
	Java string
	// Timeout bounds one validation; 0 means DefaultTimeout.
	Timeout time.Duration
	// Heap is TLC's maximum heap (java -Xmx), e.g. "1g"; "" means "1g".
	Heap string
	// Trace tunes the history → trace conversion.
	Trace trace.Options

	_ struct{}
}

// DefaultTimeout is Validator.Timeout when zero. A 3,500-op failover
// history takes about 30 s on one core.
const DefaultTimeout = 5 * time.Minute

// Result is the outcome of one validation.
type Result struct {
	// Accepted: some order of the history consistent with real time
	// follows the rules of TraceFencedLock.
	Accepted bool
	// Line is, when not accepted, the history line of the first event no
	// order could take.
	Line int
	// States is the number of distinct states TLC found.
	States int
	// Elapsed is TLC's wall time.
	Elapsed time.Duration
	// Windowed: some op overlaps a failover window, where the model lets
	// two masters serve it (trace.Trace.Windowed).
	Windowed bool
	// Bounded: trace.MaxAhead cut some event's lookahead, so a rejection
	// may come from the bound (trace.Trace.Bounded).
	Bounded bool
	// Said: the event at Line is what the lock said of the key's holders
	// (an inspect or holds op), which no state that the history's other
	// ops allow fits.
	Said bool
}

var (
	reAccepted = regexp.MustCompile(`Invariant TraceNotAccepted is violated`)
	reNoError  = regexp.MustCompile(`Model checking completed\. No error has been found\.`)
	rePending  = regexp.MustCompile(`<<"pending", (\d+)>>`)
	reStates   = regexp.MustCompile(`([\d,]+) distinct states found`)
)

// JarEnv is the environment variable that names tla2tools.jar for the
// tests and the command line (lockproof run and trace take it as their
// --tla-jar default).
const JarEnv = "TLA2TOOLS_JAR"

// FromEnv returns a Validator on the jar $TLA2TOOLS_JAR names, nil when
// the variable is unset (TLC is optional), and an error wrapping ErrNoTLC
// when it names no TLC that can run.
func FromEnv() (*Validator, error) {
	jar := os.Getenv(JarEnv)
	if jar == "" {
		return nil, nil
	}
	v := &Validator{Jar: jar}
	if err := v.Available(); err != nil {
		return nil, fmt.Errorf("%s=%s: %w", JarEnv, jar, err)
	}
	return v, nil
}

// Available says whether the validator can run TLC: its jar is a file and
// its java is found (ErrNoTLC otherwise).
func (v *Validator) Available() error {
	if v.Jar == "" {
		return fmt.Errorf("%w: Validator.Jar is empty", ErrNoTLC)
	}
	if st, err := os.Stat(v.Jar); err != nil || st.IsDir() {
		return fmt.Errorf("%w: %s is not a file", ErrNoTLC, v.Jar)
	}
	if _, err := exec.LookPath(v.java()); err != nil {
		return fmt.Errorf("%w: %v", ErrNoTLC, err)
	}
	return nil
}

func (v *Validator) java() string {
	if v.Java == "" {
		return "java"
	}
	return v.Java
}

// Validate converts ops (a fenced lock's history; trace.ErrNotFenced
// otherwise) and runs TLC on it. An error means no verdict: TLC could not
// run, timed out, or said something else than accept or reject.
func (v *Validator) Validate(ctx context.Context, ops []history.Op) (Result, error) {
	if err := v.Available(); err != nil {
		return Result{}, err
	}
	java := v.java()
	tr, err := trace.Convert(ops, v.Trace)
	if err != nil {
		return Result{}, err
	}
	dir, err := os.MkdirTemp("", "lockproof-trace-")
	if err != nil {
		return Result{}, fmt.Errorf("tla: %w", err)
	}
	defer os.RemoveAll(dir)
	for _, name := range []string{"TraceFencedLock.tla", "TraceFencedLock.cfg", "FencingRule.tla"} {
		b, err := specFS.ReadFile(name)
		if err != nil {
			return Result{}, fmt.Errorf("tla: embedded %s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return Result{}, fmt.Errorf("tla: %w", err)
		}
	}
	var mod bytes.Buffer
	if err := tr.WriteModule(&mod, trace.ModuleName, "the run's history"); err != nil {
		return Result{}, err
	}
	if err := os.WriteFile(filepath.Join(dir, trace.ModuleName+".tla"), mod.Bytes(), 0o644); err != nil {
		return Result{}, fmt.Errorf("tla: %w", err)
	}
	timeout := v.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	heap := v.Heap
	if heap == "" {
		heap = "1g"
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// TLC writes its standard modules (TLC.tla, Integers.tla, ...) to
	// java.io.tmpdir: each run gets its own, or validations side by side
	// (lockproof run --parallel) parse each other's half-written copies.
	cmd := exec.CommandContext(cctx, java, "-XX:+UseParallelGC", "-Xmx"+heap, "-Djava.io.tmpdir="+dir, "-cp", v.Jar, "tlc2.TLC",
		"-workers", "1", "-deadlock", "-metadir", filepath.Join(dir, "meta"),
		"-config", "TraceFencedLock.cfg", "TraceFencedLock.tla")
	cmd.Dir = dir
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	out, runErr := cmd.CombinedOutput()
	res := Result{Elapsed: time.Since(start), Windowed: tr.Windowed(), Bounded: tr.Bounded}
	if m := reStates.FindAllSubmatch(out, -1); len(m) > 0 {
		res.States, _ = strconv.Atoi(string(bytes.ReplaceAll(m[len(m)-1][1], []byte(","), nil)))
	}
	switch {
	case cctx.Err() != nil:
		return res, fmt.Errorf("tla: TLC did not finish within %v: %w", timeout, cctx.Err())
	case reAccepted.Match(out):
		res.Accepted = true
		return res, nil
	case runErr == nil && reNoError.Match(out):
		pending := 1
		if m := rePending.FindAllSubmatch(out, -1); len(m) > 0 {
			pending, _ = strconv.Atoi(string(m[len(m)-1][1]))
		}
		if pending < 1 || pending > len(tr.Events) {
			return res, fmt.Errorf("tla: TLC stopped at event %d of %d", pending, len(tr.Events))
		}
		e := tr.Events[pending-1]
		res.Line = e.Line
		res.Said = e.Kind == string(history.Inspect) || e.Kind == string(history.Holds)
		return res, nil
	default:
		return res, fmt.Errorf("tla: TLC: %v: %s", runErr, tail(out, 800))
	}
}

// tail is the last n bytes of b, for error messages.
func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(bytes.TrimSpace(b))
}
