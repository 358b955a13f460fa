package checker

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

// inf stands for "never": the return time of an op that never completed, the
// expiry of a lease without TTL.
const inf = int64(math.MaxInt64)

// lop is an op prepared for checking: times resolved, strings interned.
type lop struct {
	idx    int // index in the checked slice
	src    *history.Op
	kind   history.Kind
	client int32 // 1-based client id; 0 is "nobody"
	result history.Result
	call   int64
	ret    int64 // inf when the op never completed

	// Lease ops: how long a lease taken (or renewed) by this op surely lasts
	// (floor(T*(1-drift))) and at most lasts (ceil(T*(1+drift))); inf without TTL.
	validFor, expireFor int64

	token    uint64
	hasToken bool

	value, prev int32 // interned (prepared.values); 0 is ""
	hasPrev     bool

	wait bool // a blocking acquire (history.Op.Wait)

	// Claims (history.Op.ValidUntil, Lease, Checked).
	validUntil int64
	hasValid   bool
	lease      uint64
	// hold is the lease number the lease model reads (see state.leases,
	// numberHolds): the op's lease when an acquire of its client on the
	// key has that number and another lease op of theirs does too; 0
	// otherwise (the op is read by count, as a history without numbers
	// is).
	hold uint64
	// shared: a lease op of a key with modes (sharedKey): the lease model
	// reads it by applyShared.
	shared   bool
	checked  bool
	inLine   int64 // a waiter surely in line by then (history.Op.InLine); inf: not said
	deadline int64 // when the op's context expired (history.Op.Deadline); inf: not said
	// upto is the latest instant the op can take effect: its return, or
	// inf when it is open-ended (history.Op.OpenEnded: it never returned,
	// or a release of unknown outcome). The models' windows use it; the
	// rules that ask when the op returned use ret.
	upto int64
	// noNest: the lock is not reentrant (Options.NotReentrant): an acquire
	// by the holder is never a nested hold.
	noNest bool
}

func (o *lop) line() int { return lineOf(o.src, o.idx) }

// effective reports whether the op surely took effect (ok); maybe reports
// whether it may have (unknown).
func (o *lop) effective() bool { return o.result == history.OK }
func (o *lop) maybe() bool     { return o.result == history.Unknown }

// keyOps holds the prepared ops of one key.
type keyOps struct {
	key      string
	lease    []*lop // acquire, release, renew: all results
	resource []*lop // write, read: all results
	notices  []*lop // lost: loss notices
	closes   []*lop // close: a client closing its lock handle
	inspects []*lop // inspect, holds: what the lock said of the key's holders
	samples  []*lop // footprint: what the lock kept in Redis for the key
	asks     []*lop // ttl: what the lock's server said of a lease's validity

	claimsOnce sync.Once   // builds claims
	claims     *claimIndex // the claims and loss-notice rules' index (claimIndex)
}

// prepared is a history ready for checking.
type prepared struct {
	ops     []history.Op
	clients []string // index = client id; clients[0] = ""
	values  []string // index = value id; values[0] = ""
	keys    []*keyOps
	faults  []int // indices of fault ops
	// excusing are the faults whose windows excuse a late waiter, an
	// overtaken one or a late loss notice: all but those that leave Redis
	// answering every client (contract.KeepsServing).
	excusing []int
	// stopping are the faults that freeze or kill clients
	// (contract.StopsClients): their windows excuse a late return.
	stopping []int
	// closed maps a client to its ok close that returned first (the
	// calls property's closed-grant rule): a client is one handle, on
	// every key.
	closed map[int32]*lop
	counts Counts
	// end is the latest instant the history shows (a call, a return, a
	// fault window's end): a promise due after it was never due.
	end int64
}

func satAdd(a, b int64) int64 {
	if a == inf || b == inf || a > inf-b {
		return inf
	}
	return a + b
}

// leaseSpan returns floor(T*(1-drift)) and ceil(T*(1+drift)) in ns, inf for no TTL.
func leaseSpan(ttlMs int64, drift float64) (validFor, expireFor int64) {
	if ttlMs <= 0 {
		return inf, inf
	}
	t := float64(ttlMs) * float64(time.Millisecond)
	lo, hi := math.Floor(t*(1-drift)), math.Ceil(t*(1+drift))
	if hi >= float64(inf) {
		return inf, inf
	}
	return int64(lo), int64(hi)
}

// prepare validates ops and splits them by key.
func prepare(ops []history.Op, drift float64) (*prepared, error) {
	return prepareUntil(ops, drift, nil)
}

// errLate is prepareUntil's error once its late flag is up.
var errLate = errors.New("stopped while preparing")

// prepareUntil is prepare that gives up with errLate once late (if not
// nil) is true, looked at every keyBatch ops: on a history of a million
// keys, preparing takes seconds and most of the check's memory.
func prepareUntil(ops []history.Op, drift float64, late *atomic.Bool) (*prepared, error) {
	p := &prepared{ops: ops, clients: []string{""}, values: []string{""}, closed: map[int32]*lop{}}
	clientID := map[string]int32{}
	byKey := map[string]*keyOps{}
	valueID := map[string]int32{"": 0}
	intern := func(s string) int32 {
		v, ok := valueID[s]
		if !ok {
			v = int32(len(p.values))
			valueID[s] = v
			p.values = append(p.values, s)
		}
		return v
	}
	p.counts.Ops = len(ops)
	for i := range ops {
		if late != nil && i%keyBatch == 0 && late.Load() {
			return nil, errLate
		}
		o := &ops[i]
		if err := o.Validate(); err != nil {
			return nil, fmt.Errorf("op %d: %w", i+1, err)
		}
		p.end = max(p.end, o.Call)
		if o.Completed {
			p.end = max(p.end, o.Return)
		}
		if o.Kind == history.Fault {
			p.faults = append(p.faults, i)
			if !contract.KeepsServing(contract.FaultKind(o.Name)) {
				p.excusing = append(p.excusing, i)
			}
			if contract.StopsClients(contract.FaultKind(o.Name)) {
				p.stopping = append(p.stopping, i)
			}
			p.counts.Faults++
			continue
		}
		id, ok := clientID[o.Client]
		if !ok {
			id = int32(len(p.clients))
			clientID[o.Client] = id
			p.clients = append(p.clients, o.Client)
		}
		k := byKey[o.Key]
		if k == nil {
			k = &keyOps{key: o.Key}
			byKey[o.Key] = k
			p.keys = append(p.keys, k)
		}
		l := &lop{idx: i, src: o, kind: o.Kind, client: id, result: o.Result, call: o.Call, ret: inf,
			token: o.Token, hasToken: o.HasToken, hasPrev: o.HasPrev, wait: o.Wait,
			validUntil: o.ValidUntil, hasValid: o.HasValid, lease: o.Hold, checked: o.Checked, inLine: inf, deadline: inf}
		if o.HasInLine {
			l.inLine = o.InLine
		}
		if o.HasDeadline {
			l.deadline = o.Deadline
		}
		if o.Completed {
			l.ret = o.Return
		} else {
			// An op that never returned cannot have observed anything: it may or may not have taken effect.
			l.result = history.Unknown
		}
		l.upto = l.ret
		if o.OpenEnded() {
			l.upto = inf
		}
		switch o.Kind {
		case history.Acquire, history.Release, history.Renew:
			l.validFor, l.expireFor = leaseSpan(o.TTLMillis, drift)
			k.lease = append(k.lease, l)
			p.counts.LeaseOps++
		case history.Write, history.Read:
			l.value = intern(o.Value)
			if o.HasPrev {
				l.prev = intern(o.Prev)
			}
			k.resource = append(k.resource, l)
			p.counts.ResourceOps++
			if o.Result == history.Rejected {
				p.counts.Rejected++
			}
		case history.Lost:
			k.notices = append(k.notices, l)
		case history.Inspect, history.Holds:
			k.inspects = append(k.inspects, l)
		case history.Footprint:
			k.samples = append(k.samples, l)
		case history.TTL:
			k.asks = append(k.asks, l)
		case history.Close:
			k.closes = append(k.closes, l)
			if prev := p.closed[id]; o.Completed && o.Result == history.OK && (prev == nil || o.Return < prev.ret) {
				p.closed[id] = l
			}
		}
	}
	p.counts.Keys = len(p.keys)
	sort.Slice(p.keys, func(i, j int) bool { return p.keys[i].key < p.keys[j].key })
	for i, k := range p.keys {
		if late != nil && i%keyBatch == 0 && late.Load() {
			return nil, errLate
		}
		numberHolds(k.lease)
		if sharedKey(k) {
			for _, o := range k.lease {
				o.shared = true
			}
		}
		byCall(k.lease)
		byCall(k.resource)
		byCall(k.notices)
		byCall(k.closes)
		byCall(k.inspects)
		byCall(k.samples)
		byCall(k.asks)
	}
	return p, nil
}

// numberHolds sets the hold the lease model reads of each lease op of a
// key (lop.hold). A release or renew whose number no acquire of its
// client on the key carries names no hold the model can know of, and is
// read by count. So is an acquire whose number no other lease op of its
// client on the key carries: nothing can tell its hold from one without a
// number (a release by count ends either alike), and reading them alike
// keeps the phantom holds of acquires of unknown outcome, which are
// seldom released by number, interchangeable: numbered, the holds taken
// back unseen were told apart, and their subsets multiplied the states
// (getset × reset, 88 unknown acquires: the search ran out of its budget
// where it had passed in a second).
func numberHolds(lease []*lop) {
	type ref struct {
		client int32
		lease  uint64
	}
	ops, acquired := map[ref]int{}, map[ref]bool{}
	for _, o := range lease {
		if o.lease != 0 {
			ops[ref{o.client, o.lease}]++
			acquired[ref{o.client, o.lease}] = acquired[ref{o.client, o.lease}] || o.kind == history.Acquire
		}
	}
	for _, o := range lease {
		if r := (ref{o.client, o.lease}); acquired[r] && ops[r] > 1 {
			o.hold = o.lease
		}
	}
}

// byCall sorts ops by call, then return, then input order.
func byCall(ls []*lop) {
	sort.SliceStable(ls, func(i, j int) bool {
		if ls[i].call != ls[j].call {
			return ls[i].call < ls[j].call
		}
		return ls[i].ret < ls[j].ret
	})
}

// describe renders an op for explanations: `acquire by "a" (line 2, token 7, ok)`.
func (p *prepared) describe(o *lop) string {
	s := string(o.kind) + " by " + strconv.Quote(p.clients[o.client]) + " (line " + strconv.Itoa(o.line())
	if o.hasToken {
		s += ", token " + strconv.FormatUint(o.token, 10)
	}
	s += ", " + string(o.src.Result) + ")"
	return s
}

// fmtTime renders a history time (ns) for explanations.
func fmtTime(t int64) string {
	if t == inf {
		return "never"
	}
	return time.Duration(t).String()
}
