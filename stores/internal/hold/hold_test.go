package hold

import (
	"testing"
	"time"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/locker"
)

// TestPairPredicts: a store's leader faults predict every lease held and
// liveness may break (whatever the profile said); a lapsed holder's
// faults keep the profile's prediction and let liveness break besides;
// the others keep the profile's; the plain lock is decisive under
// pause-client, the fenced one claims fencing.
func TestPairPredicts(t *testing.T) {
	es := Pair{Store: contract.TopologyEtcd, Plain: "p", Fenced: "f", Quorum: "quorum", Lapse: "lapse",
		Open: func(locker.Deps, bool) (locker.Locker, error) { return nil, nil }}.Entries()
	if len(es) != 2 || es[0].Profile != locker.ProfileLease || es[1].Profile != locker.ProfileFenced ||
		es[0].Decisive == nil || es[0].Needs.Store != contract.TopologyEtcd || es[1].Needs.Store != contract.TopologyEtcd {
		t.Fatalf("entries %+v", es)
	}
	broke := locker.AllHold()
	broke.Set(contract.WantMay, contract.PropLease)
	for _, f := range []string{contract.FaultFailover, contract.FaultMinorityPartition, contract.FaultPauseServer, contract.FaultRestart} {
		p := es[0].Predict(f, broke)
		if p.Want(contract.PropLease) != contract.WantOK || p.Want(contract.PropLiveness) != contract.WantMay || p.Why != "quorum" {
			t.Errorf("%s: %+v; want the lease held, liveness may break, the store's reason", f, p)
		}
	}
	lapsed := locker.AllHold()
	lapsed.Set(contract.WantViolated, contract.PropResource)
	p := es[0].Predict(contract.FaultPauseClient, lapsed)
	if p.Want(contract.PropResource) != contract.WantViolated || p.Want(contract.PropLiveness) != contract.WantMay {
		t.Errorf("pause-client: %+v; want the profile's resource break and liveness may", p)
	}
	if p := es[1].Predict(contract.FaultLatency, locker.AllHold()); p.Want(contract.PropLiveness) != contract.WantOK {
		t.Errorf("latency: %+v; want the profile's", p)
	}
}

// TestHoldLifetime: a hold is valid for its TTL from the last renewal
// answered; ended, it claims nothing and cannot be lost; lost, it claims
// nothing.
func TestHoldLifetime(t *testing.T) {
	t0 := time.Unix(1000, 0)
	h := New(time.Second, t0)
	if h.ValidUntil() != t0.Add(time.Second) {
		t.Fatalf("ValidUntil %v", h.ValidUntil())
	}
	h.Renewed(t0.Add(time.Second))
	if h.ValidUntil() != t0.Add(2*time.Second) {
		t.Fatalf("after a renewal: ValidUntil %v", h.ValidUntil())
	}
	h.End()
	h.Lose()
	select {
	case <-h.Lost():
		t.Error("an ended hold was lost")
	default:
	}
	if !h.ValidUntil().IsZero() {
		t.Error("an ended hold claims validity")
	}
	l := New(time.Second, t0)
	l.Lose()
	l.Lose()
	select {
	case <-l.Lost():
	default:
		t.Error("Lose did not close Lost")
	}
	if !l.ValidUntil().IsZero() {
		t.Error("a lost hold claims validity")
	}
}
