// Package checker decides whether a lockproof history keeps the guarantees
// of docs/DESIGN.md, one verdict per property of contract.Properties, each
// decided by its own check (checks) in a file of its own: lease mutual
// exclusion (G1, lease.go), resource safety with fencing (G2,
// resource.go), liveness (G3, liveness.go), fairness (fairness.go) and
// hand-off promptness (promptness.go), validity claims and loss notice
// (G4, claims.go), calls (G5, calls.go) and footprint (G6, footprint.go).
// docs/DESIGN.md ("What the checker decides") states every rule; this
// package implements it. The rest by concern: options.go (Options),
// budget.go (the time and heap budget), prepare.go (the history cut by
// key), porcupine.go and search.go (the linearizability search), model.go
// and shared_model.go (the sequential models), fold.go (folding the keys'
// findings into the result), result.go (the Result), explain.go and
// visualize.go (what a reader is shown).
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
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/anishathalye/porcupine"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

// ErrNoOps is returned (wrapped, with history.ErrBadInput) for a history
// without a single lock or resource operation: it checks nothing, so it is
// bad input, never a pass.
var ErrNoOps = errors.New("no operations (a history needs at least one acquire, release, renew, write or read)")

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

// keyBatch is how many keys are checked between two folds of their
// findings into the result. Folding only after every key kept a finding
// (and a stall note) per key and property for the whole history: hundreds
// of MiB on a history of a million keys, past any heap budget.
const keyBatch = 1024

// check checks every key on every property, a batch of keys at a time
// (keyBatch) on the run's workers, and folds the findings into the
// result. Past the budget's grace (late) the keys left are not checked:
// unknown on every property.
func (c *run) check() *Result {
	late := c.late
	if late == nil {
		late = new(atomic.Bool) // a run without a budget's end (tests)
	}
	prs := make([]PropertyResult, len(c.props))
	for p, prop := range c.props {
		prs[p] = PropertyResult{ID: prop.ID, Property: prop.Name, Verdict: contract.NA}
	}
	pool := c.startPool(late)
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
	keys := c.p.keys
	for lo := 0; lo < len(keys); lo += keyBatch {
		hi := min(lo+keyBatch, len(keys))
		ran := !late.Load() // else past the grace: not even handed to the workers
		if ran {
			pool.batch(lo, hi)
		}
		for k := lo; k < hi; k++ {
			for p := range c.props {
				if c.checks[c.props[p].ID] == nil {
					continue
				}
				if !ran {
					fold(&prs[p], keys[k].key, reason(finding{verdict: contract.Unknown, notChecked: true}))
					continue
				}
				fold(&prs[p], keys[k].key, reason(pool.found[k-lo][p]))
				for o := range pool.stalled[k-lo][p].ops {
					c.noteStall(&prs[p], o)
				}
				pool.found[k-lo][p] = finding{} // let the batch's findings go
			}
		}
	}
	pool.stop()
	return c.result(prs)
}

// keyPool checks a batch of keys on the run's workers
// (Options.Parallelism), each property of each key a job.
type keyPool struct {
	c    *run
	late *atomic.Bool
	// found and stalled are the batch's findings and stall notes, per
	// key of the batch and property.
	found   [][]finding
	stalled [][]stallNote
	jobs    chan keyJob
	workers sync.WaitGroup
	running sync.WaitGroup
}

// keyJob is one key's property: i is the key's index in its batch, k in
// the run's keys, p the property's.
type keyJob struct{ i, k, p int }

// startPool starts the run's workers.
func (c *run) startPool(late *atomic.Bool) *keyPool {
	pool := &keyPool{c: c, late: late, found: make([][]finding, keyBatch), stalled: make([][]stallNote, keyBatch),
		jobs: make(chan keyJob)}
	for i := range pool.found {
		pool.found[i] = make([]finding, len(c.props))
		pool.stalled[i] = make([]stallNote, len(c.props))
	}
	for range c.opts.Parallelism {
		pool.workers.Add(1)
		go pool.work()
	}
	return pool
}

// work runs jobs until the pool stops; a job that comes past the grace is
// not checked.
func (pool *keyPool) work() {
	defer pool.workers.Done()
	for j := range pool.jobs {
		if pool.late.Load() {
			pool.found[j.i][j.p] = finding{verdict: contract.Unknown, notChecked: true}
		} else {
			cj := *pool.c // the job's own note of the stalls that excused
			cj.stalls = &pool.stalled[j.i][j.p]
			pool.found[j.i][j.p] = pool.c.checks[pool.c.props[j.p].ID](&cj, pool.c.p.keys[j.k])
		}
		pool.running.Done()
	}
}

// batch checks keys lo to hi (exclusive) and waits for their findings.
func (pool *keyPool) batch(lo, hi int) {
	for k := lo; k < hi; k++ {
		for p := range pool.c.props {
			if pool.c.checks[pool.c.props[p].ID] != nil {
				pool.stalled[k-lo][p] = stallNote{}
				pool.running.Add(1)
				pool.jobs <- keyJob{k - lo, k, p}
			}
		}
	}
	pool.running.Wait()
}

// stop ends the workers.
func (pool *keyPool) stop() {
	close(pool.jobs)
	pool.workers.Wait()
}

// result is the check's Result from its properties' folded results prs.
func (c *run) result(prs []PropertyResult) *Result {
	out := &Result{
		Counts: c.p.counts,
		Options: OptionsUsed{Drift: c.opts.Drift, LivenessSlackMs: c.opts.LivenessSlack.Milliseconds(),
			TimeoutMs: c.opts.Timeout.Milliseconds(), WaitBoundMs: c.opts.WaitBound.Milliseconds(),
			LossBoundMs: c.opts.LossBound.Milliseconds(), Fair: c.opts.Fair, Bypass: c.opts.Bypass,
			CallSlackMs: c.opts.CallSlack.Milliseconds(), CloseRefuses: c.opts.CloseRefuses, Footprint: c.opts.Footprint.used(),
			HandoffMs: c.opts.Handoff.Milliseconds(), NotReentrant: c.opts.NotReentrant},
	}
	var verdicts []contract.Verdict
	for p, prop := range c.props {
		pr := prs[p]
		if c.checks[prop.ID] == nil {
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
