// Package chaos runs lockproof's chaos scenarios: a lock under one fault, in
// a real environment (package env), its operations recorded into a history
// for the checker.
//
// A scenario (Scenario) names a lock, a fault and a seed. Run makes the
// workload's clients (package workload), runs them, injects the fault once
// (package nemesis) with a window long enough to bite, and writes the history
// file. `go test ./chaos` runs the fenced lock under every fault and checks
// each history against what the guarantees predict (Expect).
package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/chaos/workload"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

// ErrScenario wraps errors about a bad Scenario.
var ErrScenario = errors.New("bad scenario")

// ErrNoBite is the fault error of a scenario whose fault shows no effect:
// nothing held, crashed, promoted, or no op of the clients it cut was
// slowed or lost. The scenario is inconclusive.
var ErrNoBite = errors.New("the fault did not bite")

// Scenario is one run: a lock under one fault.
type Scenario struct {
	// Lock is the name of the lock in Workload.Locks; required (the
	// caller says which lock: chaos imports no registry of its own).
	Lock string
	// Fault is one of Faults(); default "none".
	Fault string
	// Seed seeds the workload and the fault's choices (victims, timing).
	Seed uint64
	// Duration of the workload; default 4s. The fault starts after a fifth of it.
	Duration time.Duration
	// Keys and Clients (per key) of the workload; defaults 1 and 3.
	Keys, Clients int
	// TTL of the leases; default 500ms. Fault windows are sized from it
	// (a pause lasts 3×TTL).
	TTL time.Duration
	// Point is where the fault strikes its victim, for the faults that take
	// one (Fault.Takes): pause-client pauses it right after the reply of its
	// next command named Point.After (e.g. "get": between the GET and the
	// DEL of get-del's release); crash-client crashes it right after the
	// reply of Point.After (e.g. "setnx"), or right before it sends
	// Point.Before (e.g. "pexpire": after a SETNX that succeeded, before its
	// EXPIRE). The zero Point strikes while the victim holds its lock.
	Point contract.Point
	// KeyPrefix keeps scenarios that share an environment apart; default
	// "<lock>-<fault>-<seed>-".
	KeyPrefix string
	// Workload overrides further workload settings (Lock, Keys, Clients,
	// TTL, Seed and KeyPrefix are taken from the scenario).
	Workload workload.Config
	// Until, when set, keeps the workload running past Duration until it
	// reports true of the ops recorded so far (history.Recorder.Ops), up
	// to MaxDuration: a scenario that needs an event (a left holder's
	// lease expiring before another client acquires) waits for that event
	// rather than for a fixed time that a loaded machine may not reach it
	// in. Outcome.UntilMet says whether it held.
	Until func(ops []history.Op) bool
	// MaxDuration bounds a run with Until, from its start; default
	// 10×Duration.
	MaxDuration time.Duration
	// Logger receives progress; nil discards.
	Logger *slog.Logger
	// Redact, when set, redacts the history's texts from outside
	// (history.Options.Redact): the runner's redactor of the run's
	// secrets. Nil writes them as they are.
	Redact func(string) string
}

// Outcome is what a run produced.
type Outcome struct {
	// History is the path of the history file (JSON Lines).
	History string
	// Ops are the recorded operations.
	Ops []history.Op
	// FaultName is the fault window's name in the history ("" for none).
	FaultName string
	// FaultErr is the error of injecting or healing the fault, if any; the
	// history is still complete and worth checking. A fault that did not
	// bite (its evidence shows nothing done) is an error too (ErrNoBite):
	// a scenario whose fault never acted proves nothing.
	FaultErr error
	// FaultEvidence says what the fault did (nemesis.Evidence), for the
	// summary row; the history's fault op says what it did in its window.
	FaultEvidence string
	// UntilMet says that the scenario's Until held before MaxDuration
	// (false without Until).
	UntilMet bool
}

// withDefaults fills in s's defaults and resolves its fault once.
func (s Scenario) withDefaults() (Scenario, Fault, error) {
	if s.Lock == "" {
		return s, Fault{}, errors.New("scenario: Lock is required")
	}
	if s.Fault == "" {
		s.Fault = contract.FaultNone
	}
	if s.Duration == 0 {
		s.Duration = 4 * time.Second
	}
	if s.TTL == 0 {
		s.TTL = 500 * time.Millisecond
	}
	if s.KeyPrefix == "" {
		s.KeyPrefix = fmt.Sprintf("%s-%s-%d-", s.Lock, s.Fault, s.Seed)
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	f, ok := Lookup(s.Fault)
	if !ok {
		return s, Fault{}, fmt.Errorf("%w: Fault %q: want one of %v", ErrScenario, s.Fault, Faults())
	}
	if err := f.CheckPoint(s.Point); err != nil {
		return s, Fault{}, fmt.Errorf("%w: Point: %w", ErrScenario, err)
	}
	if s.Duration < 0 || s.TTL < 0 || s.MaxDuration < 0 {
		return s, Fault{}, fmt.Errorf("%w: Duration, MaxDuration and TTL must be positive", ErrScenario)
	}
	if s.MaxDuration == 0 {
		s.MaxDuration = 10 * s.Duration
	}
	return s, f, nil
}

// Run runs the scenario on e and writes its history to dir/history.jsonl
// (dir is created). The history is complete when Run returns, also on
// error; a fault that failed to inject is reported in Outcome.FaultErr.
func Run(ctx context.Context, e env.Env, sc Scenario, dir string) (Outcome, error) {
	sc, fault, err := sc.withDefaults()
	if err != nil {
		return Outcome{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Outcome{}, fmt.Errorf("run %s/%s: %w", sc.Lock, sc.Fault, err)
	}
	path := filepath.Join(dir, contract.HistoryFile)
	f, err := os.Create(path)
	if err != nil {
		return Outcome{}, fmt.Errorf("run %s/%s: %w", sc.Lock, sc.Fault, err)
	}
	defer f.Close()
	out := Outcome{History: path}

	wc := sc.Workload
	wc.Lock, wc.Keys, wc.Clients, wc.TTL, wc.Seed, wc.KeyPrefix = sc.Lock, sc.Keys, sc.Clients, sc.TTL, sc.Seed, sc.KeyPrefix
	wc.Processes = max(wc.Processes, fault.Processes)
	if fault.Shape.Brief {
		mix := workload.DefaultMix()
		if wc.Mix != nil {
			mix = *wc.Mix
		}
		mix.Reenter, mix.LongWork, mix.Renew = 0, 0, 0
		wc.Mix = &mix
	}
	if wc.Logger == nil {
		wc.Logger = sc.Logger
	}
	wl, err := workload.New(ctx, e, wc)
	if err != nil {
		return out, fmt.Errorf("run %s/%s: %w", sc.Lock, sc.Fault, err)
	}
	defer wl.Close()

	rec := history.NewRecorder(f, history.Options{Redact: sc.Redact})
	start := time.Now()
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	done := make(chan error, 1)
	go func() { done <- wl.Run(wctx, rec) }()

	rctx, cancel := context.WithTimeout(ctx, sc.Duration)
	defer cancel()
	rng := rand.New(rand.NewPCG(sc.Seed, 0xfa17))
	nf, faultErr := inject(rctx, ctx, e, sc, fault, wl, rec, rng)
	out.FaultErr = faultErr
	if nf != nil {
		out.FaultName = nf.Name()
	}
	// The workload runs for Duration and, after a pause that healed late,
	// for two TTLs more: a pause bites through what the woken client does
	// next (its late write, its release), which it must get to do.
	end := start.Add(sc.Duration)
	if fault.Linger {
		if t := time.Now().Add(2 * sc.TTL); t.After(end) {
			end = t
		}
	}
	select {
	case <-time.After(time.Until(end)):
	case <-ctx.Done():
	}
	if sc.Until != nil {
		out.UntilMet = waitUntil(ctx, start.Add(sc.MaxDuration), func() bool { return sc.Until(rec.Ops()) })
	}
	wcancel()
	runErr := <-done
	if err := rec.Close(); err != nil {
		return out, fmt.Errorf("run %s/%s: history: %w", sc.Lock, sc.Fault, err)
	}
	if err := f.Close(); err != nil {
		return out, fmt.Errorf("run %s/%s: history: %w", sc.Lock, sc.Fault, err)
	}
	out.Ops = rec.Ops()
	if c, ok := nf.(stillStands); ok && out.FaultErr == nil {
		// A fault that must still stand when the run ends (one failover,
		// not two): a run that saw something else is inconclusive.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		out.FaultErr = c.Check(cctx)
		cancel()
	}
	if nf != nil {
		// Asked now, not at Stop: a crash armed at a command strikes
		// whenever the victim gets there.
		ev := evidence(nf, out.Ops)
		out.FaultEvidence = ev.Text
		if !ev.Bit && out.FaultErr == nil {
			out.FaultErr = fmt.Errorf("%w: %s", ErrNoBite, ev.Text)
		}
	}
	if runErr != nil {
		return out, fmt.Errorf("run %s/%s: %w", sc.Lock, sc.Fault, runErr)
	}
	return out, nil
}

// inject waits a fifth of the run, then applies the scenario's fault once.
// ctx ends with the run's Duration and bounds every wait for the fault's
// moment; outer is the scenario's own context, which bounds a window that
// opened late (a pause counted from its strike) instead.
func inject(ctx, outer context.Context, e env.Env, sc Scenario, fault Fault, wl *workload.Workload, rec *history.Recorder, rng *rand.Rand) (nemesis.Fault, error) {
	if fault.strike == nil { // none
		return nil, nil
	}
	warm := sc.Duration/5 + time.Duration(rng.Int64N(int64(sc.Duration/10)+1))
	select {
	case <-time.After(warm):
	case <-ctx.Done():
		return nil, nil
	}
	if fault.Processes > 0 && len(wl.Procs) == 0 {
		return nil, fmt.Errorf("%w: %s needs Workload.Processes > 0", ErrScenario, fault.Name)
	}
	s := &striking{ctx: ctx, outer: outer, env: e, sc: sc, wl: wl, rng: rng}
	s.victim = wl.Clients[rng.IntN(len(wl.Clients))]
	group := pick(rng, wl.Clients, (len(wl.Clients)+1)/2)
	var links []*env.Links
	for _, c := range group {
		links = append(links, c.Links)
		s.names = append(s.names, c.Name)
	}
	if len(links) > 0 {
		s.proxies = nemesis.ClientProxies(links...)
	}
	a, err := fault.strike(s)
	if err != nil {
		return a.fault, err
	}
	wctx := ctx
	if a.outer {
		wctx = outer
	}
	sc.Logger.Info("fault", "name", a.fault.Name(), "window", a.window, "struck", a.outer)
	return a.fault, nemesis.Apply(wctx, rec, a.fault, a.window)
}

// waitUntil polls met every 20ms until it holds (true), deadline passes
// or ctx ends (false).
func waitUntil(ctx context.Context, deadline time.Time, met func() bool) bool {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !met() {
		select {
		case <-t.C:
		case <-ctx.Done():
			return met()
		}
	}
	return true
}
