package checker

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/tla"
	"github.com/lockproof/lockproof/tla/trace"
)

// TestModelDifferential: the TLA+ trace model (tla/TraceFencedLock.tla) and
// the checker, two verifiers of docs/DESIGN.md, agree on random fenced
// histories from the differential generator (genHistory, with a token on
// every op that a fenced history must carry), as tla.Result.Disagreement
// states the agreement. It needs TLC ($TLA2TOOLS_JAR) and is skipped
// without it.
//
// TLC starts a JVM per run, so histories are batched: each is given keys
// of its own (keys are independent objects for both verifiers), the ones
// the checker passes go into one trace that the model must accept whole,
// and each one the checker refuses is validated alone and must be
// rejected. A batch the model rejects names the history its refused line
// is in.
var modelSeed = flag.Uint64("model.seed", 2026, "seed of TestModelDifferential's histories")

func TestModelDifferential(t *testing.T) {
	jar := os.Getenv("TLA2TOOLS_JAR")
	if jar == "" {
		t.Skip("TLA2TOOLS_JAR not set: no TLC to run (see tla/README.md)")
	}
	v := &tla.Validator{Jar: jar}
	if err := v.Available(); err != nil {
		t.Fatalf("TLA2TOOLS_JAR=%s: %v", jar, err)
	}
	passes, refusals := 600, 40
	if testing.Short() {
		passes, refusals = 200, 12
	}
	const batch = 100
	r := rand.New(rand.NewPCG(*modelSeed, 24))
	var passed, refused [][]history.Op
	for tries := 0; (len(passed) < passes || len(refused) < refusals) && tries < 100*(passes+refusals); tries++ {
		ops := fenced(r, genHistory(r))
		if _, err := trace.Convert(ops, trace.Options{}); err != nil {
			t.Fatalf("convert a generated history: %v", err)
		}
		res, err := Check(context.Background(), ops, Options{})
		if err != nil {
			t.Fatal(err)
		}
		lease, resource := res.Of(contract.PropLease).Verdict, res.Of(contract.PropResource).Verdict
		switch {
		case lease == Unknown || resource == Unknown:
		case lease == Violated || resource == Violated:
			if len(refused) < refusals {
				refused = append(refused, ops)
			}
		case len(passed) < passes:
			passed = append(passed, ops)
		}
	}
	if len(passed) < passes || len(refused) < refusals {
		t.Fatalf("the generator gave %d passed and %d refused histories; want %d and %d", len(passed), len(refused), passes, refusals)
	}
	type job struct {
		hs       [][]history.Op
		violated bool
	}
	var jobs []job
	for i := 0; i < len(passed); i += batch {
		jobs = append(jobs, job{hs: passed[i:min(i+batch, len(passed))]})
	}
	for _, h := range refused {
		jobs = append(jobs, job{hs: [][]history.Op{h}, violated: true})
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	work := make(chan job)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range work {
				ops, owner := joinHistories(j.hs)
				res, err := v.Validate(context.Background(), ops)
				mu.Lock()
				switch {
				case err != nil:
					t.Errorf("validate: %v", err)
				case j.violated && res.Accepted:
					t.Errorf("the checker refuses this history, the model accepts it:\n%s", dump(j.hs[0]))
				case !j.violated && !res.Accepted:
					h := j.hs[owner[res.Line]]
					c, _ := Check(context.Background(), h, Options{})
					t.Errorf("the checker passes this history (lease %s, resource %s), the model refuses its line %d:\n%s",
						c.Of(contract.PropLease).Verdict, c.Of(contract.PropResource).Verdict, res.Line-firstLine(owner, res.Line)+1, dump(h))
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
		t.Logf("%d histories the checker passes (in batches of %d), %d it refuses: model and checker agree on all", len(passed), batch, len(refused))
	}
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
// own, lines renumbered; owner maps a joined line to its history's index.
func joinHistories(hs [][]history.Op) (ops []history.Op, owner map[int]int) {
	owner = map[int]int{}
	for i, h := range hs {
		for _, o := range h {
			o.Key = fmt.Sprintf("h%d-%s", i, o.Key)
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
