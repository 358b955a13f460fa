package checker

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

// Every property of the contract has its check here, and no check decides
// a property the contract does not list.
func TestEveryPropertyHasItsCheck(t *testing.T) {
	all := checks()
	for _, id := range contract.PropertyIDs() {
		if all[id] == nil {
			t.Errorf("property %q has no check", id)
		}
	}
	if len(all) != len(contract.PropertyIDs()) {
		t.Errorf("%d checks for %d properties", len(all), len(contract.PropertyIDs()))
	}
}

// A result holds one entry per contract property, in its order, found by
// ID; check.json has one member per property, keyed by ID, after
// "verdict", and reads back the same.
func TestResultOfAndItsJSON(t *testing.T) {
	r := mustCheck(t, []history.Op{
		{Client: "a", Kind: history.Acquire, Key: "k", Call: 1, Return: 2, Completed: true, Result: history.OK, TTLMillis: 1000},
	}, Options{})
	if len(r.Props) != len(contract.Properties()) {
		t.Fatalf("%d property results, want %d", len(r.Props), len(contract.Properties()))
	}
	for i, p := range contract.Properties() {
		if r.Props[i].ID != p.ID || r.Props[i].Property != p.Name || r.Of(p.ID) != &r.Props[i] {
			t.Errorf("property %d: %+v, want ID %q name %q found by Of", i, r.Props[i], p.ID, p.Name)
		}
	}
	if r.Of("nope") != nil {
		t.Error("Of(nope) names a property")
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"verdict":"ok","lease":{"property":"lease mutual exclusion","verdict":"ok",`
	if !strings.HasPrefix(string(b), want) || !strings.Contains(string(b), `"liveness":{"property":"liveness"`) {
		t.Fatalf("check.json %s, want it to start %s", b, want)
	}
	var back Result
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	again, err := json.Marshal(back)
	if err != nil || string(again) != string(b) {
		t.Fatalf("round trip: %s (%v), want %s", again, err, b)
	}
}

// A property listed without a check is unknown, never a pass, and so is
// the whole result.
func TestPropertyWithoutCheckIsUnknown(t *testing.T) {
	ops := []history.Op{
		{Client: "a", Kind: history.Acquire, Key: "k", Call: 1, Return: 2, Completed: true, Result: history.OK, TTLMillis: 1000},
	}
	opts, err := Options{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	p, err := prepare(ops, opts.Drift)
	if err != nil {
		t.Fatal(err)
	}
	props := append(contract.Properties(), contract.Property{ID: "unchecked", Name: "unchecked"})
	c := &run{ctx: context.Background(), p: p, opts: opts, model: newModel(context.Background(), p), props: props, checks: checks()}
	r := c.check()
	if f := r.Of("unchecked"); f == nil || f.Verdict != contract.Unknown || r.Verdict != contract.Unknown {
		t.Fatalf("a property without a check: %+v, overall %s; want unknown", f, r.Verdict)
	}
	if r.Of(contract.PropLease).Verdict != contract.OK {
		t.Fatalf("lease %s, want ok", r.Of(contract.PropLease).Verdict)
	}
}
