package checker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

// sample is client c's footprint sample of key k: records measured.
func sample(c string, call, ret float64, res history.Result, records int64) history.Op {
	o := mk(history.Footprint, c, "k", call, ret, res)
	if res == history.OK {
		o.Records, o.HasRecords, o.Bytes, o.HasBytes = records, true, 10*records, true
	}
	return o
}

// fencedBound is package lock's bound (zoo's fencedFootprint).
var fencedBound = &FootprintBound{Base: 7, PerHold: 1, PerWaiter: 2, PerUnknown: 4, BuriedFor: time.Hour}

func TestFootprint(t *testing.T) {
	bound := Options{Footprint: fencedBound}
	cases := []claimCase{
		{"no bound: nothing to judge", lined(
			acq("a", 0, 1, ok, ttl(1000), hold(1)),
			sample("a", 10, 11, ok, 100),
		), Options{}, contract.NA, "", nil, contract.PropFootprint},
		{"no sample: nothing to judge", lined(
			acq("a", 0, 1, ok, ttl(1000), hold(1)),
		), bound, contract.NA, "", nil, contract.PropFootprint},
		{"a failed sample says nothing", lined(
			acq("a", 0, 1, ok, ttl(1000), hold(1)),
			sample("a", 10, 11, unknown, 0),
		), bound, contract.NA, "", nil, contract.PropFootprint},
		{"one hold: base and its record", lined(
			acq("a", 0, 1, ok, ttl(1000), hold(1)),
			sample("b", 10, 11, ok, 8),
		), bound, contract.OK, "", nil, contract.PropFootprint},
		{"one hold: one record too many", lined(
			acq("a", 0, 1, ok, ttl(1000), hold(1)),
			sample("b", 10, 11, ok, 9),
		), bound, contract.Violated, RuleFootprintBound, []int{2}, contract.PropFootprint},
		{"a waiter in line over the sample: two places more", lined(
			acq("a", 0, 1, ok, ttl(1000), hold(1)),
			acq("b", 5, 500, ok, ttl(1000), waits(), hold(1)),
			sample("c", 10, 11, ok, 11),
		), bound, contract.OK, "", nil, contract.PropFootprint},
		{"released: the hold's record is gone", lined(
			acq("a", 0, 1, ok, ttl(1000), hold(1)),
			rel("a", 2, 3, ok, hold(1)),
			sample("b", 10, 11, ok, 8),
		), bound, contract.Violated, RuleFootprintBound, []int{3}, contract.PropFootprint},
		{"expired: the hold's record is gone", lined(
			acq("a", 0, 1, ok, ttl(100), hold(1)),
			sample("b", 500, 501, ok, 8),
		), bound, contract.Violated, RuleFootprintBound, []int{2}, contract.PropFootprint},
		{"a watchdog's renewal keeps the hold", lined(
			acq("a", 0, 1, ok, ttl(100), hold(1)),
			renew("a", 80, 81, ok, ttl(100)),
			renew("a", 160, 161, ok, ttl(100)),
			sample("b", 200, 201, ok, 8),
		), bound, contract.OK, "", nil, contract.PropFootprint},
		{"a release of unknown outcome keeps the hold and may bury", lined(
			acq("a", 0, 1, ok, ttl(1000), hold(1)),
			rel("a", 2, 3, unknown, hold(1)),
			sample("b", 10, 11, ok, 12),
		), bound, contract.OK, "", nil, contract.PropFootprint},
		{"a waiter that gave up leaves a buried id for an hour", lined(
			acq("a", 0, 1, ok, ttl(100), hold(1)),
			rel("a", 2, 3, ok, hold(1)),
			acq("b", 5, 50, fail, ttl(100), waits(), hold(1)),
			sample("c", 60_000, 60_001, ok, 11),
		), bound, contract.OK, "", nil, contract.PropFootprint},
		{"a buried id past BuriedFor is gone", lined(
			acq("b", 5, 50, fail, ttl(100), waits(), hold(1)),
			sample("c", 3_700_000, 3_700_001, ok, 8),
		), bound, contract.Violated, RuleFootprintBound, []int{2}, contract.PropFootprint},
		{"a crashed waiter stays in line", lined(
			acq("a", 0, 1, ok, ttl(100), hold(1)),
			acq("b", 5, 0, unknown, ttl(100), waits(), hold(1), noReturn()),
			sample("c", 10_000, 10_001, ok, 7+1+2+4),
		), bound, contract.OK, "", nil, contract.PropFootprint},
		// A leak: every hold leaves a record behind.
		{"records that grow with every ended hold", lined(
			acq("a", 0, 1, ok, ttl(1000), hold(1)),
			rel("a", 2, 3, ok, hold(1)),
			acq("b", 4, 5, ok, ttl(1000), hold(1)),
			rel("b", 6, 7, ok, hold(1)),
			acq("a", 8, 9, ok, ttl(1000), hold(2)),
			sample("c", 10, 11, ok, 7+1+2),
		), bound, contract.Violated, RuleFootprintBound, []int{6}, contract.PropFootprint},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, ops := range [][]history.Op{tc.ops, reversed(tc.ops)} {
				r, err := Check(context.Background(), ops, tc.opts)
				if err != nil {
					t.Fatal(err)
				}
				assertClaims(t, r, tc)
			}
		})
	}
}

// TestFootprintExplains: the violation names the sample, the counts and
// the bound.
func TestFootprintExplains(t *testing.T) {
	ops := lined(
		acq("a", 0, 1, ok, ttl(1000), hold(1)),
		acq("b", 2, 500, ok, ttl(1000), waits(), hold(1)),
		sample("c", 10, 11, ok, 50),
	)
	r, err := Check(context.Background(), ops, Options{Footprint: fencedBound})
	if err != nil {
		t.Fatal(err)
	}
	pr := r.Of(contract.PropFootprint)
	if pr.Verdict != contract.Violated || len(pr.Violations) != 1 {
		t.Fatalf("verdict %s, %d violations; want one", pr.Verdict, len(pr.Violations))
	}
	e := pr.Violations[0].Explanation
	for _, want := range []string{"line 3", "50 records", "bound 11", "1×2 holds", "2×1 waiters", "4×0 calls"} {
		if !strings.Contains(e, want) {
			t.Errorf("explanation lacks %q: %s", want, e)
		}
	}
	if r.Options.Footprint == nil || r.Options.Footprint.Base != 7 {
		t.Errorf("options used: footprint %+v, want the bound", r.Options.Footprint)
	}
}

func TestFootprintBoundRefusesNegative(t *testing.T) {
	_, err := Check(context.Background(), lined(acq("a", 0, 1, ok)), Options{Footprint: &FootprintBound{Base: -1}})
	if err == nil {
		t.Fatal("a negative bound was accepted")
	}
}
