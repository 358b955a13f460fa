// Package trace turns a recorded lock history into a trace that the TLA+
// spec tla/TraceFencedLock.tla validates with TLC.
//
// A history has wall-clock nanoseconds, client names, 64-bit tokens and
// arbitrary string values, and its lines come in any order. TLC wants small
// integers (its integers are 32-bit) and one sequence of events. Convert
// maps clients, keys, tokens and values to small integers that preserve
// equality (and order, for tokens and times), turns the lease bounds of the
// history contract into ticks, and orders the operations into one sequence
// that respects real time (see Convert for the order).
package trace

import (
	"cmp"
	"container/heap"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/lockproof/lockproof/history"
)

// ErrNotFenced is returned for a history the fenced-lock trace spec cannot
// read: an ok acquire or an ok or rejected resource op without a token.
var ErrNotFenced = errors.New("not a fencing lock's history")

// Event is one step of a trace: one operation of the history, with its
// names and numbers mapped to small integers.
type Event struct {
	Line   int    // the history line of the op (1-based)
	Kind   string // acquire, release, renew, write, read, fault
	Result string // ok, fail, rejected, unknown; "" for a fault without one
	Client int    // 1..len(Trace.Clients); 0 for a fault
	Key    int    // 1..len(Trace.Keys); 0 for a fault
	Token  int    // 1..len(Trace.Tokens) in token order; 0: no token
	Call   int    // invocation tick
	Return int    // completion tick; Trace.Never when the op never completed
	// Lo and Hi bound the lease of an acquire or renew (ticks): it is surely
	// valid until Lo and surely expired after Hi. Trace.Never when the lease
	// has no expiry (ttl_ms 0) or the op never completed (Hi).
	Lo, Hi int
	Value  int    // write: value written; read: value observed; 0 is "" (never written)
	Prev   int    // write with prev: the value its writer read; -1 without prev
	Fault  string // fault: the fault kind, the first word of its name
}

// Trace is a converted history.
type Trace struct {
	Events  []Event
	Clients []string // Clients[i] is client i+1
	Keys    []string // Keys[i] is key i+1
	Tokens  []uint64 // Tokens[i] is token i+1, ascending
	Values  []string // Values[i] is value i+1; value 0 is ""
	Never   int      // the tick that stands for "never" (after every real tick)
}

// Options tune the conversion.
type Options struct {
	// DriftPPM is the clock drift bound in parts per million that turns a
	// lease length into its surely-valid and surely-expired bounds. 0 means
	// the contract's default, 1% (10000).
	DriftPPM int64
}

const defaultDriftPPM = 10_000

// maxInt32 bounds every integer of a trace: TLC's integers are 32-bit.
const maxInt32 = math.MaxInt32

// Convert turns ops (a history, in any order) into a trace.
//
// Order: faults first, then the events of each key (keys are independent
// in the spec). Within a key the events respect real time (an op that
// returned before another was invoked comes first). The ops with an effect
// (ok, and unknown ones with a token) are ordered by token where real time
// allows (an acquire before the other ops of its token); the others (fail,
// rejected, an unknown acquire) go as late as real time allows, so that the
// state they are checked against is the latest one they may have seen.
// Ties go by return, call and line, so the output is deterministic. For a
// fenced lock this order is a linearization whenever one exists in which
// the effective ops of a key have non-decreasing tokens, which is what the
// lock promises (failover aside).
func Convert(ops []history.Op, opt Options) (*Trace, error) {
	drift := opt.DriftPPM
	if drift == 0 {
		drift = defaultDriftPPM
	}
	if drift < 0 || drift >= 1_000_000 {
		return nil, fmt.Errorf("convert: drift %d ppm: want 0 < drift < 1000000", drift)
	}
	c := converter{
		clients: map[string]int{}, keys: map[string]int{},
		tokens: map[uint64]int{}, values: map[string]int{"": 0},
	}
	if err := c.collect(ops, drift); err != nil {
		return nil, err
	}
	if len(c.times) > maxInt32-2 || len(ops) > maxInt32-1 {
		return nil, fmt.Errorf("convert: history too large for TLC (%d ops)", len(ops))
	}
	return c.build(ops, drift), nil
}

type converter struct {
	clients map[string]int
	keys    map[string]int
	tokens  map[uint64]int
	values  map[string]int
	times   []int64 // every finite time point, ns, sorted and unique after collect
}

// lease returns the surely-valid and surely-expired bounds (ns) of a lease
// of ttl ms taken in [call, ret]; ok is false for the "never" ends.
func lease(op history.Op, drift int64) (lo, hi int64, loOK, hiOK bool) {
	if op.TTLMillis <= 0 {
		return 0, 0, false, false
	}
	ttl := satMul(op.TTLMillis, 1_000_000)
	d := satMul(ttl/1_000_000, drift) + (ttl%1_000_000)*drift/1_000_000
	lo, loOK = satAdd(op.Call, ttl-d), true
	if op.Completed {
		hi, hiOK = satAdd(op.Return, satAdd(ttl, d)), true
	}
	return lo, hi, loOK, hiOK
}

func satMul(a, b int64) int64 {
	if a != 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}

func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// collect validates the ops and gathers the names, tokens, values and
// times to map.
func (c *converter) collect(ops []history.Op, drift int64) error {
	var names, keys []string
	var toks []uint64
	var vals []string
	for i := range ops {
		op := &ops[i]
		if err := op.Validate(); err != nil {
			return fmt.Errorf("convert: %w", err)
		}
		if op.Kind != history.Fault {
			if err := needsToken(op); err != nil {
				return err
			}
			names = append(names, op.Client)
			keys = append(keys, op.Key)
		}
		if op.HasToken {
			toks = append(toks, op.Token)
		}
		if op.HasValue {
			vals = append(vals, op.Value)
		}
		if op.HasPrev {
			vals = append(vals, op.Prev)
		}
		c.times = append(c.times, op.Call)
		if op.Completed {
			c.times = append(c.times, op.Return)
		}
		if op.Result == history.OK && (op.Kind == history.Acquire || op.Kind == history.Renew) {
			lo, hi, loOK, hiOK := lease(*op, drift)
			if loOK {
				c.times = append(c.times, lo)
			}
			if hiOK {
				c.times = append(c.times, hi)
			}
		}
	}
	index(names, c.clients, 1)
	index(keys, c.keys, 1)
	slices.Sort(toks)
	for _, t := range slices.Compact(toks) {
		c.tokens[t] = len(c.tokens) + 1
	}
	index(vals, c.values, 1)
	slices.Sort(c.times)
	c.times = slices.Compact(c.times)
	return nil
}

// needsToken rejects the ops a fenced-lock trace cannot do without a token.
func needsToken(op *history.Op) error {
	if op.HasToken {
		return nil
	}
	switch {
	case op.Kind == history.Acquire && op.Result == history.OK,
		(op.Kind == history.Write || op.Kind == history.Read) &&
			(op.Result == history.OK || op.Result == history.Rejected):
		return fmt.Errorf("convert: line %d: %s %s without token: %w", op.Line, op.Result, op.Kind, ErrNotFenced)
	}
	return nil
}

// index numbers the distinct strings of names that m does not have yet,
// in sorted order, from next on.
func index(names []string, m map[string]int, next int) {
	slices.Sort(names)
	for _, n := range slices.Compact(names) {
		if _, ok := m[n]; !ok {
			m[n] = next
			next++
		}
	}
}

// tick maps a time (ns) to its rank among all time points, from 1.
func (c *converter) tick(t int64) int {
	i, _ := slices.BinarySearch(c.times, t)
	return i + 1
}

func (c *converter) build(ops []history.Op, drift int64) *Trace {
	tr := &Trace{
		Clients: sortedKeys(c.clients),
		Keys:    sortedKeys(c.keys),
		Never:   len(c.times) + 1,
	}
	tr.Tokens = make([]uint64, len(c.tokens))
	for t, i := range c.tokens {
		tr.Tokens[i-1] = t
	}
	tr.Values = make([]string, len(c.values)-1)
	for v, i := range c.values {
		if i > 0 {
			tr.Values[i-1] = v
		}
	}
	events := make([]Event, len(ops))
	for i, op := range ops {
		e := Event{
			Line: op.Line, Kind: string(op.Kind), Result: string(op.Result),
			Call: c.tick(op.Call), Return: tr.Never, Lo: tr.Never, Hi: tr.Never, Prev: -1,
		}
		if op.Completed {
			e.Return = c.tick(op.Return)
		}
		if op.Kind == history.Fault {
			e.Fault, _, _ = strings.Cut(op.Name, " ")
		} else {
			e.Client, e.Key = c.clients[op.Client], c.keys[op.Key]
		}
		if op.HasToken {
			e.Token = c.tokens[op.Token]
		}
		if op.HasValue {
			e.Value = c.values[op.Value]
		}
		if op.HasPrev {
			e.Prev = c.values[op.Prev]
		}
		if op.Result == history.OK && (op.Kind == history.Acquire || op.Kind == history.Renew) {
			lo, hi, loOK, hiOK := lease(op, drift)
			if loOK {
				e.Lo = c.tick(lo)
			}
			if hiOK {
				e.Hi = c.tick(hi)
			}
		}
		events[i] = e
	}
	tr.Events = order(events)
	return tr
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, len(m))
	for k, i := range m {
		out[i-1] = k
	}
	return out
}

// effective says whether an event's effect must be placed where the ops
// that depend on it can see it: ok ops, and unknown ops with a token
// (an unknown release may have freed the key for the next acquire, an
// unknown write may be what a later read observed). The others (fail,
// rejected, an unknown acquire) change nothing the spec checks later and
// are best checked against the latest state real time allows.
func effective(e *Event) bool {
	return e.Result == "ok" || (e.Result == "unknown" && e.Token > 0)
}

// less orders effective events by token (an acquire before the other ops
// of its token), then return, call and line.
func less(a, b *Event) bool {
	return cmp.Or(cmp.Compare(a.Token, b.Token), cmp.Compare(sub(a), sub(b)),
		cmp.Compare(a.Return, b.Return), cmp.Compare(a.Call, b.Call), cmp.Compare(a.Line, b.Line)) < 0
}

func sub(e *Event) int {
	if e.Kind == "acquire" {
		return 0
	}
	return 1
}

// order arranges events into one sequence: faults first (the spec reads
// their windows whatever their place), then each key's events. Keys are
// independent objects in the spec, so by the locality of linearizability
// each key can be ordered on its own.
func order(events []Event) []Event {
	out := make([]Event, 0, len(events))
	byKey := map[int][]Event{}
	var keys []int
	for _, e := range events {
		if e.Kind == "fault" {
			out = append(out, e)
			continue
		}
		if _, ok := byKey[e.Key]; !ok {
			keys = append(keys, e.Key)
		}
		byKey[e.Key] = append(byKey[e.Key], e)
	}
	slices.SortFunc(out, func(a, b Event) int {
		return cmp.Or(cmp.Compare(a.Call, b.Call), cmp.Compare(a.Line, b.Line))
	})
	slices.Sort(keys)
	for _, k := range keys {
		out = append(out, orderKey(byKey[k])...)
	}
	return out
}

// orderKey orders one key's events, respecting real time (an event that
// returned before another was called comes first). The effective events
// go first, greedily: among those real time allows next, the least by
// less. Then every other event goes in as late as real time allows: just
// before the first effective event called after it returned.
func orderKey(events []Event) []Event {
	var eff, rest []Event
	for _, e := range events {
		if effective(&e) {
			eff = append(eff, e)
		} else {
			rest = append(rest, e)
		}
	}
	eff = greedy(eff)
	// prefixMax[i] is the latest call among eff[:i+1]: the first effective
	// event called after t is the first i with prefixMax[i] > t.
	prefixMax := make([]int, len(eff))
	for i, e := range eff {
		prefixMax[i] = e.Call
		if i > 0 {
			prefixMax[i] = max(prefixMax[i], prefixMax[i-1])
		}
	}
	slices.SortFunc(rest, func(a, b Event) int {
		return cmp.Or(cmp.Compare(a.Return, b.Return), cmp.Compare(a.Call, b.Call), cmp.Compare(a.Line, b.Line))
	})
	out := make([]Event, 0, len(events))
	j := 0
	for i := 0; i <= len(eff); i++ {
		// rest is sorted by return, so the insertion points ascend.
		for j < len(rest) && (i == len(eff) || insertAt(prefixMax, rest[j].Return) == i) {
			out = append(out, rest[j])
			j++
		}
		if i < len(eff) {
			out = append(out, eff[i])
		}
	}
	return out
}

// insertAt is the first index whose prefix-max call is after t.
func insertAt(prefixMax []int, t int) int {
	i, _ := slices.BinarySearchFunc(prefixMax, t, func(m, t int) int {
		if m > t {
			return 1
		}
		return -1
	})
	return i
}

// greedy orders events respecting real time: an event may come next when
// no unplaced event returned before it was called; among those the least
// by less goes first.
func greedy(events []Event) []Event {
	if len(events) == 0 {
		return nil
	}
	byCall := make([]int, len(events))
	for i := range byCall {
		byCall[i] = i
	}
	slices.SortFunc(byCall, func(a, b int) int {
		return cmp.Or(cmp.Compare(events[a].Call, events[b].Call), cmp.Compare(events[a].Line, events[b].Line))
	})
	returns := &idxHeap{events: events, less: func(a, b *Event) bool {
		return cmp.Or(cmp.Compare(a.Return, b.Return), cmp.Compare(a.Line, b.Line)) < 0
	}}
	for i := range events {
		returns.idx = append(returns.idx, i)
	}
	heap.Init(returns)
	ready := &idxHeap{events: events, less: less}
	placed := make([]bool, len(events))
	out := make([]Event, 0, len(events))
	next := 0
	for len(out) < len(events) {
		for placed[returns.idx[0]] {
			heap.Pop(returns)
		}
		r := events[returns.idx[0]].Return
		for next < len(byCall) && events[byCall[next]].Call <= r {
			heap.Push(ready, byCall[next])
			next++
		}
		i := heap.Pop(ready).(int)
		placed[i] = true
		out = append(out, events[i])
	}
	return out
}

// idxHeap is a heap of event indexes ordered by less.
type idxHeap struct {
	idx    []int
	events []Event
	less   func(a, b *Event) bool
}

func (h *idxHeap) Len() int           { return len(h.idx) }
func (h *idxHeap) Less(i, j int) bool { return h.less(&h.events[h.idx[i]], &h.events[h.idx[j]]) }
func (h *idxHeap) Swap(i, j int)      { h.idx[i], h.idx[j] = h.idx[j], h.idx[i] }
func (h *idxHeap) Push(x any)         { h.idx = append(h.idx, x.(int)) }
func (h *idxHeap) Pop() any {
	x := h.idx[len(h.idx)-1]
	h.idx = h.idx[:len(h.idx)-1]
	return x
}
