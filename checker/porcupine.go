package checker

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

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
