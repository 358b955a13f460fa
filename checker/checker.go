// Package checker decides whether a lockproof history keeps the guarantees
// of ../shared/DESIGN.md: lease mutual exclusion (G1), resource safety with
// fencing (G2) and liveness after a holder crashes (G3).
//
// The history is partitioned by key. Per key, the lease ops and the resource
// ops are each checked for linearizability against a time-aware Porcupine
// model (see apply), and direct checks cover what a sequential model cannot
// see: token order in real time, one owner per token, stale unfenced holders
// and liveness. Every property gets its own Verdict; a timeout or a cancelled
// context yields Unknown, never OK.
//
// Timing semantics (the history contract): a lease taken (or renewed) in
// [call, return] with length T is surely valid until call+T*(1-drift) and
// surely expired after return+T*(1+drift). An op that never returned may take
// effect at any time after its call. Ops with result fail or rejected had no
// effect and are not checked by the models: in particular a failed acquire
// is not taken as proof that the key was held (a lock may fail an acquire
// for other reasons, e.g. a READONLY replica); only liveness looks at them.
// A client that acquires again while it may still hold the key is not a
// mutual exclusion violation (reentrance); it may get its own token back,
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
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/lockproof/lockproof/history"
)

// DefaultDrift is the clock drift bound the contract assumes (1%).
const DefaultDrift = 0.01

// DefaultLivenessSlack is how long after a crashed holder's lease surely
// expired an acquire by another client must succeed. One second covers
// Redis's expiry, scheduling and the acquire's own round trips with margin;
// a tighter slack would risk crying wolf.
const DefaultLivenessSlack = time.Second

// ErrBadOptions is returned (wrapped) for invalid Options.
var ErrBadOptions = errors.New("bad checker options")

// Options tune Check. The zero value is valid: drift 1%, slack 1s, no timeout.
type Options struct {
	// Drift is the relative clock drift bound between the history's clock and
	// the lock server's; 0 means DefaultDrift. Must be in [0, 1); use a tiny
	// positive value for "no drift".
	Drift float64
	// LivenessSlack is added to a crashed holder's surely-expired time before
	// a failed acquire by another client counts as a liveness violation; 0 means
	// DefaultLivenessSlack.
	LivenessSlack time.Duration
	// Timeout bounds each Porcupine check of one partition (one key's lease
	// ops, or its resource ops); 0: no limit. A partition that times out is
	// unknown.
	Timeout time.Duration
	// Parallelism bounds the partitions checked at once; 0 means GOMAXPROCS.
	Parallelism int

	// chunkMin overrides chunkOps (tests).
	chunkMin int
}

func (o Options) withDefaults() (Options, error) {
	if o.Drift == 0 {
		o.Drift = DefaultDrift
	}
	if o.Drift < 0 || o.Drift >= 1 || o.Drift != o.Drift {
		return o, fmt.Errorf("%w: drift %v not in [0, 1)", ErrBadOptions, o.Drift)
	}
	if o.LivenessSlack == 0 {
		o.LivenessSlack = DefaultLivenessSlack
	}
	if o.LivenessSlack < 0 {
		return o, fmt.Errorf("%w: negative liveness slack %v", ErrBadOptions, o.LivenessSlack)
	}
	if o.Timeout < 0 {
		return o, fmt.Errorf("%w: negative timeout %v", ErrBadOptions, o.Timeout)
	}
	if o.Parallelism <= 0 {
		o.Parallelism = runtime.GOMAXPROCS(0)
	}
	if o.chunkMin <= 0 {
		o.chunkMin = chunkOps
	}
	return o, nil
}

// Check checks a history. It returns an error only for invalid options or an
// op that breaks the history contract (a *history.ParseError, errors.Is
// history.ErrBadInput); a timeout or a cancelled ctx gives Unknown verdicts.
func Check(ctx context.Context, ops []history.Op, opts Options) (*Result, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	p, err := prepare(ops, opts.Drift)
	if err != nil {
		return nil, fmt.Errorf("check history: %w", err)
	}
	c := &run{ctx: ctx, p: p, opts: opts, model: newModel(ctx, p)}
	return c.check(), nil
}

// run is one Check call.
type run struct {
	ctx   context.Context
	p     *prepared
	opts  Options
	model porcupine.Model
}

// keyResult collects what the checks of one key found.
type keyResult struct {
	lease, resource, liveness         []Violation
	leaseVerdict, resourceVerdict     Verdict // of the Porcupine checks
	leaseUndecided, resourceUndecided string
	livenessChecked                   bool
}

func (c *run) check() *Result {
	keys := c.p.keys
	res := make([]keyResult, len(keys))
	type job struct {
		k     int
		lease bool
	}
	jobs := make(chan job)
	var wg sync.WaitGroup
	for w := 0; w < c.opts.Parallelism; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				k, r := keys[j.k], &res[j.k]
				if j.lease {
					r.leaseVerdict, r.leaseUndecided, r.lease = c.porcupineCheck(k.key, k.lease, PropLease)
					r.lease = append(r.lease, c.tokenChecks(k)...)
					r.liveness, r.livenessChecked = c.liveness(k)
				} else {
					r.resourceVerdict, r.resourceUndecided, r.resource = c.porcupineCheck(k.key, k.resource, PropResource)
					r.resource = append(r.resource, c.resourceDirect(k)...)
				}
			}
		}()
	}
	for i, k := range keys {
		jobs <- job{i, true}
		if len(k.resource) > 0 {
			jobs <- job{i, false}
		}
	}
	close(jobs)
	wg.Wait()

	out := &Result{
		Lease:    PropertyResult{Property: PropLease, Verdict: NA},
		Resource: PropertyResult{Property: PropResource, Verdict: NA},
		Liveness: PropertyResult{Property: PropLiveness, Verdict: NA},
		Counts:   c.p.counts,
		Options: OptionsUsed{Drift: c.opts.Drift, LivenessSlackMs: c.opts.LivenessSlack.Milliseconds(),
			TimeoutMs: c.opts.Timeout.Milliseconds()},
	}
	for i, k := range keys {
		r := &res[i]
		fold(&out.Lease, k.key, r.leaseVerdict, r.leaseUndecided, r.lease, len(k.lease) > 0)
		fold(&out.Resource, k.key, r.resourceVerdict, r.resourceUndecided, r.resource, len(k.resource) > 0)
		lv := NA
		if r.livenessChecked {
			lv = OK
		}
		fold(&out.Liveness, k.key, lv, "", r.liveness, r.livenessChecked)
	}
	for _, pr := range out.Properties() {
		finish(pr)
	}
	out.Verdict = combine(out.Lease.Verdict, out.Resource.Verdict, out.Liveness.Verdict)
	return out
}

// fold merges one key's findings on a property into the property's result.
func fold(pr *PropertyResult, key string, v Verdict, undecided string, vs []Violation, present bool) {
	vs = dedupe(vs)
	pr.ViolationCount += len(vs)
	for _, x := range vs {
		if len(pr.Violations) < MaxViolations {
			pr.Violations = append(pr.Violations, x)
		}
	}
	if undecided != "" {
		pr.Undecided = append(pr.Undecided, Undecided{Key: key, Reason: undecided})
	}
	switch {
	case len(vs) > 0 || v == Violated:
		pr.Verdict = Violated
	case v == Unknown:
		if pr.Verdict != Violated {
			pr.Verdict = Unknown
		}
	case present && pr.Verdict == NA:
		pr.Verdict = OK
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
	case Violated:
		v := pr.Violations[0]
		pr.Explanation = fmt.Sprintf("%d violation(s); first: lines %s: %s", pr.ViolationCount, joinLines(v.Lines), v.Explanation)
	case Unknown:
		var ks []string
		for _, u := range pr.Undecided {
			ks = append(ks, fmt.Sprintf("key %q: %s", u.Key, u.Reason))
		}
		pr.Explanation = "undecided: " + strings.Join(ks, "; ")
	case OK:
		pr.Explanation = "holds on every key"
	case NA:
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

// porcupineOps converts the checked ops of a partition.
func porcupineOps(ops []*lop) []porcupine.Operation {
	out := make([]porcupine.Operation, 0, len(ops))
	for _, o := range ops {
		if checked(o) {
			out = append(out, porcupine.Operation{ClientId: int(o.client) - 1, Input: o, Call: o.call, Return: o.ret})
		}
	}
	return out
}

// porcupineCheck checks one partition for linearizability. On Illegal it
// returns one violation explaining where the search got stuck.
//
// Porcupine's cost grows with the square of a partition's length (it keeps a
// bitset of linearized ops per search step), so a long partition is first
// checked in chunks cut at quiescent points (every op before the cut returned
// before any op after it was called), each chunk starting from the states a
// witness linearization of the previous chunks ends in. If every chunk passes,
// the concatenated witnesses linearize the whole partition: ok. If a chunk
// fails, that proves nothing (another linearization of the earlier chunks
// might have ended elsewhere), so the whole partition is checked at once and
// that verdict stands.
func (c *run) porcupineCheck(key string, ops []*lop, prop string) (Verdict, string, []Violation) {
	pops := porcupineOps(ops)
	if len(pops) == 0 {
		return NA, "", nil
	}
	if err := c.ctx.Err(); err != nil {
		return Unknown, "not checked: " + err.Error(), nil
	}
	var deadline time.Time
	if c.opts.Timeout > 0 {
		deadline = time.Now().Add(c.opts.Timeout)
	}
	if chunks := chunk(pops, c.opts.chunkMin); len(chunks) > 1 {
		switch v, why := c.checkChunks(chunks, deadline); v {
		case OK:
			return OK, "", nil
		case Unknown:
			return Unknown, why, nil
		}
	}
	timeout, ok := remaining(deadline)
	if !ok {
		return Unknown, fmt.Sprintf("timed out after %v on %d ops", c.opts.Timeout, len(pops)), nil
	}
	res := porcupine.CheckOperationsTimeout(c.model, pops, timeout)
	if err := c.ctx.Err(); err != nil {
		return Unknown, "check interrupted: " + err.Error(), nil
	}
	switch res {
	case porcupine.Ok:
		return OK, "", nil
	case porcupine.Unknown:
		return Unknown, fmt.Sprintf("Porcupine timed out after %v on %d ops", c.opts.Timeout, len(pops)), nil
	}
	return Violated, "", []Violation{c.explain(key, pops, prop)}
}

// remaining returns the time left until deadline (0: no deadline), and
// false when it has passed.
func remaining(deadline time.Time) (time.Duration, bool) {
	if deadline.IsZero() {
		return 0, true
	}
	d := time.Until(deadline)
	return d, d > 0
}

// chunkOps is the least number of ops per chunk of a long partition.
const chunkOps = 512

// chunk cuts pops (sorted by call) into chunks of at least min ops at
// quiescent points. Ops that never returned do not block a cut: within their
// chunk their return is clamped to just before the next chunk begins, which
// only restricts them, so a witness found with the clamp is a witness for the
// history (a failure is rechecked without chunks).
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
			next := pops[i+1].Call
			part := append([]porcupine.Operation(nil), pops[start:i+1]...)
			for j := range part {
				if part[j].Return == inf {
					part[j].Return = next - 1
				}
			}
			out = append(out, part)
			start = i + 1
		}
	}
	return append(out, pops[start:])
}

// checkChunks checks chunks in order, each from the end states of a witness
// of the ones before. OK: every chunk passed. Violated: some chunk failed
// (inconclusive: the caller rechecks the whole). Unknown: out of time.
func (c *run) checkChunks(chunks [][]porcupine.Operation, deadline time.Time) (Verdict, string) {
	init := []any{state{}}
	for i, ch := range chunks {
		timeout, ok := remaining(deadline)
		if !ok {
			return Unknown, fmt.Sprintf("timed out after %v (chunk %d of %d)", c.opts.Timeout, i+1, len(chunks))
		}
		m := c.model
		from := init
		m.Init = func() any { return from }
		res, info := porcupine.CheckOperationsVerbose(m, ch, timeout)
		if err := c.ctx.Err(); err != nil {
			return Unknown, "check interrupted: " + err.Error()
		}
		switch res {
		case porcupine.Unknown:
			return Unknown, fmt.Sprintf("Porcupine timed out after %v (chunk %d of %d, %d ops)", c.opts.Timeout, i+1, len(chunks), len(ch))
		case porcupine.Illegal:
			return Violated, ""
		}
		// One partition: op ids are indices into ch.
		var witness []int
		for _, part := range info.PartialLinearizations() {
			for _, s := range part {
				if len(s) == len(ch) {
					witness = s
				}
			}
		}
		if witness == nil {
			return Violated, "" // no complete witness reported: recheck the whole
		}
		states := make([]replayed, 0, len(from))
		for _, s := range from {
			states = append(states, replayed{s: s.(state)})
		}
		for _, id := range witness {
			states = step(states, ch[id].Input.(*lop))
			if len(states) == 0 {
				return Violated, ""
			}
		}
		init = make([]any, len(states))
		for j, r := range states {
			init[j] = r.s
		}
	}
	return OK, ""
}
