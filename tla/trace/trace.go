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
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

// ErrNotFenced is returned for a history the fenced-lock trace spec cannot
// read: an ok acquire or an ok or rejected resource op without a token.
var ErrNotFenced = errors.New("not a fencing lock's history")

// Event is one step of a trace: one operation of the history, with its
// names and numbers mapped to small integers.
type Event struct {
	Line   int    // the history line of the op (1-based)
	Kind   string // acquire, release, renew, write, read, inspect, holds, fault
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
	// Foreign says, of a resource op, that its token belongs to another
	// client: by docs/DESIGN.md's token-owner rule, the client of the
	// first ok acquire (by call) that returned it, else of the first ok
	// resource op (by call) that carried it. The owner is a fact of the
	// whole history, not of one order, so the converter finds it.
	Foreign bool
	// Win says that the op overlaps a failover window (a fault whose kind
	// fails a master over, contract.FailsOver: Sentinel's failover or a
	// cluster shard's; or one that makes Redis forget the lock: forgets): a
	// second master may have served it, and the master it talked to may
	// have lost what it did.
	Win bool
	// Held, Holder and Count are what an inspect or holds op was told
	// (history.Inspect): Held that someone holds the key, Holder the client
	// named (1..len(Trace.Clients); 0: none named), Count the hold count
	// (of the holder named, or of the asking client on a holds op; -1: not
	// told). The fence told is Token.
	Held   bool
	Holder int
	Count  int
	// Lease names the hold of its client that an acquire starts or a
	// release or renew acts on (history.Op.Hold), mapped to 1..n in the
	// order of the numbers; 0: not said, or said by a release or renew of a
	// number no acquire of its client and key carries (the spec then reads
	// the op by count, as a history without numbers).
	Lease int
	// Upto is the last trace position (1-based) that may come before this
	// event is taken: the trace spec takes the events of a key in any order
	// that respects real time, and an event called after this one returned
	// must wait for it. Positions beyond this event's by more than MaxAhead
	// are not explored (see Convert).
	Upto int
}

// forgets reports whether a fault of kind makes Redis forget a held lock,
// keys and fence counter (key-loss's DEL, a restart without persistence,
// an operator's force-unlock). The model has no action of its own for
// that: its window is read as a failover window, whose second master
// starts without the lease and serves fences above the lost ones (the
// fence reads the clock), which is what the master after the loss is.
func forgets(kind string) bool { return contract.Forgets(kind) }

// SkewWindowFault is a failover whose promoted replica's clock may be
// behind the old master's: its window is a failover window (Event.Win), and
// the promoted master's fences need not exceed the old one's
// (Trace.Skewed).
const SkewWindowFault = contract.FaultFailoverSkew

// MaxAhead bounds how many later events of its key the trace spec may take
// before an event that is still pending (see Convert).
const MaxAhead = 64

// Trace is a converted history.
type Trace struct {
	Events  []Event
	Clients []string // Clients[i] is client i+1
	Keys    []string // Keys[i] is key i+1
	Tokens  []uint64 // Tokens[i] is token i+1, ascending
	Values  []string // Values[i] is value i+1; value 0 is ""
	Never   int      // the tick that stands for "never" (after every real tick)
	// Bounded says that MaxAhead cut the lookahead of some event: more
	// than MaxAhead later events of its key were called before it
	// returned. A rejection of a bounded trace may come from the bound
	// (some order beyond it might be accepted); an acceptance stands.
	Bounded bool
	// Skewed says that the history has a window of SkewWindowFault: the
	// trace spec then lets the promoted master's fences start anywhere
	// (each master's still rise, and no fence has two owners), as the lock
	// promises when node clocks disagree (docs/DESIGN.md).
	Skewed bool
}

// Options tune the conversion.
type Options struct {
	// DriftPPM is the clock drift bound in parts per million that turns a
	// lease length into its surely-valid and surely-expired bounds. 0 means
	// the contract's default, 1% (10000).
	DriftPPM int64
	// Settle is how long after a failover fault ends the old master may
	// still serve clients: the fault's Stop heals the partition, and only
	// then does Sentinel see the old master again and demote it, and do
	// the clients still connected to it follow the switch. 0 means
	// DefaultSettle; it must not be negative.
	Settle time.Duration
}

// DefaultSettle is Options.Settle when zero: Sentinel's default down-after
// in the harness (1 s) plus its periodic checks and the clients
// reconnection, with a wide margin.
const DefaultSettle = 2 * time.Second

const defaultDriftPPM = 10_000

// maxInt32 bounds every integer of a trace: TLC's integers are 32-bit.
const maxInt32 = math.MaxInt32

// untraced reports whether op is left out of a trace (see Convert).
func untraced(o history.Op) bool {
	return o.Kind == history.Lost || o.Kind == history.Close || o.Kind == history.Footprint || o.Kind == history.TTL
}

// Convert turns ops (a history, in any order) into a trace.
//
// An inspect or holds op (history.Inspect, history.Holds: what the lock
// said of a key's holders) is an event that reads the lease: the spec
// takes it at an instant of its window where the lease it finds fits the
// answer.
//
// Order: faults first (by call), then the events of each key (keys are
// independent in the spec, and linearizability is local), each key's by
// call. The trace spec does not follow this order blindly: it takes a key's
// events in every order that respects real time (an event may go before a
// pending earlier one unless that one returned before it was called), so a
// history is accepted iff some linearization follows the rules. Each
// event's Upto bounds the search: an event may stay pending while at most
// MaxAhead later events of its key are taken. Loss notices (history.Lost)
// and closes of a client's handle (history.Close) are left out. Only an op that overlaps
// more than MaxAhead others (a very long pause, an op that never returned
// among many) is limited by it, and a limit can only reject more, never
// accept a history that has no valid order.
func Convert(ops []history.Op, opt Options) (*Trace, error) {
	return ConvertContext(context.Background(), ops, opt)
}

// stopEvery is how many ops or keys the conversion goes between looks at
// its context: often enough to stop within milliseconds, rarely enough to
// cost nothing measurable.
const stopEvery = 1024

// ConvertContext is Convert that stops once ctx is done, with an error
// that wraps ctx's cause: a history of a million keys took 1.7 GB and
// ran on with no budget at all, so a command's budget (lockproof trace
// --timeout, --max-heap) must reach in here.
func ConvertContext(ctx context.Context, all []history.Op, opt Options) (*Trace, error) {
	drift := opt.DriftPPM
	if drift == 0 {
		drift = defaultDriftPPM
	}
	if drift < 0 || drift >= 1_000_000 {
		return nil, fmt.Errorf("convert: drift %d ppm: want 0 < drift < 1000000", drift)
	}
	settle := opt.Settle
	if settle < 0 {
		return nil, fmt.Errorf("convert: settle %v: must not be negative", settle)
	}
	if settle == 0 {
		settle = DefaultSettle
	}
	// Loss notices and the server's word on a lease's time left (ttl) are
	// what the lock told its holder, a close is of the client's handle,
	// and a footprint sample measures Redis's keys, not lock or resource
	// ops: the trace spec does not describe them (the client's belief is
	// in LockQueue.tla). An acquire after a close is an ordinary acquire
	// to the model.
	// Pointers, not a copy: a copy of the ops doubled the memory of a
	// history of a million keys.
	ops := make([]*history.Op, 0, len(all))
	for i := range all {
		if !untraced(all[i]) {
			ops = append(ops, &all[i])
		}
	}
	c := converter{ctx: ctx,
		clients: map[string]int{}, keys: map[string]int{},
		tokens: map[uint64]int{}, values: map[string]int{"": 0},
		leases: map[uint64]int{},
	}
	if err := c.collect(ops, drift); err != nil {
		return nil, err
	}
	if len(c.times) > maxInt32-2 || len(ops) > maxInt32-1 {
		return nil, fmt.Errorf("convert: history too large for TLC (%d ops)", len(ops))
	}
	return c.build(ops, drift, settle)
}

type converter struct {
	ctx     context.Context // stops the conversion (stopped)
	clients map[string]int
	keys    map[string]int
	tokens  map[uint64]int
	values  map[string]int
	leases  map[uint64]int   // lease numbers of lock ops, in order from 1
	held    map[holdKey]bool // the (client, key, lease) of every acquire
	times   []int64          // every finite time point, ns, sorted and unique after collect
}

// holdKey names one hold: a client's lease number on a key.
type holdKey struct {
	client, key string
	lease       uint64
}

// leaseOf is the lease number an op passes to the spec: an acquire's own,
// and a release's or renew's when an acquire of its client and key has it.
func (c *converter) leaseOf(op *history.Op) uint64 {
	switch {
	case op.Hold == 0:
		return 0
	case op.Kind == history.Acquire:
		return op.Hold
	case (op.Kind == history.Release || op.Kind == history.Renew) && c.held[holdKey{op.Client, op.Key, op.Hold}]:
		return op.Hold
	}
	return 0
}

// lease returns the surely-valid and surely-expired bounds (ns) of a lease
// of ttl ms taken in [call, ret]; ok is false for the "never" ends.
func lease(op history.Op, drift int64) (lo, hi int64, loOK, hiOK bool) {
	if op.TTLMillis <= 0 {
		return 0, 0, false, false
	}
	ttl := satMul(op.TTLMillis, 1_000_000)
	// d = ceil(ttl × drift / 10^6): surely valid until call + floor(T(1−d))
	// and surely expired after return + ceil(T(1+d)), as docs/DESIGN.md
	// ("Time") and the checker count them (a TTL in whole milliseconds and
	// a drift in ppm make d whole: the rounding is for the rule's sake).
	d := satMul(ttl/1_000_000, drift) + ((ttl%1_000_000)*drift+999_999)/1_000_000
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
func (c *converter) collect(ops []*history.Op, drift int64) error {
	var names, keys []string
	var toks, leases []uint64
	var vals []string
	c.held = map[holdKey]bool{}
	for _, op := range ops {
		if op.Kind == history.Acquire && op.Hold != 0 {
			c.held[holdKey{op.Client, op.Key, op.Hold}] = true
		}
	}
	for i, op := range ops {
		if err := c.stopped(i); err != nil {
			return err
		}
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
		if op.Kind == history.Inspect && op.Held && op.Holder != "" {
			// A holder no op of the history names is a client of its
			// own, which holds nothing.
			names = append(names, op.Holder)
		}
		if op.HasToken {
			toks = append(toks, op.Token)
		}
		if l := c.leaseOf(op); l != 0 {
			leases = append(leases, l)
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
		if hasLease(op) {
			lo, hi, loOK, hiOK := lease(*op, drift)
			if loOK {
				c.times = append(c.times, lo)
			}
			if hiOK {
				c.times = append(c.times, hi)
			}
		}
	}
	if err := c.stopped(0); err != nil {
		return err
	}
	index(names, c.clients, 1)
	index(keys, c.keys, 1)
	slices.Sort(toks)
	for _, t := range slices.Compact(toks) {
		c.tokens[t] = len(c.tokens) + 1
	}
	slices.Sort(leases)
	for _, l := range slices.Compact(leases) {
		c.leases[l] = len(c.leases) + 1
	}
	index(vals, c.values, 1)
	slices.Sort(c.times)
	c.times = slices.Compact(c.times)
	return nil
}

// stopped is the error of a conversion whose context is done, looked at
// on every stopEvery-th step i; nil otherwise.
func (c *converter) stopped(i int) error {
	if i%stopEvery != 0 || c.ctx.Err() == nil {
		return nil
	}
	return fmt.Errorf("convert: stopped: %w", context.Cause(c.ctx))
}

// hasLease says that op may have taken or renewed a lease: an ok or
// unknown acquire or renew (an unknown one may have taken effect).
func hasLease(op *history.Op) bool {
	return (op.Result == history.OK || op.Result == history.Unknown) && (op.Kind == history.Acquire || op.Kind == history.Renew)
}

// needsToken rejects the ops a fenced-lock trace cannot do without a token:
// an ok acquire, and a resource op that may have reached the resource (a
// fenced workload sends its lease's token with every one).
func needsToken(op *history.Op) error {
	if op.HasToken {
		return nil
	}
	switch {
	case op.Kind == history.Acquire && op.Result == history.OK,
		op.Kind == history.Write,
		op.Kind == history.Read && (op.Result == history.OK || op.Result == history.Rejected):
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

func (c *converter) build(ops []*history.Op, drift int64, settle time.Duration) (*Trace, error) {
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
		if err := c.stopped(i); err != nil {
			return nil, err
		}
		e := Event{
			Line: op.Line, Kind: string(op.Kind), Result: string(op.Result),
			Call: c.tick(op.Call), Return: tr.Never, Lo: tr.Never, Hi: tr.Never, Prev: -1, Count: -1,
		}
		if op.Kind == history.Inspect || op.Kind == history.Holds {
			e.Held = op.Kind == history.Inspect && op.Held
			if e.Held && op.Holder != "" {
				e.Holder = c.clients[op.Holder]
			}
			if op.HasHolds {
				e.Count = int(min(op.HoldCount, maxInt32))
			}
		}
		if !op.OpenEnded() {
			// An open-ended op (never returned, or a release of unknown
			// outcome) may take effect at any time after its call.
			e.Return = c.tick(op.Return)
		}
		if op.Kind == history.Fault {
			e.Fault = contract.FaultKind(op.Name)
		} else {
			e.Client, e.Key = c.clients[op.Client], c.keys[op.Key]
		}
		if op.HasToken {
			e.Token = c.tokens[op.Token]
		}
		if l := c.leaseOf(op); l != 0 {
			e.Lease = c.leases[l]
		}
		if op.HasValue {
			e.Value = c.values[op.Value]
		}
		if op.HasPrev {
			e.Prev = c.values[op.Prev]
		}
		if hasLease(op) {
			lo, hi, loOK, hiOK := lease(*op, drift)
			if loOK {
				e.Lo = c.tick(lo)
			}
			if hiOK {
				e.Hi = c.tick(hi)
			}
		}
		events[i] = e
	}
	// Failover windows, in ns: from the fault's call to its return plus
	// Settle (or for good, if it never returned).
	var windows [][2]int64
	for i, op := range ops {
		if op.Kind == history.Fault && (contract.FailsOver(events[i].Fault) || forgets(events[i].Fault)) {
			tr.Skewed = tr.Skewed || events[i].Fault == SkewWindowFault
			end := int64(math.MaxInt64)
			if op.Completed {
				end = satAdd(op.Return, int64(settle))
			}
			windows = append(windows, [2]int64{op.Call, end})
		}
	}
	for i, op := range ops {
		if op.Kind == history.Fault {
			continue
		}
		ret := int64(math.MaxInt64)
		if !op.OpenEnded() {
			ret = op.Return
		}
		for _, w := range windows {
			if w[0] <= ret && w[1] >= op.Call {
				events[i].Win = true
				break
			}
		}
	}
	if err := c.stopped(0); err != nil {
		return nil, err
	}
	markForeign(events)
	if err := c.stopped(0); err != nil {
		return nil, err
	}
	tr.Events, tr.Bounded = order(events)
	if err := c.stopped(0); err != nil {
		return nil, err
	}
	return tr, nil
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, len(m))
	for k, i := range m {
		out[i-1] = k
	}
	return out
}

// markForeign sets Foreign on the resource ops whose token another client
// owns: per key, the owner of a token is the client of its first ok
// acquire by call, else of its first ok resource op by call.
func markForeign(events []Event) {
	byCall := slices.Clone(events)
	slices.SortFunc(byCall, byCallOrder)
	type kt struct{ key, tok int }
	owner := map[kt]int{}
	resource := func(e Event) bool { return e.Kind == string(history.Write) || e.Kind == string(history.Read) }
	for _, pass := range []func(e Event) bool{
		func(e Event) bool { return e.Kind == string(history.Acquire) },
		resource,
	} {
		for _, e := range byCall {
			if e.Result == string(history.OK) && e.Token > 0 && pass(e) {
				if _, ok := owner[kt{e.Key, e.Token}]; !ok {
					owner[kt{e.Key, e.Token}] = e.Client
				}
			}
		}
	}
	for i, e := range events {
		if resource(e) && e.Token > 0 {
			events[i].Foreign = owner[kt{e.Key, e.Token}] != e.Client
		}
	}
}

// byCallOrder orders events as docs/DESIGN.md's "by call": by call, then
// return (never returned last: Return is then the trace's Never, above
// every tick), then line.
func byCallOrder(a, b Event) int {
	return cmp.Or(cmp.Compare(a.Call, b.Call), cmp.Compare(a.Return, b.Return), cmp.Compare(a.Line, b.Line))
}

// Windowed reports whether some event overlaps a failover window
// (Event.Win): the model lets two masters serve it.
func (t *Trace) Windowed() bool {
	return slices.ContainsFunc(t.Events, func(e Event) bool { return e.Win })
}

// order arranges events into one sequence: faults first (the spec reads
// nothing from their place), then each key's events by call, and sets each
// event's Upto; bounded says that MaxAhead cut some event's.
func order(events []Event) (out []Event, bounded bool) {
	out = make([]Event, 0, len(events))
	byKey := map[int][]Event{}
	var keys []int
	for _, e := range events {
		if e.Kind == string(history.Fault) {
			out = append(out, e)
			continue
		}
		if _, ok := byKey[e.Key]; !ok {
			keys = append(keys, e.Key)
		}
		byKey[e.Key] = append(byKey[e.Key], e)
	}
	slices.SortFunc(out, byCallOrder)
	for i := range out {
		out[i].Upto = i + 1
	}
	slices.Sort(keys)
	for _, k := range keys {
		evs := byKey[k]
		slices.SortFunc(evs, byCallOrder)
		base := len(out)
		for i := range evs {
			// The events called before this one returned may go first.
			j := i
			for j+1 < len(evs) && j-i < MaxAhead && evs[j+1].Call <= evs[i].Return {
				j++
			}
			bounded = bounded || j+1 < len(evs) && j-i == MaxAhead && evs[j+1].Call <= evs[i].Return
			evs[i].Upto = base + j + 1
		}
		out = append(out, evs...)
	}
	return out, bounded
}
