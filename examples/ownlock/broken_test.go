package ownlock

import (
	"context"
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
