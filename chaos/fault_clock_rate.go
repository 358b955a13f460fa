package chaos

import (
	"fmt"
	"time"

	"github.com/lockproof/lockproof/contract"
)

func clockRateFault() Fault {
	return Fault{Name: contract.FaultClockRate, Doc: "the lock's node's clock runs 0.7–1% fast (within the contract's 1% drift bound): its TTLs count down faster than the clients' clocks",
		NotRealTime: "a Redis node whose clock runs fast needs libfaketime under redis-server, which this project's machines do not install; datefudge sets an offset only (clock-skew, failover-skew)",
		Simulate:    simClockRate, SimDoc: "the lock's node's clock runs 0.7–1% fast (within the contract's 1% drift bound) for half the run: its TTLs count down that much faster than the clients' clocks"}
}

// simClockRate makes the lock's node's clock run fast, within the
// contract's drift bound, for half the run: a lease's key expires up to
// 1% of its TTL early by the clients' clocks, which a validity claim
// must allow for (package lock's Options.Drift). Its evidence is how far
// the node's clock ran ahead.
func simClockRate(s *SimStrike) error {
	if !s.wait() {
		return nil
	}
	addr := s.lockNode()
	fast := 0.007 + 0.003*s.Rng.Float64()
	name := fmt.Sprintf("%s %s %.2f%% fast", contract.FaultClockRate, addr, 100*fast)
	setRate := s.Net.ClockRate(addr)
	var from time.Time
	return s.window(&simWindow{name: name,
		start: func() { from = time.Now(); setRate(fast) },
		stop:  func() { setRate(0) },
		evidence: func() string {
			return fmt.Sprintf("%s: the node's clock ran %v ahead in %v", name,
				time.Duration(float64(time.Since(from))*fast).Round(time.Microsecond), time.Since(from).Round(time.Millisecond))
		},
	}, s.Run/2)
}
