package checker

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/internal/testlong"
	"github.com/lockproof/lockproof/internal/tlatest"
	"github.com/lockproof/lockproof/tla/trace"
)

// TestModelDifferential: the TLA+ trace model (tla/TraceFencedLock.tla) and
// the checker, two verifiers of docs/DESIGN.md, agree on random fenced
// histories from the differential generator (genHistory, with a token on
// every op that a fenced history carries, lease numbers in one history of
// two (withHolds), and in one history of four a failover or failover-skew
// window), as tla.Result.Disagreement states the agreement. It needs TLC ($TLA2TOOLS_JAR) and is skipped without it.
//
// TLC starts a JVM per run, so histories are batched: each is given keys
// of its own and a time of its own (keys are independent objects for both
// verifiers, and a window reaches only its own history's ops), the ones
// the checker passes go into one trace that the model must accept whole
// (a window only widens what the model accepts), and each one the checker
// refuses is validated alone and judged by Disagreement. A batch the
// model rejects names the history its refused line is in.
var modelSeed = flag.Uint64("model.seed", 2026, "seed of TestModelDifferential's histories")

func TestModelDifferential(t *testing.T) {
	v := tlatest.Need(t)
	// The nightly breadth (testlong) validates 600 passed histories and
	// 48+12 refused ones, each refused one in a JVM of its own (about 300 s
	// of a core); the test command a third of the refused ones, the first
	// of the same seeded stream.
	passes, refusals := 600, 48
	switch {
	case testing.Short():
		passes, refusals = 200, 16
	case !testlong.On():
		passes, refusals = 300, 16
	}
	const batch = 100
	r := rand.New(rand.NewPCG(*modelSeed, 24))
	type verdicts struct{ lease, resource contract.Verdict }
	var passed, refused [][]history.Op
	var refusedV []verdicts
	windowed, saidRefused := 0, 0
	for tries := 0; (len(passed) < passes || len(refused)-saidRefused < refusals || saidRefused < refusals/4) && tries < 100*(passes+refusals); tries++ {
		ops := withWindow(r, withInspects(r, fenced(r, withHolds(r, genHistory(r)))))
		if _, err := trace.Convert(ops, trace.Options{}); err != nil {
			t.Fatalf("convert a generated history: %v", err)
		}
		res, err := Check(context.Background(), ops, Options{})
		if err != nil {
			t.Fatal(err)
		}
		lease, resource := res.Of(contract.PropLease).Verdict, res.Of(contract.PropResource).Verdict
		win := ops[len(ops)-1].Kind == history.Fault
		switch {
		case lease == contract.Unknown || resource == contract.Unknown:
		case lease == contract.Violated && resource != contract.Violated && win:
			// The model may accept it (two masters) or not: both agree.
		case lease == contract.Violated || resource == contract.Violated:
			// A quarter more, refused only for what the lock said of
			// its holders, which the model must refuse too.
			said := resource != contract.Violated && saidOnly(res)
			if said && saidRefused < refusals/4 || !said && len(refused)-saidRefused < refusals {
				refused, refusedV = append(refused, ops), append(refusedV, verdicts{lease, resource})
				if said {
					saidRefused++
				}
			}
		case len(passed) < passes:
			passed = append(passed, ops)
			if win {
				windowed++
			}
		}
	}
	// The directed cases of holds of unknown outcome, which random
	// histories seldom build, and of holds told apart by lease number,
	// which they do not carry, each alone.
	for _, tc := range append(unknownHoldCases(), holdNumberCases()...) {
		v := verdicts{tc.want.lease, tc.want.resource}
		if v.lease == contract.OK && v.resource != contract.Violated {
			passed = append(passed, tc.ops)
			continue
		}
		refused, refusedV = append(refused, tc.ops), append(refusedV, v)
	}
	if len(passed) < passes || len(refused)-saidRefused < refusals || windowed < passes/8 || saidRefused < refusals/4 {
		t.Fatalf("the generator gave %d passed (%d with a window) and %d+%d refused histories (the second only for what the lock said); want %d (%d) and %d+%d",
			len(passed), windowed, len(refused)-saidRefused, saidRefused, passes, passes/8, refusals, refusals/4)
	}
	type job struct {
		hs [][]history.Op
		v  *verdicts // the checker's verdicts on a refused history
	}
	var jobs []job
	for i := 0; i < len(passed); i += batch {
		jobs = append(jobs, job{hs: passed[i:min(i+batch, len(passed))]})
	}
	for i, h := range refused {
		jobs = append(jobs, job{hs: [][]history.Op{h}, v: &refusedV[i]})
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	stricter := 0
	work := make(chan job)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range work {
				ops, owner := joinHistories(j.hs)
				res, err := v.Validate(context.Background(), ops)
				// The model may refuse an answer of the lock that the
				// checker's inspect rules pass (tla.Result.Said): drop
				// that answer and validate the rest, which it must accept.
				var said []history.Op
				for j.v == nil && err == nil && !res.Accepted && res.Said {
					i := slices.IndexFunc(ops, func(o history.Op) bool { return o.Line == res.Line })
					said = append(said, ops[i])
					ops = slices.Delete(ops, i, i+1)
					res, err = v.Validate(context.Background(), ops)
				}
				mu.Lock()
				stricter += len(said)
				for _, o := range said {
					t.Logf("the model refuses an answer the checker passes (line %d of its history):\n%s",
						o.Line-firstLine(owner, o.Line)+1, dump(j.hs[owner[o.Line]]))
				}
				switch {
				case err != nil:
					t.Errorf("validate: %v", err)
				case j.v != nil:
					if err := res.Disagreement(j.v.lease, j.v.resource); err != nil {
						t.Errorf("%v (lease %s, resource %s):\n%s", err, j.v.lease, j.v.resource, dump(j.hs[0]))
					}
				case !res.Accepted:
					h := j.hs[owner[res.Line]]
					t.Errorf("the checker passes this history, the model refuses its line %d:\n%s",
						res.Line-firstLine(owner, res.Line)+1, dump(h))
				}
				mu.Unlock()
			}
		}()
	}
	for _, j := range jobs {
		work <- j
	}
	close(work)
	wg.Wait()
	if !t.Failed() {
		t.Logf("%d histories the checker passes (%d with a failover window; in batches of %d), %d it refuses (%d only for what the lock said): model and checker agree on all; the model refused %d answers of the lock that the checker passes",
			len(passed), windowed, batch, len(refused), saidRefused, stricter)
	}
}

// withWindow adds, to one history in four, a failover window (one in
// three of them failover-skew) over a stretch of its ops, as its last line.
func withWindow(r *rand.Rand, ops []history.Op) []history.Op {
	if r.IntN(4) > 0 || len(ops) == 0 {
		return ops
	}
	a, b := ops[r.IntN(len(ops))], ops[r.IntN(len(ops))]
	call := min(a.Call, b.Call)
	name := "failover partition"
	if r.IntN(3) == 0 {
		name = "failover-skew partition"
	}
	w := history.Op{Line: len(ops) + 1, Kind: history.Fault, Name: name, Call: call, Return: call + int64(r.IntN(200))*int64(time.Millisecond), Completed: r.IntN(5) > 0}
	if !w.Completed {
		w.Return = 0
	}
	return append(ops, w)
}

// saidOnly says that every lease violation res lists is of the inspect
// rules: the lock said something wrong of its holders, and did nothing
// else wrong.
func saidOnly(res *Result) bool {
	pr := res.Of(contract.PropLease)
	if pr == nil || pr.Verdict != contract.Violated || len(pr.Violations) < pr.ViolationCount {
		return false
	}
	for _, v := range pr.Violations {
		if v.Rule != RuleInspectFree && v.Rule != RuleInspectHolder && v.Rule != RuleHoldCount {
			return false
		}
	}
	return true
}

// withInspects adds, to one history in three, up to three inspect or
// holds ops on its keys: what a lock said of the key's holders, right or
// wrong (free, held by one of the history's clients or by a stranger,
// with a fence and a count or without), most of them ok, at random
// instants and at the boundaries of the history's ops.
func withInspects(r *rand.Rand, ops []history.Op) []history.Op {
	if r.IntN(3) > 0 || len(ops) == 0 {
		return ops
	}
	const ms = int64(time.Millisecond)
	var clients, keys []string
	for _, o := range ops {
		if !slices.Contains(clients, o.Client) {
			clients = append(clients, o.Client)
		}
		if !slices.Contains(keys, o.Key) {
			keys = append(keys, o.Key)
		}
	}
	for range 1 + r.IntN(3) {
		p := ops[r.IntN(len(ops))]
		call := p.Call + []int64{0, 1, -1, 50 * ms, 99 * ms, 101 * ms, 99*ms + 1}[r.IntN(7)] + int64(r.IntN(20))*ms
		o := history.Op{
			Client: clients[r.IntN(len(clients))], Key: keys[r.IntN(len(keys))],
			Call: max(0, call), Completed: true, Result: history.OK,
		}
		o.Return = o.Call + int64(r.IntN(10))*ms
		if r.IntN(6) == 0 {
			o.Result = history.Unknown
		}
		if r.IntN(3) == 0 {
			o.Kind = history.Holds
			o.HoldCount, o.HasHolds = int64(r.IntN(3)), true
		} else {
			o.Kind = history.Inspect
			if r.IntN(3) > 0 {
				o.Held = true
				o.Holder = append(slices.Clone(clients), "", "stranger")[r.IntN(len(clients)+2)]
				if r.IntN(2) == 0 {
					o.Token, o.HasToken = uint64(1+r.IntN(4)), true
				}
				if r.IntN(2) == 0 && o.Holder != "" {
					o.HoldCount, o.HasHolds = int64(r.IntN(3)), true
				}
			}
		}
		o.Line = len(ops) + 1
		ops = append(ops, o)
	}
	return ops
}

// fenced gives every op that a fenced history carries a token (ok
// acquires, and every release, renew, write and read) one from the
// generator's range.
func fenced(r *rand.Rand, ops []history.Op) []history.Op {
	for i := range ops {
		o := &ops[i]
		// A fenced lock returns a token with every ok acquire, and its
		// client sends it with every release, renew, write and read.
		needs := o.Kind == history.Acquire && o.Result == history.OK || o.Kind != history.Acquire
		if needs && !o.HasToken {
			o.Token, o.HasToken = uint64(1+r.IntN(4)), true
		}
	}
	return ops
}

// joinHistories puts histories side by side in one, each on keys of its
// own and an hour of its own (a failover window, with the trace's settle
// time after it, reaches no other history's ops), lines renumbered; owner
// maps a joined line to its history's index.
func joinHistories(hs [][]history.Op) (ops []history.Op, owner map[int]int) {
	owner = map[int]int{}
	for i, h := range hs {
		shift := int64(i) * int64(time.Hour)
		for _, o := range h {
			o.Call += shift
			if o.Completed {
				o.Return += shift
			}
			if o.Kind != history.Fault {
				o.Key = fmt.Sprintf("h%d-%s", i, o.Key)
			}
			o.Line = len(ops) + 1
			owner[o.Line] = i
			ops = append(ops, o)
		}
	}
	return ops, owner
}

// firstLine is the first joined line of the history that line is in.
func firstLine(owner map[int]int, line int) int {
	for line > 1 && owner[line-1] == owner[line] {
		line--
	}
	return line
}

func dump(ops []history.Op) string {
	var b strings.Builder
	w := history.NewWriter(&b)
	for _, o := range slices.Clone(ops) {
		_ = w.WriteOp(o)
	}
	_ = w.Flush()
	return b.String()
}
