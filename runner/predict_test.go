package runner

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/lockproof/lockproof/chaos"
	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/judge"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/zoo"
)

// TestALockStatesItsOwnPredictions: a user's deliberately broken variant
// beside the honest lock, in one run. Without predictions of its own the
// variant's breaks fail the run (status 1); stating them (Entry.Predict)
// makes them expected in its cells, the honest lock still held to its
// profile, and the run passes.
func TestALockStatesItsOwnPredictions(t *testing.T) {
	open := func(locker.Deps) (locker.Locker, error) { return nil, nil }
	// The variant's runs show set-del's history (two holders, a stale
	// write); the honest lock's show the fenced lock's.
	like := map[string]string{"variant": zoo.SetDelName, "honest": zoo.FencedName}
	fr := &fakeRunner{}
	run := func(ctx context.Context, e env.Env, sc chaos.Scenario, dir string) (chaos.Outcome, error) {
		sc.Lock = like[sc.Lock]
		return fr.run(ctx, e, sc, dir)
	}
	predicts := func(fault string, p locker.Prediction) locker.Prediction {
		if fault == contract.FaultPauseClient {
			p.Set(contract.WantViolated, contract.PropLease, contract.PropResource, contract.PropClaims)
			p.Rejected = false // its stale writes get in
			p.Because("the variant's release deletes the key without an owner check")
		}
		return p
	}
	for _, tc := range []struct {
		name    string
		predict func(string, locker.Prediction) locker.Prediction
		status  int
	}{
		{"no predictions of its own", nil, contract.ExitViolation},
		{"its own predictions", predicts, contract.ExitOK},
	} {
		reg := zoo.Builtin()
		for _, e := range []locker.Entry{
			{Name: "variant", Profile: locker.ProfileFenced, Open: open, Predict: tc.predict},
			{Name: "honest", Profile: locker.ProfileFenced, Open: open},
		} {
			if err := reg.Add(e); err != nil {
				t.Fatal(err)
			}
		}
		var opened []env.Spec
		var mu sync.Mutex
		sum, err := Run(context.Background(), Config{Locks: []string{"variant", "honest"}, Faults: []string{contract.FaultPauseClient},
			Seeds: []uint64{1}, Out: t.TempDir(), Open: fakeOpener(&opened, &mu), Runner: run, Registry: reg, NoReport: true})
		if err != nil {
			t.Fatal(err)
		}
		if got := sum.Status(); got != tc.status {
			for _, s := range sum.Scenarios {
				t.Logf("%s: %v expected %v mismatches %v", s.ID(), s.Verdicts, s.Expected, s.Mismatches)
			}
			t.Errorf("%s: status %d; want %d", tc.name, got, tc.status)
		}
		if tc.predict != nil {
			for _, c := range sum.Cells {
				if c.Lock == "variant" && c.Why == "" {
					t.Errorf("the variant's cell says no why")
				}
			}
		}
	}
}

// TestALockGetsItsProfile: a lock without predictions of its own, built-in
// or not, is predicted by the profile it claims: ProfileNone predicts
// nothing (a new built-in lock was once predicted ok everywhere whatever it
// claimed).
func TestALockGetsItsProfile(t *testing.T) {
	reg := zoo.Builtin()
	open := func(locker.Deps) (locker.Locker, error) { return nil, nil }
	for _, e := range []locker.Entry{{Name: "claims-nothing", Profile: locker.ProfileNone, Open: open},
		{Name: "lease-like", Profile: locker.ProfileLease, Open: open}} {
		if err := reg.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	if w := predictedOf(t, reg, "claims-nothing", contract.FaultNone).Want(contract.PropLease); w != contract.WantAny {
		t.Errorf("ProfileNone: lease %s under none; want no prediction", w)
	}
	if w := predictedOf(t, reg, "lease-like", contract.FaultPauseClient).Want(contract.PropResource); w != contract.WantViolated {
		t.Errorf("ProfileLease: resource %s under pause-client; want violated (the lua lock's row)", w)
	}
	if w := predictedOf(t, reg, zoo.FencedName, contract.FaultPauseClient).Want(contract.PropResource); w != contract.WantOK {
		t.Errorf("fenced: resource %s under pause-client; want ok (its row)", w)
	}
}

// TestALockCarriesItsFaultPointAndDecisiveScenario: what a lock's entry
// says of itself reaches the plan: its fault point (else its profile's:
// right after the lease check for a lock without fencing) and its decisive
// scenario.
func TestALockCarriesItsFaultPointAndDecisiveScenario(t *testing.T) {
	reg := zoo.Builtin()
	open := func(locker.Deps) (locker.Locker, error) { return nil, nil }
	for _, e := range []locker.Entry{
		{Name: "two-step", Profile: locker.ProfileLease, Open: open,
			FaultPoint: func(fault string) contract.Point {
				if fault == contract.FaultPauseClient {
					return contract.Point{After: "get"}
				}
				return contract.Point{}
			},
			Decisive: &locker.Decisive{Fault: contract.FaultPauseClient, Property: contract.PropLease}},
		{Name: "plain-lease", Profile: locker.ProfileLease, Open: open},
		{Name: "plain-fenced", Profile: locker.ProfileFenced, Open: open},
	} {
		if err := reg.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	specs, err := Config{Registry: reg, Locks: []string{"two-step", "plain-lease", "plain-fenced"},
		Faults: []string{contract.FaultPauseClient}, Seeds: []uint64{1}}.specs()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]contract.Point{"two-step": {After: "get"}, "plain-lease": {After: contract.LeaseCheckPoint}, "plain-fenced": {}}
	for _, s := range specs {
		if s.Point != want[s.Lock] {
			t.Errorf("%s: fault point %q; want %q", s.Lock, s.Point, want[s.Lock])
		}
		if s.entry.Name != s.Lock || s.fault.Name != s.Fault {
			t.Errorf("%s: planned with entry %q and fault %q", s.ID(), s.entry.Name, s.fault.Name)
		}
	}
	var found bool
	for _, d := range judge.DecisiveOf(reg) {
		if d.Lock == "two-step" {
			found = d.Fault == contract.FaultPauseClient && d.Property == contract.PropLease && d.Point == contract.Point{After: "get"}
		}
		if d.Lock == "plain-lease" {
			t.Errorf("plain-lease states no decisive scenario, got %+v", d)
		}
	}
	if !found {
		t.Errorf("two-step's decisive scenario is missing or wrong: %+v", judge.DecisiveOf(reg))
	}
}

// TestPrepareIsOneFrontDoor: the CLI and lockproof.Run settle faults and
// the environment in one place, one way: an unknown fault and a named
// fault the environment cannot run are refused as bad configuration; no
// faults is the default matrix less what the environment cannot run, each
// left out with why; a machine without what the environment needs is
// refused up front (env.ErrUnavailable).
func TestPrepareIsOneFrontDoor(t *testing.T) {
	ctx := context.Background()
	byo := env.Options{Kind: env.BYO}
	for _, faults := range [][]string{{"nope"}, {contract.FaultPauseServer}} {
		cfg := Config{Registry: zoo.Builtin(), Faults: faults}
		if _, err := Prepare(ctx, &cfg, byo); !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), faults[0]) {
			t.Errorf("faults %v on byo: %v; want ErrBadConfig naming it", faults, err)
		}
	}
	// A fault that changes the deployment itself runs on a user's only
	// when named and consented to (issue 47 item 4).
	for _, consent := range []bool{false, true} {
		cfg := Config{Registry: zoo.Builtin(), Faults: []string{contract.FaultFailover}, ChangeDeployment: consent}
		_, err := Prepare(ctx, &cfg, byo)
		if consent && err != nil {
			t.Errorf("failover on byo with consent: %v", err)
		}
		if !consent && (!errors.Is(err, ErrBadConfig) || !errors.Is(err, ErrNeedsConsent) || !strings.Contains(err.Error(), "SENTINEL FAILOVER") || !strings.Contains(err.Error(), "--yes")) {
			t.Errorf("failover on byo without consent: %v; want ErrNeedsConsent naming the command and --yes", err)
		}
	}
	if _, err := Prepare(ctx, &Config{Registry: zoo.Builtin(), Faults: []string{contract.FaultFailover}}, env.Options{Kind: env.Process}); err != nil && errors.Is(err, ErrNeedsConsent) {
		t.Errorf("failover on lockproof's own processes asks for consent: %v", err)
	}
	var cfg Config
	left, err := Prepare(ctx, &cfg, byo)
	want, wantLeft := AvailableFaults(env.BYO, "")
	if err != nil || !slices.Equal(cfg.Faults, want) || len(left) != len(wantLeft) || cfg.Kind != env.BYO || cfg.Open == nil || cfg.Logger == nil {
		t.Errorf("default on byo: faults %v, left %v, kind %q, %v; want %v, %d left out", cfg.Faults, left, cfg.Kind, err, want, len(wantLeft))
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := Prepare(ctx, &Config{Registry: zoo.Builtin()}, env.Options{Kind: env.Process}); !errors.Is(err, env.ErrUnavailable) || !strings.Contains(err.Error(), "redis-sentinel") {
		t.Errorf("process without binaries: %v; want ErrUnavailable naming them", err)
	}
}

// predictedOf is the prediction for the lock of reg named lock under
// fault (judge.Predict).
func predictedOf(t *testing.T, reg *locker.Registry, lock, fault string) locker.Prediction {
	t.Helper()
	e, ok := reg.Lookup(lock)
	if !ok {
		t.Fatalf("lock %q is not in the registry", lock)
	}
	return judge.Predict(e, fault)
}
