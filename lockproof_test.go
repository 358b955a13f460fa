package lockproof_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/locker"
)

// delLock is the README's lock with the owner check taken out of its
// release (a plain DEL), the mistake of the set-del specimen.
type delLock struct{ *myLock }

func (l delLock) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	le, err := l.myLock.TryAcquire(ctx, key, ttl)
	if err != nil {
		return nil, err
	}
	return delLease{le.(*myLease)}, nil
}

type delLease struct{ *myLease }

func (m delLease) Release(ctx context.Context) error {
	if err := m.l.rdb.Del(ctx, m.l.prefix+m.key).Err(); err != nil {
		return outcome(err)
	}
	return nil
}

// TestRunCatchesABrokenUserLock: a user lock that claims an owner-checked
// lease but releases with a plain DEL is caught under pause-client (the
// woken holder deletes the next holder's lock: lease violated), and the run
// says it is not as claimed (status 1). A user lock that claims fencing
// without issuing tokens is caught too (resource violated).
func TestRunCatchesABrokenUserLock(t *testing.T) {
	entries := []locker.Entry{
		{Name: "del-release", Profile: locker.ProfileLease,
			Open: func(d locker.Deps) (locker.Locker, error) {
				return delLock{&myLock{rdb: d.Redis, prefix: d.Prefix}}, nil
			}},
		{Name: "claims-fencing", Profile: locker.ProfileFenced,
			Open: func(d locker.Deps) (locker.Locker, error) { return &myLock{rdb: d.Redis, prefix: d.Prefix}, nil }},
	}
	res, err := lockproof.Run(context.Background(), lockproof.Options{Locks: entries, Faults: []string{"pause-client"},
		Seeds: []uint64{1, 2}, Out: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var leaseHit, resHit bool
	for _, s := range res.Summary.Scenarios {
		t.Logf("%s: lease %s, resource %s, liveness %s, mismatches %v", s.ID(), s.Verdict(contract.PropLease), s.Verdict(contract.PropResource), s.Verdict(contract.PropLiveness), s.Mismatches)
		leaseHit = leaseHit || s.Lock == "del-release" && s.Verdict(contract.PropLease) == contract.Violated && !s.AsExpected
		resHit = resHit || s.Lock == "claims-fencing" && s.Verdict(contract.PropResource) == contract.Violated && !s.AsExpected
	}
	if !leaseHit {
		t.Error("the DEL release was not caught (lease violated, not as expected) on either seed")
	}
	if !resHit {
		t.Error("the unfenced lock claiming fencing was not caught (resource violated, not as expected) on either seed")
	}
	if res.Status != 1 {
		t.Errorf("status %d; want 1 (not as claimed)", res.Status)
	}
}

// TestRunRefusesBadOptions: bad options are errors before anything runs,
// each naming what is wrong.
func TestRunRefusesBadOptions(t *testing.T) {
	open := func(d locker.Deps) (locker.Locker, error) { return &myLock{rdb: d.Redis}, nil }
	for _, tc := range []struct {
		name string
		opts lockproof.Options
		want string
	}{
		{"no locks", lockproof.Options{}, "no locks"},
		{"built-in name", lockproof.Options{Locks: []locker.Entry{{Name: "fenced", Open: open}}}, `"fenced"`},
		{"bad name", lockproof.Options{Locks: []locker.Entry{{Name: "My Lock", Open: open}}}, `"My Lock"`},
		{"no opener", lockproof.Options{Locks: []locker.Entry{{Name: "x"}}}, "Open is nil"},
		{"unknown builtin", lockproof.Options{Builtins: []string{"nope"}}, `"nope"`},
		{"unknown fault", lockproof.Options{Builtins: []string{"lua"}, Faults: []string{"meteor"}}, `"meteor"`},
	} {
		_, err := lockproof.Run(context.Background(), tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v; want one naming %s", tc.name, err, tc.want)
		}
	}
}

// TestREADMEShowsTheExample: the README's "Run your own lock" code is
// example_ownlock_test.go, which this package compiles and runs: the README
// cannot drift from code that works.
func TestREADMEShowsTheExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	code, err := os.ReadFile("example_ownlock_test.go")
	if err != nil {
		t.Fatal(err)
	}
	block := fmt.Sprintf("```go\n%s```\n", code)
	if !strings.Contains(string(readme), block) {
		t.Error("README.md does not hold example_ownlock_test.go verbatim in a go code block (section \"Run your own lock\")")
	}
}

// TestPropertiesAreTheContracts: lockproof's typed property IDs are the
// contract's, every one of them, in its order (a property added to the
// contract fails here until it has its ID).
func TestPropertiesAreTheContracts(t *testing.T) {
	got := []lockproof.Property{lockproof.Lease, lockproof.Resource, lockproof.Liveness, lockproof.Claims, lockproof.Notice, lockproof.Fairness}
	want := contract.PropertyIDs()
	if len(got) != len(want) {
		t.Fatalf("%d typed properties, the contract has %d (%v)", len(got), len(want), want)
	}
	for i, p := range got {
		if string(p) != want[i] {
			t.Errorf("property %d: %q, the contract's is %q", i, p, want[i])
		}
	}
}
