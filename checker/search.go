package checker

import (
	"context"
	"encoding/binary"
	"slices"

	"github.com/lockproof/lockproof/history"
)

// This file holds the linearizability search of one chunk of a partition.
//
// Porcupine answers "is there one linearization?"; chunking a long partition
// needs more: every state a linearization of the chunks so far can end in.
// With those sets the chunks chain exactly: the partition is linearizable
// iff each chunk has a linearization from some state the chunks before can
// end in, so a chunk that has none from any of them proves a violation
// without re-searching the whole partition (which is what made one bad read
// in 200k ops take tens of gigabytes).

// searchOp is an op of a chunk with its Porcupine-mapped times (a return
// before a call at the same instant: see pCall). An op that never returned
// (r == inf) floats: it may take effect at any later time, so it is not
// needed to end a chunk, and one not yet linearized carries over to the
// next (unlinearized at the end of the partition: it had no effect).
type searchOp struct {
	o    *lop
	c, r int64
	// carried: a floating op of an earlier chunk, put first in this one.
	carried bool
}

func (o searchOp) floats() bool { return o.r == inf }

// start is where the search of a chunk may begin: a state, and which
// floating ops from earlier chunks have not taken effect yet (indices into
// the chunk's ops).
type start struct {
	st       state
	floating []int
}

// settled reports whether op j of ops is a floating op carried in from an
// earlier chunk that already took effect in this start: not to be linearized
// again.
func (f start) settled(ops []searchOp, j int) bool {
	return ops[j].carried && !slices.Contains(f.floating, j)
}

// chunkSearch is one search of one chunk.
type chunkSearch struct {
	ctx  context.Context
	ops  []searchOp // by mapped call
	done []uint64   // bitset: linearized ops
	// tip is the linearization being built, a start index followed by
	// indices into ops, as a chain from its last element: sharing its
	// prefix, a copy of it costs nothing.
	tip  *seqNode
	seen map[string]struct{}
	key  []byte
	// need is the number of ops that do not float; fixed counts those done.
	need, fixed int
	// idle says when a floating op taking effect cannot help (see floatPruner).
	idle func(*lop, state) bool
	ends []start
	// deepest holds up to maxDeepest linearizations of the greatest length
	// reached, for the explanation of a chunk that cannot be linearized.
	deepest []*seqNode
	nodes   int
	stopped bool // ctx ended: the result is incomplete
	// below[j], for an ok acquire j whose token no other ok acquire of the
	// chunk has: how many ok acquires carry a smaller token (else -1);
	// okDone: how many ok acquires with a token are linearized. Tokens
	// strictly increase (the model's token order), so linearizing j while
	// one of those is not yet linearized leaves that one impossible.
	below  []int
	okDone int
}

// maxDeepest bounds the partial linearizations kept for an explanation.
const maxDeepest = 8

// endStates returns every start that a linearization of ops (sorted by
// mapped call) can end the chunk in when it begins in one of from: the state
// once every op that does not float is linearized, with the floating ops not
// yet linearized (the caller keeps only the maximal ones, see maximal, once
// it pruned them). Empty: no linearization from any of them; deepest then
// holds the longest partial ones, each a start index followed by op indices.
// stopped: ctx ended first, the answer is incomplete.
func endStates(ctx context.Context, ops []searchOp, from []start, idle func(*lop, state) bool) (ends []start, deepest [][]int, stopped bool) {
	s := &chunkSearch{ctx: ctx, ops: ops, done: make([]uint64, (len(ops)+63)/64),
		seen: map[string]struct{}{}, idle: idle}
	for _, o := range ops {
		if !o.floats() {
			s.need++
		}
	}
	s.below = tokenRanks(ops)
	for i, f := range from {
		for j := range ops {
			if f.settled(ops, j) {
				s.flip(j)
			}
		}
		s.tip = &seqNode{j: i, n: 1}
		s.dfs(0, f.st)
		clear(s.done)
		s.fixed, s.okDone = 0, 0
		if s.stopped {
			return nil, nil, true
		}
	}
	for _, t := range s.deepest {
		deepest = append(deepest, t.slice())
	}
	return s.ends, deepest, false
}

// maximal drops each start whose floating set is a strict subset of another
// start's with the same state (it can do nothing the other cannot), and
// duplicates.
func maximal(ctx context.Context, ends []start) []start {
	// Only starts of one state can dominate each other: grouped by state,
	// the pairs compared are those of a group, not every pair (223k ends
	// of a read-write lock's chunk would take minutes), and the budget is
	// looked at as they are.
	groups := map[state][]int{}
	for i, e := range ends {
		groups[e.st] = append(groups[e.st], i)
	}
	var out []start
	n := 0
	for i, a := range ends {
		dominated := false
		for _, j := range groups[a.st] {
			if n++; n&4095 == 0 && ctx.Err() != nil {
				return out
			}
			b := ends[j]
			if i != j && subset(a.floating, b.floating) && (len(a.floating) < len(b.floating) || j < i) {
				dominated = true
				break
			}
		}
		if !dominated {
			out = append(out, a)
		}
	}
	return out
}

// subset reports whether sorted a is a subset of sorted b.
func subset(a, b []int) bool {
	j := 0
	for _, x := range a {
		for j < len(b) && b[j] < x {
			j++
		}
		if j == len(b) || b[j] != x {
			return false
		}
	}
	return true
}

func (s *chunkSearch) isDone(i int) bool { return s.done[i/64]&(1<<(uint(i)%64)) != 0 }
func (s *chunkSearch) flip(i int)        { s.done[i/64] ^= 1 << (uint(i) % 64) }

// visit reports whether the node (lo, done, st) is new, and marks it seen.
// lo is the first op not linearized: the key holds the done bits from lo on,
// trimmed of trailing zero words, and the state.
func (s *chunkSearch) visit(lo int, st state) bool {
	k := s.key[:0]
	k = binary.AppendUvarint(k, uint64(lo))
	w0, w1 := lo/64, len(s.done)
	for w1 > w0 && s.done[w1-1] == 0 {
		w1--
	}
	for w := w0; w < w1; w++ {
		k = binary.LittleEndian.AppendUint64(k, s.done[w])
	}
	k = appendState(k, st)
	s.key = k
	if _, ok := s.seen[string(k)]; ok {
		return false
	}
	s.seen[string(k)] = struct{}{}
	return true
}

func appendState(k []byte, st state) []byte {
	k = append(k, '|')
	k = binary.LittleEndian.AppendUint32(k, uint32(st.holder))
	k = binary.LittleEndian.AppendUint32(k, uint32(st.holds))
	k = binary.LittleEndian.AppendUint32(k, uint32(st.phantoms))
	k = binary.LittleEndian.AppendUint64(k, st.holderTok)
	k = binary.LittleEndian.AppendUint64(k, uint64(st.validUntil))
	k = binary.LittleEndian.AppendUint64(k, uint64(st.expiredAfter))
	k = binary.LittleEndian.AppendUint64(k, st.lastTok)
	k = binary.LittleEndian.AppendUint64(k, uint64(st.now))
	k = binary.LittleEndian.AppendUint32(k, uint32(st.value))
	k = binary.LittleEndian.AppendUint64(k, st.maxTok)
	// The numbered holds: states that differ only in them are not one node.
	k = append(k, byte(st.nLeases), st.phantomLeases)
	for _, l := range st.leases[:st.nLeases] {
		k = binary.LittleEndian.AppendUint64(k, l)
	}
	var b byte
	if st.hasHolderTok {
		b |= 1
	}
	if st.hasLastTok {
		b |= 2
	}
	if st.hasMax {
		b |= 4
	}
	if st.untracked {
		b |= 8
	}
	k = append(k, b)
	// The holds of a key with modes (state.shared), length first.
	k = binary.AppendUvarint(k, uint64(len(st.shared)))
	return append(k, st.shared...)
}

// dfs extends the linearization from node (lo, s.done, st).
func (s *chunkSearch) dfs(lo int, st state) {
	for lo < len(s.ops) && s.isDone(lo) {
		lo++
	}
	if s.fixed == s.need {
		var fl []int
		for j := lo; j < len(s.ops); j++ {
			if !s.isDone(j) {
				fl = append(fl, j) // floating, not linearized
			}
		}
		s.ends = append(s.ends, start{st: st, floating: fl})
		return
	}
	if !s.visit(lo, st) {
		return
	}
	if s.nodes++; s.nodes&1023 == 0 && s.ctx.Err() != nil {
		s.stopped = true
		return
	}
	s.noteDepth()
	for _, v := range vanishes(st, nil) {
		// A phantom hold taken back before the next op (see vanishes).
		s.dfs(lo, v)
		if s.stopped {
			return
		}
	}
	if s.doomed(lo, st) {
		return
	}
	// Candidates: ops not linearized that no other op not linearized
	// precedes (returned before their call). Only ops called earlier can
	// precede an op, so one pass by call with the least return so far.
	minRet := inf
	for j := lo; j < len(s.ops); j++ {
		if s.ops[j].c > minRet {
			break
		}
		if s.isDone(j) {
			continue
		}
		minRet = min(minRet, s.ops[j].r)
		so := s.ops[j]
		n, r := apply(st, so.o)
		if s.below[j] > s.okDone {
			// An ok acquire with a smaller token is still to come, and
			// could not be linearized after this one: no linearization
			// goes on from here. The order is kept for the explanation
			// (what fails next is that token), nothing deeper is searched.
			if r == rOK {
				s.push(j)
				s.noteDepth()
				s.pop()
			}
			continue
		}
		s.flip(j)
		s.push(j)
		if !so.floats() {
			s.fixed++
		}
		tokened := so.o.tokenedGrant()
		if tokened {
			s.okDone++
		}
		switch {
		case so.floats():
			// It had no effect yet: it stays floating (never linearized
			// "with no effect", which would only multiply the orders).
			if r == rOK && n != st && !s.idle(so.o, st) {
				s.dfs(lo, n)
			}
		case so.o.maybe():
			if mayHaveNoEffect(so.o, r) {
				s.dfs(lo, st) // it had no effect
			}
			if r == rOK && n != st && !s.stopped {
				s.dfs(lo, n)
			}
		case r == rOK:
			s.dfs(lo, n)
		}
		// The other states it may lead to (others): a floating op's
		// reentrance is left out as before; the other holds a release
		// without a lease number may end are not.
		if !s.stopped && (!so.floats() || so.o.kind == history.Release) {
			for _, a := range others(st, so.o, nil) {
				if s.stopped {
					break
				}
				if so.floats() && a == st {
					continue
				}
				s.dfs(lo, a)
			}
		}
		if !so.floats() {
			s.fixed--
		}
		if tokened {
			s.okDone--
		}
		s.pop()
		s.flip(j)
		if s.stopped {
			return
		}
	}
}

// tokenedGrant reports whether o is an ok acquire with a token (one
// tokenRanks ranks): on a key with modes, of a write or permit hold (read
// holds are not held to the order of tokens).
func (o *lop) tokenedGrant() bool {
	return o.kind == history.Acquire && o.effective() && o.hasToken && !(o.shared && holdMode(o) == 'r')
}

// tokenRanks returns, per op of ops, how many ok acquires with a token carry
// a smaller token than it, for an ok acquire with a token no other ok
// acquire of ops has; -1 for every other op. An ok acquire is linearized
// for sure, and tokens strictly increase but for a nested hold's (the same
// token again, which is why a shared token ranks nothing), so such an
// acquire can only be linearized after all those: the search prunes the
// orders that put it first. Without it a crowded line, whose waiters'
// leases (counted from their calls) may have expired at every hand-off,
// let the search grant later waiters early in every combination before
// finding that an earlier token could no longer be granted.
func tokenRanks(ops []searchOp) []int {
	below := make([]int, len(ops))
	var toks []uint64
	count := map[uint64]int{}
	for j, o := range ops {
		below[j] = -1
		if o.o.tokenedGrant() {
			toks = append(toks, o.o.token)
			count[o.o.token]++
		}
	}
	slices.Sort(toks)
	for j, o := range ops {
		if o.o.tokenedGrant() && count[o.o.token] == 1 {
			below[j], _ = slices.BinarySearch(toks, o.o.token)
		}
	}
	return below
}

// doomed reports whether no linearization extends node (lo, s.done, st):
// the op m not linearized with the least return must take effect by m.r,
// after ops called by then only (an op linearized before m takes effect at
// or after its call), and none of those can make m possible:
//
//   - an ok release or renewal of a client that does not hold the key, or
//     not the hold the op names, while no acquire of that client is called
//     by m.r;
//   - an ok acquire while another client holds a lease that cannot have
//     expired by m.r (validUntil), and no hold of which may be taken back
//     unseen (vanishes), while no release of that holder, nor an acquire
//     of unknown outcome, is called by m.r.
//
// In a line, a hand-off may be linearized before the previous holder's
// release when that holder's lease (counted from its call) may have
// expired; such a branch dies at that release, and is cut here at once
// (a 20k-op line: 328 MiB instead of 759).
func (s *chunkSearch) doomed(lo int, st state) bool {
	m, minRet := -1, inf
	for j := lo; j < len(s.ops); j++ {
		if s.ops[j].c > minRet {
			break
		}
		if s.isDone(j) || s.ops[j].floats() {
			continue
		}
		if s.ops[j].r < minRet {
			m, minRet = j, s.ops[j].r
		}
	}
	if m < 0 || !s.ops[m].o.effective() || s.ops[m].o.shared {
		return false // on a key with modes (applyShared) nothing is cut early
	}
	mo := s.ops[m].o
	var needKind history.Kind
	var needClient int32
	switch {
	case (mo.kind == history.Release || mo.kind == history.Renew) && (st.holder != mo.client || numbered(st, mo) && st.leaseAt(mo) < 0):
		needKind, needClient = history.Acquire, mo.client
	case mo.kind == history.Acquire && st.holder != 0 && st.holder != mo.client && (st.validUntil == inf || st.validUntil+1 > minRet) && st.phantoms < st.holds:
		needKind, needClient = history.Release, st.holder
	default:
		return false
	}
	for j := lo; j < len(s.ops) && s.ops[j].c <= minRet; j++ {
		o := s.ops[j].o
		if s.isDone(j) || o.client != needClient {
			continue
		}
		// The holder's acquire of unknown outcome may end its lease too:
		// as a new lease of a phantom hold, taken back unseen (vanishes).
		if o.kind == needKind || needKind == history.Release && o.kind == history.Acquire && o.maybe() {
			return false
		}
	}
	return true
}

// seqNode is one element of a linearization being built, linked to the
// ones before it; n is the linearization's length up to it.
type seqNode struct {
	j  int
	up *seqNode
	n  int
}

// slice is the linearization ending in t, first element first.
func (t *seqNode) slice() []int {
	out := make([]int, t.n)
	for x := t; x != nil; x = x.up {
		out[x.n-1] = x.j
	}
	return out
}

func (s *chunkSearch) push(j int) { s.tip = &seqNode{j: j, up: s.tip, n: s.tip.n + 1} }
func (s *chunkSearch) pop()       { s.tip = s.tip.up }

// noteDepth keeps the current linearization if it is among the longest.
// It keeps its tip (seqNode): copying the linearization at every new depth
// cost the square of the chunk's length, 76 GB allocated for a 100k-op
// line of waiters, where the search goes one deeper at every step.
func (s *chunkSearch) noteDepth() {
	switch {
	case len(s.deepest) > 0 && s.tip.n < s.deepest[0].n:
		return
	case len(s.deepest) > 0 && s.tip.n > s.deepest[0].n:
		s.deepest = s.deepest[:0]
	case len(s.deepest) >= maxDeepest:
		return
	}
	s.deepest = append(s.deepest, s.tip)
}
