package chaos

import (
	"fmt"
	"time"

	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/internal/simnet"
)

func latencyFault() Fault {
	return Fault{Name: contract.FaultLatency,
		Simulate: simLatency, SimDoc: "every message delayed 1–5ms plus up to 5–30ms at random for 3 TTLs (messages of different connections race; a request whose sender gave up still lands)",
		Topologies: everywhere, Doc: "20±10 ms added each way to half the clients' traffic, for half the run", Matrix: true,
		strike: func(s *striking) (armed, error) {
			f := cut(nemesis.Latency(fmt.Sprintf("latency %v", s.names), s.proxies, 20*time.Millisecond, 10*time.Millisecond), s.names)
			return armed{fault: f, window: s.sc.Duration / 2}, nil
		}}
}

// simLatency delays every message for 3 TTLs, each by its own draw, so
// that messages of different connections race. A request still on its
// way when its sender gives up and closes the connection (a call with a
// short deadline) lands all the same (simnet.Rates.Drain), as TCP
// delivers what was written before the FIN: it may land after what its
// client sent next on other connections, the call's retry and the
// lock's cleanup of it (a lock whose second Release undoes a nested hold
// lets the first, landing after it and before the cleanup's bury, end
// the outer hold).
func simLatency(s *SimStrike) error {
	if !s.wait() {
		return nil
	}
	r := simnet.Rates{Delay: time.Millisecond + time.Duration(s.Rng.Int64N(int64(4*time.Millisecond))),
		Jitter: 5*time.Millisecond + time.Duration(s.Rng.Int64N(int64(25*time.Millisecond))), Drain: true}
	name := fmt.Sprintf("%s %v+%v", contract.FaultLatency, r.Delay.Round(time.Microsecond), r.Jitter.Round(time.Microsecond))
	return s.rates(name, r, func(b, a simnet.Counts) string {
		return fmt.Sprintf("%s: %d messages delayed, %d requests landed after their sender closed the connection", name,
			a.Messages-b.Messages, a.Drained-b.Drained)
	})
}
