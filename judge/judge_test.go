package judge

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/checker"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/locker"
)

// ms is a history instant of n milliseconds.
func ms(n int64) int64 { return n * int64(time.Millisecond) }

// violated is a result whose property prop broke once, its witnesses
// spanning [from, to] ms.
func violated(prop string, from, to int64) *checker.Result {
	ret := ms(to)
	return &checker.Result{Props: []checker.PropertyResult{{ID: prop, Verdict: contract.Violated,
		Violations: []checker.Violation{{Rule: "r", Lines: []int{3, 7}, Ops: []checker.OpRef{{Line: 3, Call: ms(from), Return: &ret}}}}}}}
}

// predict: failover may break the lease and liveness, key-loss the
// lease, clock-skew says nothing (any), everything else holds.
func predict(kind string) locker.Prediction {
	p := locker.AllHold()
	switch kind {
	case contract.FaultFailover:
		p.Set(contract.WantMay, contract.PropLease, contract.PropLiveness)
	case contract.FaultKeyLoss:
		p.Set(contract.WantMay, contract.PropLease)
	case contract.FaultClockSkew:
		p.Set(contract.WantAny, contract.PropLease)
	case contract.FaultPubSubReset:
		p.Set(contract.WantMay, contract.PropFairness)
	case contract.FaultNone:
		p.Set(contract.WantMay, contract.PropClaims) // a defect that needs no fault
	}
	return p
}

// TestUnexcused: a break is excused by a window of a fault that may cause
// it, when a witness overlaps the window or follows it within the
// contract's bound, and by no other window.
func TestUnexcused(t *testing.T) {
	b := Bounds{TTL: 500 * time.Millisecond}
	failover := Window{Kind: contract.FaultFailover, Start: ms(1000), End: ms(1500)}
	latency := Window{Kind: contract.FaultLatency, Start: ms(0), End: ms(5000)}
	pubsub := Window{Kind: contract.FaultPubSubReset, Start: ms(1000), End: ms(1500)}
	for _, c := range []struct {
		name     string
		res      *checker.Result
		ws       Windows
		excused  bool
		wantText string
	}{
		{"inside the window", violated(contract.PropLease, 1200, 1300), Windows{failover}, true, ""},
		{"within 2T after it", violated(contract.PropLease, 2400, 2600), Windows{failover}, true, ""},
		{"past 2T after it", violated(contract.PropLease, 2600, 2700), Windows{failover}, false, "lease violated outside every window that excuses it (r, lines 3,7; windows: failover)"},
		{"before it", violated(contract.PropLease, 100, 200), Windows{failover}, false, "windows: failover"},
		{"a window of a fault that cannot cause it", violated(contract.PropLease, 100, 200), Windows{failover, latency}, false, "windows: failover"},
		{"fairness within T after a pubsub-reset", violated(contract.PropFairness, 1900, 2100), Windows{pubsub}, true, ""},
		{"fairness past T after a pubsub-reset", violated(contract.PropFairness, 2100, 2200), Windows{pubsub}, false, "windows: pubsub-reset"},
		{"liveness after a failover: to the end", violated(contract.PropLiveness, 9000, 9100), Windows{failover}, true, ""},
		{"no window that may excuse it: the prediction decides", violated(contract.PropLease, 100, 200), Windows{latency}, true, ""},
		{"a break the lock may show with no fault needs no window", violated(contract.PropClaims, 100, 200), Windows{failover}, true, ""},
		{"a fault with no prediction excuses anywhere", violated(contract.PropLease, 100, 200), Windows{failover, {Kind: contract.FaultClockSkew, Start: ms(4000), End: ms(4100)}}, true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Unexcused(c.res, c.ws, predict, b)
			if c.excused != (len(got) == 0) {
				t.Fatalf("unexcused %q, want excused %v", got, c.excused)
			}
			if c.wantText != "" && !strings.Contains(got[0], c.wantText) {
				t.Errorf("%q, want it to say %q", got[0], c.wantText)
			}
		})
	}
	// One violation near the window excuses the property's others.
	res := violated(contract.PropLease, 100, 200)
	near := ms(1300)
	res.Props[0].Violations = append(res.Props[0].Violations, checker.Violation{Rule: "r", Ops: []checker.OpRef{{Call: ms(1200), Return: &near}}})
	if got := Unexcused(res, Windows{failover}, predict, b); len(got) != 0 {
		t.Errorf("a property with one violation in the window: %q", got)
	}
}

// TestBinomialCDF: the tail Promise judges a cell's found count by.
func TestBinomialCDF(t *testing.T) {
	if p := binomialCDF(10, 10, 0.9); p < 0.999999 || p > 1 {
		t.Errorf("binomialCDF(10, 10, 0.9) = %v; want 1", p)
	}
	if p := binomialCDF(0, 1, 0.9); p < 0.0999 || p > 0.1001 {
		t.Errorf("binomialCDF(0, 1, 0.9) = %v; want 0.1", p)
	}
	if p := binomialCDF(4, 10, 0.9); p < 1.4e-4 || p > 1.5e-4 {
		t.Errorf("binomialCDF(4, 10, 0.9) = %v; want 1.47e-4", p)
	}
}

// TestRecord: a row states what the prediction expects of each property,
// and lists the ones it allows to break.
func TestRecord(t *testing.T) {
	exp := locker.AllHold()
	exp.Set(contract.WantViolated, contract.PropClaims)
	exp.Set(contract.WantMay, contract.PropLease, contract.PropFairness)
	exp.Set(contract.WantAny, contract.PropResource)
	row := &contract.Row{MayViolate: []string{"stale"}}
	Record(row, exp)
	if row.Expected[contract.PropClaims] != contract.Violated || row.Expected[contract.PropLiveness] != contract.OK {
		t.Errorf("Expected = %v; want claims violated, liveness ok", row.Expected)
	}
	if _, ok := row.Expected[contract.PropResource]; ok {
		t.Errorf("Expected = %v: a property with no prediction expects nothing", row.Expected)
	}
	if _, ok := row.Expected[contract.PropLease]; ok {
		t.Errorf("Expected = %v: a property that may break expects no verdict", row.Expected)
	}
	if want := []string{contract.PropLease, contract.PropFairness}; !slices.Equal(row.MayViolate, want) {
		t.Errorf("MayViolate = %v; want %v, in property order", row.MayViolate, want)
	}
}
