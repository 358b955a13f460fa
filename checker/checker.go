// Package checker decides whether a lockproof history keeps the guarantees
// of docs/DESIGN.md: lease mutual exclusion (G1), resource safety with
// fencing (G2) and liveness after a holder crashes (G3). docs/DESIGN.md
// ("What the checker decides") states every rule; this package implements
// it.
//
// The history is partitioned by key. Per key, the lease ops and the resource
// ops are each checked for linearizability against a time-aware sequential
// model (see apply) by an exact search, chunk by chunk (see porcupineCheck
// and endStates), and direct rules cover what a sequential model cannot
// see: token order in real time, one owner per token, stale unfenced holders
// and liveness. Every property gets its own Verdict; what the budget
// (Options.Timeout, Options.MaxHeap) or a cancelled context stops is
// Unknown, never OK.
//
// Timing semantics (the history contract): a lease taken (or renewed) in
// [call, return] with length T is surely valid until call+T*(1-drift) and
// surely expired after return+T*(1+drift); an op precedes another when it
// returned at or before the other's call. An op that never returned may take
// effect at any time after its call. Ops with result fail or rejected had no
// effect and are not checked by the models: in particular a failed acquire
// is not taken as proof that the key was held (a lock may fail an acquire
// for other reasons, e.g. a READONLY replica); only liveness looks at them.
// A client that acquires again while its own lease may still be valid is not
// a mutual exclusion violation (reentrance); it may get its own token back,
// any other token must still be above the last one.
//
// Reads with a token are fenced like writes: a fenced resource accepts a
// read under the write rule and the read raises its fence (without that,
// fencing would not protect a read-modify-write). So the fencing rules apply
// to every accepted resource op with a token, read or write: in
// linearization order their tokens never decrease, and one token never
// serves two clients. The stale-holder rule for ops without a token applies
// to accepted writes (a stale holder's unfenced read changes nothing). Every
// accepted read must return the last accepted write's value.
package checker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/metrics"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

// DefaultDrift is the clock drift bound the contract assumes (1%).
const DefaultDrift = 0.01

// NoDrift, as Options.Drift, checks with no drift at all: every bound is
// exact (a lease taken at call with length T is surely valid until
// call+T, inclusive), where 0 means DefaultDrift. Before it, callers
// passed a tiny drift, which moved every bound 1ns the lenient way (an
// acquire at exactly call+T passed mutual exclusion).
const NoDrift = -1.0

// DefaultLivenessSlack is how long after a crashed holder's lease surely
// expired an acquire by another client must succeed. One second covers
// Redis's expiry, scheduling and the acquire's own round trips with margin;
// a tighter slack would risk crying wolf.
const DefaultLivenessSlack = time.Second

// ErrBadOptions is returned (wrapped) for invalid Options.
var ErrBadOptions = errors.New("bad checker options")

// ErrNoOps is returned (wrapped, with history.ErrBadInput) for a history
// without a single lock or resource operation: it checks nothing, so it is
// bad input, never a pass.
var ErrNoOps = errors.New("no operations (a history needs at least one acquire, release, renew, write or read)")

// Options tune Check. The zero value is valid: drift 1%, slack 1s, no timeout.
type Options struct {
	// Drift is the relative clock drift bound between the history's clock and
	// the lock server's; 0 means DefaultDrift, NoDrift none at all.
	// Otherwise it must be in (0, 1).
	Drift float64
	// LivenessSlack is added to a crashed holder's surely-expired time before
	// a failed acquire by another client counts as a liveness violation; 0 means
	// DefaultLivenessSlack.
	LivenessSlack time.Duration
	// WaitBound is what the lock promises waiters: once no other client may
	// hold a key, a blocking acquire (history.Op.Wait) gets it within
	// WaitBound, whatever waiters that died ahead of it in line (their
	// acquires never returned). 0: the lock promises nothing and the
	// waiter-liveness rule is off. See docs/DESIGN.md.
	WaitBound time.Duration
	// LossBound is what the lock promises about its loss notice: once
	// another client took a key, a live holder is told (history op lost)
	// within LossBound. 0: the lock promises nothing and the loss-notice
	// rule is off. See docs/DESIGN.md (loss notice).
	LossBound time.Duration
	// Fair says the lock declares a fair queue: waiters are served in the
	// order they joined, but for at most Bypass waiters that joined later
	// (0: strict FIFO). false: the fairness property is n/a, and waiter
	// liveness counts every other client's hold as one ahead of a waiter.
	Fair   bool
	Bypass int
	// CallSlack is what the lock promises about its calls' contexts:
	// every call (history.Op.Deadline) returns within its context's
	// deadline plus CallSlack. 0: the lock promises nothing and the
	// late-return rule is off. See docs/DESIGN.md (calls).
	CallSlack time.Duration
	// CloseRefuses says the lock promises that a closed handle grants no
	// lease: an acquire called after its client's close returned ok is
	// refused. false: the closed-grant rule is off.
	CloseRefuses bool
	// Footprint is the bound the lock states for what it keeps in Redis
	// for a key (history op footprint): nil states none, and the
	// footprint property is n/a. See docs/DESIGN.md (footprint).
	Footprint *FootprintBound
	// Handoff is the lock's hand-off bound: a release that frees a key
	// while waiters are in line has the head of the line granted within
	// Handoff of its return, with no fault under way. 0: the lock states
	// none, and the promptness property is n/a. See docs/DESIGN.md
	// (promptness).
	Handoff time.Duration
	// NotReentrant says the lock refuses an acquire by the client that
	// holds the key (a plain SET NX): the lease model then takes such an
	// acquire for a new lease, which needs the holder's lease to have
	// possibly expired, never for a nested hold. false: the holder's
	// acquire may nest (a reentrant lock). It also keeps the search small:
	// without it, each acquire of unknown outcome by the holder of an
	// untokened lock may have added a hold, and a reset fault's hundreds of
	// them made a setnx history of 493 lease ops run out of its minute
	// (issue 66).
	NotReentrant bool
	// Timeout bounds the whole Check, every key and every property, the
	// explanations included; 0: no limit. What is not decided in time is
	// unknown (a direct rule's violation found in time still counts).
	Timeout time.Duration
	// MaxHeap bounds the Go heap (bytes) the searches may grow the process
	// to; 0: no limit. Past it the searches stop and what they did not
	// decide is unknown. The heap is sampled every few milliseconds, so set
	// it with headroom below the memory really available (the command line
	// also sets runtime/debug.SetMemoryLimit to it).
	MaxHeap uint64
	// Parallelism bounds the partitions checked at once; 0 means GOMAXPROCS.
	Parallelism int

	// chunkMin overrides chunkOps (tests).
	chunkMin int
}

func (o Options) withDefaults() (Options, error) {
	switch {
	case o.Drift == 0:
		o.Drift = DefaultDrift
	case o.Drift == NoDrift:
		o.Drift = 0
	case o.Drift < 0 || o.Drift >= 1 || o.Drift != o.Drift:
		return o, fmt.Errorf("%w: drift %v not in [0, 1) (NoDrift for none)", ErrBadOptions, o.Drift)
	}
	if o.LivenessSlack == 0 {
		o.LivenessSlack = DefaultLivenessSlack
	}
	if o.WaitBound < 0 {
		return o, fmt.Errorf("%w: negative wait bound %v", ErrBadOptions, o.WaitBound)
	}
	if o.Bypass < 0 {
		return o, fmt.Errorf("%w: negative bypass %d", ErrBadOptions, o.Bypass)
	}
	if o.LossBound < 0 {
		return o, fmt.Errorf("%w: negative loss bound %v", ErrBadOptions, o.LossBound)
	}
	if o.Handoff < 0 {
		return o, fmt.Errorf("%w: negative hand-off bound %v", ErrBadOptions, o.Handoff)
	}
	if o.CallSlack < 0 {
		return o, fmt.Errorf("%w: negative call slack %v", ErrBadOptions, o.CallSlack)
	}
	if o.LivenessSlack < 0 {
		return o, fmt.Errorf("%w: negative liveness slack %v", ErrBadOptions, o.LivenessSlack)
	}
	if o.Timeout < 0 {
		return o, fmt.Errorf("%w: negative timeout %v", ErrBadOptions, o.Timeout)
	}
	if b := o.Footprint; b != nil && (b.Base < 0 || b.PerHold < 0 || b.PerWaiter < 0 || b.PerUnknown < 0 || b.BuriedFor < 0) {
		return o, fmt.Errorf("%w: footprint bound %+v: every term must be >= 0", ErrBadOptions, *b)
	}
	if o.Parallelism <= 0 {
		o.Parallelism = runtime.GOMAXPROCS(0)
	}
	if o.chunkMin <= 0 {
		o.chunkMin = chunkOps
	}
	return o, nil
}

// Check checks a history. It returns an error only for invalid options, an
// op that breaks the history contract (a *history.ParseError), or a history
// without operations (ErrNoOps); errors.Is(err, history.ErrBadInput) holds
// for the last two. A timeout or a cancelled ctx gives Unknown verdicts.
func Check(ctx context.Context, ops []history.Op, opts Options) (*Result, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	// The budget starts before the preparing, which on a history of a
	// million keys takes seconds and most of the check's memory; its
	// grace (stopGrace) lets a check whose budget is already spent still
	// run the direct rules on a small history.
	ctx, stop := Budget(ctx, opts.Timeout, opts.MaxHeap)
	defer stop()
	late, stopLate := lateAfter(ctx, stopGrace)
	defer stopLate()
	p, err := prepareUntil(ops, opts.Drift, late)
	if errors.Is(err, errLate) {
		return notPrepared(ctx, len(ops)), nil
	}
	if err != nil {
		return nil, fmt.Errorf("check history: %w", err)
	}
	if opts.NotReentrant {
		for _, k := range p.keys {
			for _, o := range k.lease {
				o.noNest = true
			}
		}
	}
	if p.counts.LeaseOps+p.counts.ResourceOps == 0 {
		return nil, fmt.Errorf("check history: %w: %w", history.ErrBadInput, ErrNoOps)
	}
	c := &run{ctx: ctx, p: p, opts: opts, model: newModel(ctx, p), props: contract.Properties(), checks: checks(), late: late}
	return c.check(), nil
}

// notPrepared is the result of a check stopped before its history was
// prepared: every property unknown, saying why.
func notPrepared(ctx context.Context, ops int) *Result {
	out := &Result{Verdict: contract.Unknown, Counts: Counts{Ops: ops}}
	for _, prop := range contract.Properties() {
		out.Props = append(out.Props, PropertyResult{ID: prop.ID, Property: prop.Name, Verdict: contract.Unknown,
			Explanation: fmt.Sprintf("not checked: %v (%v)", context.Cause(ctx), errLate)})
	}
	return out
}

// ErrTimeBudget and ErrHeapBudget are the causes of a check stopped by its
// budget (Options.Timeout, Options.MaxHeap): the reasons of undecided keys
// name them.
var (
	ErrTimeBudget = errors.New("time budget exhausted")
	ErrHeapBudget = errors.New("heap budget exhausted")
)

// Budget derives the context a check runs under: done after timeout
// (cause ErrTimeBudget) or once the live heap passes maxHeap bytes (cause
// ErrHeapBudget); 0 is no limit for either. stop releases it. Check
// applies Options.Timeout and Options.MaxHeap with it; a command that
// reads a history first derives its context with it too, so that the
// budget holds from the first line read (reading a history of millions
// of ops is where most of its memory goes).
func Budget(ctx context.Context, timeout time.Duration, maxHeap uint64) (_ context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	var stops []func() bool
	if timeout > 0 {
		t := time.AfterFunc(timeout, func() {
			cancel(fmt.Errorf("%w (%v)", ErrTimeBudget, timeout.Round(time.Millisecond)))
		})
		stops = append(stops, t.Stop)
	}
	var wg sync.WaitGroup
	if maxHeap > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			watchHeap(ctx, maxHeap, cancel)
		}()
	}
	return ctx, func() {
		for _, s := range stops {
			s()
		}
		cancel(nil)
		wg.Wait()
	}
}

// watchHeap samples the live heap until ctx ends and cancels it with
// ErrHeapBudget once the heap passes limit.
func watchHeap(ctx context.Context, limit uint64, cancel context.CancelCauseFunc) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		metrics.Read(sample)
		if v := sample[0].Value; v.Kind() == metrics.KindUint64 && v.Uint64() > limit {
			cancel(fmt.Errorf("%w (%d MiB)", ErrHeapBudget, limit>>20))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// run is one Check call.
type run struct {
	ctx   context.Context
	p     *prepared
	opts  Options
	model porcupine.Model
	// props are the properties decided (contract.Properties), checks
	// their checks (checks).
	props  []contract.Property
	checks map[string]check
	// stalls notes the stall windows (contract.FaultStall) that alone
	// excused something in one check job (windowOpen); nil outside one.
	stalls *stallNote
	// late is up once the budget ran out and its grace (stopGrace) too:
	// keys not checked by then are left unchecked.
	late *atomic.Bool
}

// stallNote is the set of stall ops (indices) that excused what a check
// job would otherwise have found.
type stallNote struct {
	mu  sync.Mutex
	ops map[int]struct{}
}

func (n *stallNote) add(i int) {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ops == nil {
		n.ops = map[int]struct{}{}
	}
	n.ops[i] = struct{}{}
}

// finding is what one property's check found on one key.
type finding struct {
	// verdict is OK, Violated or Unknown, or NA when the key has nothing
	// the property speaks about.
	verdict contract.Verdict
	// undecided says why the verdict is unknown.
	undecided  string
	violations []Violation
	// notChecked: the key was not checked at all (the budget ran out
	// before its turn, and the grace after it too).
	notChecked bool
}

// check is one property's check of one key's ops.
type check func(c *run, k *keyOps) finding

// checks maps each property of contract.Properties, by ID, to its check:
// adding a property is an entry there and its check here; every other
// stage reads the property list.
func checks() map[string]check {
	return map[string]check{
		contract.PropLease:      (*run).checkLease,
		contract.PropResource:   (*run).checkResource,
		contract.PropLiveness:   (*run).checkLiveness,
		contract.PropClaims:     (*run).checkClaims,
		contract.PropNotice:     noticeOnShared((*run).checkNotice),
		contract.PropFairness:   (*run).checkFairness,
		contract.PropCalls:      (*run).checkCalls,
		contract.PropFootprint:  (*run).checkFootprint,
		contract.PropPromptness: exclusiveOnly((*run).checkPromptness),
	}
}

// noticeOnShared is the loss-notice check f, which on a key with modes
// decides only when the lock states no loss bound (the false-notice rule
// alone: its loss-notice rule assumes one holder at a time).
func noticeOnShared(f check) check {
	return func(c *run, k *keyOps) finding {
		if c.opts.LossBound > 0 {
			return exclusiveOnly(f)(c, k)
		}
		return f(c, k)
	}
}

// exclusiveOnly is f on a key of exclusive holds; on a key with modes
// (shared.go) a property f would judge is Unknown, never a pass: f
// assumes one holder at a time.
func exclusiveOnly(f check) check {
	return func(c *run, k *keyOps) finding {
		r := f(c, k)
		if r.verdict == contract.NA || !sharedKey(k) {
			return r
		}
		return undecidedShared(k)
	}
}

// checkLease decides G1 on a key: the lease model (Porcupine), the token
// rules and the inspect rules (what the lock said of the key's holders);
// on a key with modes, the rules rw-exclusion and permits (shared.go).
func (c *run) checkLease(k *keyOps) finding {
	if sharedKey(k) {
		return c.checkSharedLease(k)
	}
	v, undecided, vs := c.porcupineCheck(k.key, k.lease, contract.PropLeaseName)
	if v == contract.NA && len(k.lease) > 0 {
		v = contract.OK // only ops the model skips (failed attempts): nothing broke
	}
	vs = append(vs, c.tokenChecks(k)...)
	vs = append(vs, c.inspectChecks(k)...)
	if v == contract.NA && len(k.inspects) > 0 {
		v = contract.OK // the inspects were held to a key no lease op touched
	}
	return finding{verdict: v, undecided: undecided, violations: vs}
}

// checkResource decides G2 on a key: the register model (Porcupine) and the direct rules.
func (c *run) checkResource(k *keyOps) finding {
	v, undecided, vs := c.porcupineCheck(k.key, k.resource, contract.PropResourceName)
	if v == contract.NA && len(k.resource) > 0 {
		v = contract.OK // only ops the model skips (refused ones): nothing broke
	}
	return finding{verdict: v, undecided: undecided, violations: append(vs, c.resourceDirect(k)...)}
}

// checkLiveness decides G3 on a key: crashed holders and waiters.
func (c *run) checkLiveness(k *keyOps) finding {
	var vs []Violation
	var checked bool
	if sharedKey(k) {
		vs, checked = c.sharedLiveness(k)
	} else {
		vs, checked = c.liveness(k)
	}
	wv, wchecked := c.waiterLiveness(k)
	f := finding{verdict: contract.NA, violations: append(vs, wv...)}
	if checked || wchecked {
		f.verdict = contract.OK
	}
	return f
}

// keyBatch is how many keys are checked between two folds of their
// findings into the result. Folding only after every key kept a finding
// (and a stall note) per key and property for the whole history: hundreds
// of MiB on a history of a million keys, past any heap budget.
const keyBatch = 1024

// stopGrace is how long keys still get their turn after the budget ran
// out: their searches stop at once, but the direct rules (which need no
// search, and whose violations stand on their own) go on that long, so a
// check stopped early still reports what they find on the keys it
// reaches. Keys not reached by then are not checked: unknown on every
// property. Without that end, a history of a million keys ran its direct
// rules for a minute past its budget, and past SIGTERM.
const stopGrace = 250 * time.Millisecond

func (c *run) check() *Result {
	props, all := c.props, c.checks
	keys, late := c.p.keys, c.late
	if late == nil {
		late = new(atomic.Bool) // a run without a budget's end (tests)
	}
	prs := make([]PropertyResult, len(props))
	for p, prop := range props {
		prs[p] = PropertyResult{ID: prop.ID, Property: prop.Name, Verdict: contract.NA}
	}
	found := make([][]finding, keyBatch) // per key of the batch, per property
	stalled := make([][]stallNote, keyBatch)
	for i := range found {
		found[i] = make([]finding, len(props))
		stalled[i] = make([]stallNote, len(props))
	}
	type job struct{ i, k, p int } // i: the key's index in its batch, k in keys
	jobs := make(chan job)
	var workers, batch sync.WaitGroup
	for w := 0; w < c.opts.Parallelism; w++ {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for j := range jobs {
				if late.Load() {
					found[j.i][j.p] = finding{verdict: contract.Unknown, notChecked: true}
				} else {
					cj := *c // the job's own note of the stalls that excused
					cj.stalls = &stalled[j.i][j.p]
					found[j.i][j.p] = all[props[j.p].ID](&cj, keys[j.k])
				}
				batch.Done()
			}
		}()
	}
	var notChecked string // the reason of keys not checked, once known
	reason := func(f finding) finding {
		if f.notChecked {
			if notChecked == "" {
				notChecked = c.stopReason("not checked")
			}
			f.undecided = notChecked
		}
		return f
	}
	for lo := 0; lo < len(keys); lo += keyBatch {
		hi := min(lo+keyBatch, len(keys))
		if late.Load() {
			// Past the grace: the rest is not checked, and not even
			// handed to the workers.
			for k := lo; k < hi; k++ {
				for p := range props {
					if all[props[p].ID] != nil {
						fold(&prs[p], keys[k].key, reason(finding{verdict: contract.Unknown, notChecked: true}))
					}
				}
			}
			continue
		}
		for k := lo; k < hi; k++ {
			for p := range props {
				if all[props[p].ID] != nil {
					stalled[k-lo][p] = stallNote{}
					batch.Add(1)
					jobs <- job{k - lo, k, p}
				}
			}
		}
		batch.Wait()
		for k := lo; k < hi; k++ {
			for p := range props {
				if all[props[p].ID] == nil {
					continue
				}
				fold(&prs[p], keys[k].key, reason(found[k-lo][p]))
				for o := range stalled[k-lo][p].ops {
					c.noteStall(&prs[p], o)
				}
				found[k-lo][p] = finding{} // let the batch's findings go
			}
		}
	}
	close(jobs)
	workers.Wait()

	out := &Result{
		Counts: c.p.counts,
		Options: OptionsUsed{Drift: c.opts.Drift, LivenessSlackMs: c.opts.LivenessSlack.Milliseconds(),
			TimeoutMs: c.opts.Timeout.Milliseconds(), WaitBoundMs: c.opts.WaitBound.Milliseconds(),
			LossBoundMs: c.opts.LossBound.Milliseconds(), Fair: c.opts.Fair, Bypass: c.opts.Bypass,
			CallSlackMs: c.opts.CallSlack.Milliseconds(), CloseRefuses: c.opts.CloseRefuses, Footprint: c.opts.Footprint.used(),
			HandoffMs: c.opts.Handoff.Milliseconds()},
	}
	var verdicts []contract.Verdict
	for p, prop := range props {
		pr := prs[p]
		if all[prop.ID] == nil {
			// A property in the contract without its check here: never a pass.
			pr.Verdict, pr.Explanation = contract.Unknown, "no check decides this property (package checker, checks)"
		} else {
			finish(&pr)
			slices.Sort(pr.StallLines)
		}
		out.Props = append(out.Props, pr)
		verdicts = append(verdicts, pr.Verdict)
	}
	out.Verdict = combine(verdicts...)
	return out
}

// lateAfter returns a flag that turns true once ctx is done and grace has
// passed since; stop releases its timers (the flag is not read after).
func lateAfter(ctx context.Context, grace time.Duration) (late *atomic.Bool, stop func()) {
	late = new(atomic.Bool)
	var mu sync.Mutex
	var timer *time.Timer
	stopped := false
	stopAfter := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			timer = time.AfterFunc(grace, func() { late.Store(true) })
		}
	})
	return late, func() {
		stopAfter()
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		if timer != nil {
			timer.Stop()
		}
	}
}

// noteStall records on pr that the stall op at index i excused
// something of its property.
func (c *run) noteStall(pr *PropertyResult, i int) {
	o := &c.p.ops[i]
	if !o.Completed {
		return // a stall is recorded once over: never open
	}
	line := o.Line
	if line == 0 {
		line = i + 1
	}
	if !slices.Contains(pr.StallLines, line) {
		pr.StallLines = append(pr.StallLines, line)
	}
	pr.StallExcusedMs = max(pr.StallExcusedMs, time.Duration(o.Return-o.Call).Milliseconds())
}

// fold merges one key's findings on a property into the property's result.
func fold(pr *PropertyResult, key string, f finding) {
	v, undecided, vs, present := f.verdict, f.undecided, dedupe(f.violations), f.verdict != contract.NA
	pr.ViolationCount += len(vs)
	for _, x := range vs {
		if len(pr.Violations) < MaxViolations {
			pr.Violations = append(pr.Violations, x)
		}
	}
	if undecided != "" {
		// Listed up to MaxUndecided, counted all: a budget spent early on
		// a history of a million keys leaves every key undecided.
		pr.UndecidedCount++
		if len(pr.Undecided) < MaxUndecided {
			pr.Undecided = append(pr.Undecided, Undecided{Key: key, Reason: undecided})
		}
	}
	switch {
	case len(vs) > 0 || v == contract.Violated:
		pr.Verdict = contract.Violated
	case v == contract.Unknown:
		if pr.Verdict != contract.Violated {
			pr.Verdict = contract.Unknown
		}
	case present && pr.Verdict == contract.NA:
		pr.Verdict = contract.OK
	}
}

// finish sorts a property's violations and writes its explanation.
func finish(pr *PropertyResult) {
	sort.SliceStable(pr.Violations, func(i, j int) bool {
		a, b := pr.Violations[i].Lines, pr.Violations[j].Lines
		for k := 0; k < len(a) && k < len(b); k++ {
			if a[k] != b[k] {
				return a[k] < b[k]
			}
		}
		return len(a) < len(b)
	})
	switch pr.Verdict {
	case contract.Violated:
		v := pr.Violations[0]
		pr.Explanation = fmt.Sprintf("%d violation(s); first: lines %s: %s", pr.ViolationCount, joinLines(v.Lines), v.Explanation)
	case contract.Unknown:
		var ks []string
		for _, u := range pr.Undecided {
			ks = append(ks, fmt.Sprintf("key %q: %s", u.Key, u.Reason))
		}
		pr.Explanation = "undecided: " + strings.Join(ks, "; ")
		if more := pr.UndecidedCount - len(pr.Undecided); more > 0 {
			pr.Explanation += fmt.Sprintf("; and %d more keys", more)
		}
	case contract.OK:
		pr.Explanation = "holds on every key"
	case contract.NA:
		pr.Explanation = "nothing to check"
	}
}

func joinLines(ls []int) string {
	s := make([]string, len(ls))
	for i, l := range ls {
		s[i] = fmt.Sprint(l)
	}
	return strings.Join(s, ",")
}

func dedupe(vs []Violation) []Violation {
	if len(vs) == 0 {
		return nil
	}
	seen := map[string]bool{}
	out := vs[:0:0]
	for _, v := range vs {
		k := v.Rule + ":" + joinLines(v.Lines)
		if !seen[k] {
			seen[k] = true
			out = append(out, v)
		}
	}
	return out
}

// violation builds a Violation from ops (nil entries skipped).
func (c *run) violation(prop, rule, key, expl string, ops ...*lop) Violation {
	v := Violation{Property: prop, Rule: rule, Key: key, Explanation: expl}
	seen := map[int]bool{}
	for _, o := range ops {
		if o == nil || seen[o.idx] {
			continue
		}
		seen[o.idx] = true
		v.Ops = append(v.Ops, refOf(o.src, o.idx))
	}
	sort.Slice(v.Ops, func(i, j int) bool { return v.Ops[i].Line < v.Ops[j].Line })
	for _, r := range v.Ops {
		v.Lines = append(v.Lines, r.Line)
	}
	return v
}

// porcupineOps converts the checked ops of a partition, with their times
// mapped by pCall and pRet.
func porcupineOps(ops []*lop) []porcupine.Operation {
	out := make([]porcupine.Operation, 0, len(ops))
	for _, o := range ops {
		if checked(o) {
			out = append(out, porcupine.Operation{ClientId: int(o.client) - 1, Input: o, Call: pCall(o.call), Return: pRet(o.call, o.upto)})
		}
	}
	return out
}

// pCall and pRet map history times to Porcupine's, so that Porcupine's
// real-time order is the contract's: a precedes b when a.ret <= b.call.
// Porcupine orders a call before a return at the same instant (concurrent),
// so calls move to odd instants 2t+1 and returns to even ones 2t: a return at
// t then comes before a call at t. An op whose return equals its call gets
// 2t+1 for both (a return may not come before its own call): it precedes ops
// called after t and is concurrent with those called at t. Times are below
// 2^62 in any real history (146 years in ns); larger ones saturate.
func pCall(t int64) int64 {
	if t >= inf/2 {
		return inf - 1
	}
	return 2*t + 1
}

func pRet(call, ret int64) int64 {
	if ret == inf {
		return inf
	}
	r := pCall(ret) - 1
	return max(r, pCall(call))
}

// pTime maps an instant for annotations (between a return and a call at t).
func pTime(t int64) int64 { return pCall(t) - 1 }

// porcupineCheck checks one partition for linearizability. On Illegal it
// returns one violation explaining where the search got stuck.
//
// A partition is cut into chunks at quiescent points (every op before the
// cut returned before any op after it was called, ops that never returned
// aside), so every linearization is one of each chunk in turn. A fast path
// (witnessChain) finds one linearization per chunk; when it fails, each
// chunk is searched from every start the chunks before can end in
// (endStates), so the chain is exact: a chunk with no linearization from any
// of them proves a violation, explained from that chunk's search alone. Cost
// and memory grow with the chunks, not with the square of the partition.
func (c *run) porcupineCheck(key string, ops []*lop, prop string) (contract.Verdict, string, []Violation) {
	pops := porcupineOps(ops)
	if len(pops) == 0 {
		return contract.NA, "", nil
	}
	if c.ctx.Err() != nil {
		return contract.Unknown, c.stopReason(fmt.Sprintf("not checked (%d ops)", len(pops))), nil
	}
	chunks := chunk(pops, c.opts.chunkMin)
	if c.witnessChain(chunks) {
		return contract.OK, "", nil
	}
	stopped, unread := floatPruner(ops)
	from := []start{{}}
	var carried []searchOp // floating ops of earlier chunks, still floating in some start
	for i, ch := range chunks {
		sops := make([]searchOp, 0, len(carried)+len(ch))
		for _, f := range carried {
			f.carried = true
			sops = append(sops, f)
		}
		for _, po := range ch {
			o := po.Input.(*lop)
			if po.Return == inf && unread(o, po.Call) {
				continue
			}
			sops = append(sops, searchOp{o: o, c: po.Call, r: po.Return})
		}
		ends, deepest, out := endStates(c.ctx, sops, from, stopped)
		if out {
			return contract.Unknown, c.stopReason(fmt.Sprintf("chunk %d of %d (%d ops) of %d ops", i+1, len(chunks), len(ch), len(pops))), nil
		}
		if len(ends) == 0 {
			return contract.Violated, "", []Violation{c.explain(key, sops, from, deepest, prop)}
		}
		next := int64(inf)
		if i+1 < len(chunks) {
			next = chunks[i+1][0].Call
		}
		for k := range ends {
			st := ends[k].st
			ends[k].floating = slices.DeleteFunc(ends[k].floating, func(j int) bool {
				return unread(sops[j].o, next) || stopped(sops[j].o, st)
			})
		}
		kept := maximal(c.ctx, ends)
		if c.ctx.Err() != nil {
			return contract.Unknown, c.stopReason(fmt.Sprintf("chunk %d of %d (%d ops) of %d ops", i+1, len(chunks), len(ch), len(pops))), nil
		}
		carried, from = carryOver(sops, kept)
	}
	return contract.OK, "", nil
}

// carryOver prepares the next chunk's search from the starts a chunk (of
// ops sops) ends in: the floating ops still floating in some start, sorted
// by mapped call (they go first in the next chunk), and the starts with
// their floating sets renumbered as indices into that list.
func carryOver(sops []searchOp, ends []start) ([]searchOp, []start) {
	var carried []searchOp
	seen := map[*lop]bool{}
	for _, e := range ends {
		for _, j := range e.floating {
			if !seen[sops[j].o] {
				seen[sops[j].o] = true
				carried = append(carried, sops[j])
			}
		}
	}
	slices.SortFunc(carried, func(a, b searchOp) int { return cmp.Compare(a.c, b.c) })
	index := make(map[*lop]int, len(carried))
	for k, f := range carried {
		index[f.o] = k
	}
	for k := range ends {
		fl := make([]int, len(ends[k].floating))
		for x, j := range ends[k].floating {
			fl[x] = index[sops[j].o]
		}
		slices.Sort(fl)
		ends[k].floating = fl
	}
	return carried, ends
}

// floatPruner returns, for a floating op (one that never returned), when
// taking effect can no longer help any linearization, so that the search
// may treat it as having had no effect. Both cases need every other op of
// its client on the key to precede it (the client stopped: it is the last op
// of a crashed client, and nothing of that client can take effect after it):
//   - an acquire or renew, in a state where another client holds the key
//     (stopped: true from a state whose holder is not its client): it can
//     only make its client the holder, which refuses the holder's release and
//     renew and delays others' acquires. (While its client holds, it may
//     shorten that lease, its validity counting from its call, so it stays.)
//   - a write once every op that reads its value or expects it as prev
//     returned before mapped time t: it sets a value nobody can observe,
//     which only makes later reads and writes fail.
//
// A release is kept: freeing the key can explain another client's acquire.
func floatPruner(ops []*lop) (stopped func(o *lop, st state) bool, unread func(o *lop, t int64) bool) {
	// Per client: how many of its ops never returned, and the latest mapped
	// return of the others.
	type span struct {
		floating int
		lastRet  int64
	}
	clients := map[int32]span{}
	refRet := map[int32]int64{} // value -> latest mapped return of a read of it or a write expecting it
	for _, o := range ops {
		sp := clients[o.client]
		if o.upto == inf {
			sp.floating++ // an open-ended release too: it may land after the others
		} else {
			sp.lastRet = max(sp.lastRet, pRet(o.call, o.ret))
		}
		clients[o.client] = sp
		if !checked(o) {
			continue
		}
		switch {
		case o.kind == history.Read:
			refRet[o.value] = max(refRet[o.value], pRet(o.call, o.ret))
		case o.kind == history.Write && o.hasPrev:
			refRet[o.prev] = max(refRet[o.prev], pRet(o.call, o.ret))
		}
	}
	// final: o never returned and every other op of its client precedes it
	// (none can take effect after it).
	final := func(o *lop) bool {
		sp := clients[o.client]
		return o.ret == inf && sp.floating == 1 && sp.lastRet < pCall(o.call)
	}
	stopped = func(o *lop, st state) bool {
		return (o.kind == history.Acquire || o.kind == history.Renew) && st.holder != o.client && final(o)
	}
	unread = func(o *lop, t int64) bool {
		r, ok := refRet[o.value]
		return o.kind == history.Write && final(o) && (!ok || r < t)
	}
	return stopped, unread
}

// witnessChain is the fast path of porcupineCheck: Porcupine looks for one
// linearization per chunk, each from the states the witness of the chunks
// before ends in. It tries each chunk twice at most: first with the ops
// that never returned left out (as if they had no effect), then, when that
// finds none and the chunk has such ops, with them clamped to return before
// the next chunk begins. Leaving out, clamping and one witness only
// restrict, so true means linearizable; false proves nothing (another
// witness, or an op taking effect later, may fit), and the exact search
// decides. The exact search alone would do, but it explores every order,
// and with many unknown ops that costs far more than finding one (50k ops
// with 20% unknown: 40 s against 0.5 s). A spent budget makes every step
// fail: false, and the exact search then reports unknown.
//
// Each try is bounded (witnessBudget): a chunk without a linearization
// makes Porcupine try every order of its never-returned ops, 2^n of them
// (16 crashed clients in 400 ops took a minute and 4 GB), where the exact
// search prunes them (floatPruner). The first try has none to order; the
// second gets ten times what the first took, so that a violated chunk costs
// a small multiple of a clean one before the exact search takes over.
func (c *run) witnessChain(chunks [][]porcupine.Operation) bool {
	init := []any{state{}}
	for i, ch := range chunks {
		if c.ctx.Err() != nil || len(ch) > maxWitnessChunk {
			return false
		}
		m := c.model
		from := init
		m.Init = func() any { return from }
		solid := slices.DeleteFunc(slices.Clone(ch), func(o porcupine.Operation) bool { return o.Return == inf })
		start := time.Now()
		tried, witness := solid, findWitness(c.ctx, m, solid, witnessBudget(len(solid)))
		if witness == nil && len(solid) < len(ch) && c.ctx.Err() == nil {
			clamped := slices.Clone(ch)
			if i+1 < len(chunks) {
				next := chunks[i+1][0].Call
				for j := range clamped {
					if clamped[j].Return == inf {
						clamped[j].Return = next - 1
					}
				}
			}
			tried, witness = clamped, findWitness(c.ctx, m, clamped, max(2*time.Millisecond, 10*time.Since(start)))
		}
		if witness == nil || c.ctx.Err() != nil {
			return false
		}
		states := make([]replayed, 0, len(from))
		for _, s := range from {
			states = append(states, replayed{s: s.(state)})
		}
		for _, id := range witness {
			if states = step(states, tried[id].Input.(*lop)); len(states) == 0 {
				return false
			}
		}
		init = make([]any, len(states))
		for j, r := range states {
			init[j] = r.s
		}
	}
	return true
}

// maxWitnessChunk is the longest chunk Porcupine's fast path is asked
// about. Its cache keeps, per node, a bitset of the whole chunk, so that its
// memory grows with the square of a chunk's length; a chunk that long has
// had no quiescent point for thousands of ops (a crowded line of waiters),
// and goes to the exact search, whose memo keeps only the window from the
// first op not linearized: a 100k-op line of 32 waiters (one 66k-op chunk)
// took 5.3 s and 4.2 GiB, or ran out of the heap budget, through Porcupine,
// and takes 0.6 s and 205 MiB without it. The generated shapes of
// BenchmarkScale, cut at quiescent points into chunks of hundreds of ops,
// keep the fast path.
const maxWitnessChunk = 4096

// findWitness returns one linearization of ops (indices into ops) that
// Porcupine finds within timeout and ctx's deadline, or nil.
func findWitness(ctx context.Context, m porcupine.Model, ops []porcupine.Operation, timeout time.Duration) []int {
	if d, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(d))
	}
	if timeout <= 0 || ctx.Err() != nil {
		return nil // Porcupine reads a timeout of 0 as none
	}
	res, info := porcupine.CheckOperationsVerbose(m, ops, timeout)
	if res != porcupine.Ok {
		return nil
	}
	// One partition: op ids are indices into ops.
	for _, part := range info.PartialLinearizations() {
		for _, s := range part {
			if len(s) == len(ops) {
				return s
			}
		}
	}
	return nil
}

// witnessBudget bounds the fast path's first search of a chunk of n ops:
// one with a linearization gives Porcupine one quickly (about 10 µs an op,
// unknown ops and all), with a wide margin for a busy machine.
func witnessBudget(n int) time.Duration {
	return max(100*time.Millisecond, time.Duration(n)*100*time.Microsecond)
}

// stopReason says why a search stopped: the budget ran out (time or memory)
// or the caller cancelled.
func (c *run) stopReason(where string) string {
	return fmt.Sprintf("%v: %s", context.Cause(c.ctx), where)
}

// chunkOps is the least number of ops per chunk of a long partition.
const chunkOps = 512

// chunk cuts pops (sorted by call) into chunks of at least min ops at
// quiescent points. Ops that never returned do not block a cut: they float
// (see searchOp).
func chunk(pops []porcupine.Operation, min int) [][]porcupine.Operation {
	var out [][]porcupine.Operation
	start := 0
	maxRet := int64(-1 << 63)
	for i := range pops {
		r := pops[i].Return
		if r == inf {
			r = pops[i].Call
		}
		maxRet = max(maxRet, r)
		if i+1 < len(pops) && i+1-start >= min && maxRet < pops[i+1].Call {
			out = append(out, pops[start:i+1])
			start = i + 1
		}
	}
	return append(out, pops[start:])
}
