package redsync_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/examples/redsync"
	"github.com/lockproof/lockproof/internal/keeprun"
	"github.com/lockproof/lockproof/internal/redisproc"
	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/locker"
)

func deps(t *testing.T, ps []*redisproc.Process) locker.Deps {
	t.Helper()
	var cs []redis.UniversalClient
	for _, p := range ps {
		c := redis.NewClient(&redis.Options{Addr: p.Addr, MaxRetries: -1, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		cs = append(cs, c)
	}
	return locker.Deps{Redlock: cs}
}

func tctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestRedsyncLocker(t *testing.T) {
	ps := []*redisproc.Process{redistest.Start(t), redistest.Start(t), redistest.Start(t)}
	a, err := redsync.New(deps(t, ps))
	if err != nil {
		t.Fatal(err)
	}
	b, err := redsync.New(deps(t, ps))
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 10 * time.Second
	la, err := a.TryAcquire(tctx(t), "k", ttl)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	if _, err := b.TryAcquire(tctx(t), "k", ttl); !errors.Is(err, locker.ErrNotAcquired) {
		t.Fatalf("second acquire: %v, want ErrNotAcquired", err)
	}
	if err := la.Renew(tctx(t), ttl); err != nil {
		t.Fatalf("renew: %v", err)
	}
	if err := la.Release(tctx(t)); err != nil {
		t.Fatalf("release: %v", err)
	}
	if err := la.Release(tctx(t)); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("second release: %v, want ErrNotHeld", err)
	}
	lb, err := b.TryAcquire(tctx(t), "k", ttl)
	if err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
	// One instance down: a majority still decides.
	if err := ps[0].Kill(); err != nil {
		t.Fatal(err)
	}
	if err := lb.Release(tctx(t)); err != nil {
		t.Fatalf("release with one instance down: %v", err)
	}
	if _, err := redsync.New(locker.Deps{}); !errors.Is(err, locker.ErrInvalid) {
		t.Fatalf("New without clients: %v, want ErrInvalid", err)
	}
}

// TestMain lets a pause-process child client run redsync (the harness
// starts the test binary again as that client).
func TestMain(m *testing.M) {
	lockproof.MaybeChild(redsync.Entry())
	os.Exit(m.Run())
}

// TestRedsyncUnderChaos runs redsync through the harness's matrix, as a
// team would run its own lock: without a fault every property holds; a
// client paused while it holds wakes after its lease passed on and its
// unfenced write is accepted (redsync has no fencing: resource safety
// violated); a crashed holder's lease expires (liveness holds). Each
// verdict is what redsync's profile predicts, so the run's status is 0.
func TestRedsyncUnderChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real Redis and Toxiproxy for about 20s")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var progress strings.Builder
	res, err := lockproof.Run(ctx, lockproof.Options{
		Locks:    []locker.Entry{redsync.Entry()},
		Faults:   []string{"none", "pause-client", "crash-client"},
		Out:      keeprun.Dir(t),
		Progress: &progress,
	})
	if errors.Is(err, lockproof.ErrEnvironment) && !redistest.InCI() {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("run directory %s:\n%s", res.Dir, progress.String())
	want := map[string][3]contract.Verdict{ // lease, resource, liveness (n/a counts as holding)
		"none":         {contract.OK, contract.OK, contract.OK},
		"pause-client": {contract.OK, contract.Violated, contract.OK},
		"crash-client": {contract.OK, contract.OK, contract.OK},
	}
	for fault, w := range want {
		s := res.Scenario(redsync.Name, fault, 1)
		if s == nil {
			t.Fatalf("no %s scenario in the summary", fault)
		}
		if s.Error != "" || s.FaultError != "" {
			t.Errorf("%s: error %q, fault error %q", fault, s.Error, s.FaultError)
		}
		got := [3]contract.Verdict{s.Verdict(contract.PropLease), s.Verdict(contract.PropResource), s.Verdict(contract.PropLiveness)}
		for i := range got {
			if got[i] == contract.NA {
				got[i] = contract.OK
			}
		}
		if got != w {
			t.Errorf("%s: (lease, resource, liveness) = %v; want %v", fault, got, w)
		}
		if s.Ops == 0 {
			t.Errorf("%s: empty history", fault)
		}
	}
	if res.Status != 0 {
		t.Errorf("status %d; want 0 (every verdict as redsync's profile predicts)", res.Status)
	}
}
