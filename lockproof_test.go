package lockproof_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockproof/lockproof"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/locker"
)

// TestRunRefusesBadOptions: bad options are errors before anything runs,
// each naming what is wrong.
func TestRunRefusesBadOptions(t *testing.T) {
	open := func(d locker.Deps) (locker.Locker, error) { return nil, nil } // never called: refused first
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
		{"unknown topology", lockproof.Options{Builtins: []string{"lua"}, Topology: "ring"}, `"ring"`},
		{"negative parallelism", lockproof.Options{Builtins: []string{"lua"}, Parallel: -1}, "Parallel = -1"},
	} {
		_, err := lockproof.Run(context.Background(), tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v; want one naming %s", tc.name, err, tc.want)
		}
	}
}

// TestREADMEShowsTheExample: docs/OWN-LOCK.md's code is
// examples/ownlock/ownlock_test.go and polling_test.go, which go test ./...
// compiles and runs:
// the page cannot drift from code that works.
func TestREADMEShowsTheExample(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("docs", "OWN-LOCK.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ownlock_test.go", "polling_test.go"} {
		code, err := os.ReadFile(filepath.Join("examples", "ownlock", f))
		if err != nil {
			t.Fatal(err)
		}
		block := fmt.Sprintf("```go\n%s```\n", code)
		if !strings.Contains(string(readme), block) {
			t.Errorf("docs/OWN-LOCK.md does not hold examples/ownlock/%s verbatim in a go code block", f)
		}
	}
}

// TestPropertiesAreTheContracts: lockproof's typed property IDs are the
// contract's, in its order. A property added to the contract works at once
// (lockproof.Property(id)); its typed name is a convenience, logged here
// until it is written.
func TestPropertiesAreTheContracts(t *testing.T) {
	got := []lockproof.Property{lockproof.Lease, lockproof.Resource, lockproof.Liveness, lockproof.Claims, lockproof.Notice, lockproof.Fairness, lockproof.Calls}
	want := contract.PropertyIDs()
	if len(got) > len(want) {
		t.Fatalf("%d typed properties, the contract has %d (%v)", len(got), len(want), want)
	}
	for i, p := range got {
		if string(p) != want[i] {
			t.Errorf("property %d: %q, the contract's is %q", i, p, want[i])
		}
	}
	for _, id := range want[len(got):] {
		t.Logf("property %q has no typed name in package lockproof yet", id)
	}
}
