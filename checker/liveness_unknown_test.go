package checker

import (
	"context"
	"testing"

	"github.com/lockproof/lockproof/contract"
)

// A client that crashed inside its acquire, after the acquire's commands
// may have taken effect, leaves an acquire completed as unknown. Its lease,
// if any, surely expired at return + TTL; an acquire by another client
// failing after that (plus slack) breaks liveness, whether or not the
// unknown acquire took effect. Without such a failure, liveness holds.
// (Added by the matrix engineer: setnx-expire crashed between SETNX and EXPIRE.)
func TestLivenessAfterUnknownAcquire(t *testing.T) {
	stuck := lined(
		acq("a", 0, 1, unknown, ttl(100)),
		acq("b", 2000, 2001, fail, ttl(100)),
	)
	res, err := Check(context.Background(), stuck, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Of(contract.PropLiveness).Verdict != contract.Violated || len(res.Of(contract.PropLiveness).Violations) == 0 || res.Of(contract.PropLiveness).Violations[0].Rule != RuleLiveness {
		t.Fatalf("liveness %s %+v; want violated", res.Of(contract.PropLiveness).Verdict, res.Of(contract.PropLiveness).Violations)
	}
	freed := lined(
		acq("a", 0, 1, unknown, ttl(100)),
		acq("b", 2000, 2001, ok, ttl(100)),
	)
	if res, err = Check(context.Background(), freed, Options{}); err != nil || res.Of(contract.PropLiveness).Verdict != contract.OK {
		t.Fatalf("liveness %v, %v; want ok", res.Of(contract.PropLiveness).Verdict, err)
	}
	// An acquire that never returned may take effect at any time: no verdict.
	pending := lined(
		acq("a", 0, 0, unknown, ttl(100), noReturn()),
		acq("b", 2000, 2001, fail, ttl(100)),
	)
	if res, err = Check(context.Background(), pending, Options{}); err != nil || res.Of(contract.PropLiveness).Verdict == contract.Violated {
		t.Fatalf("liveness %v, %v; want not violated", res.Of(contract.PropLiveness).Verdict, err)
	}
}
