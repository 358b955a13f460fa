package chaos

import (
	"fmt"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/internal/simnet"
)

func oomFault() Fault {
	return Fault{Name: contract.FaultOOM,
		Doc:         "the lock's node at its maxmemory (noeviction), its memory coming and going around the limit: for 3 TTLs it refuses 10–40% of the writes it is sent (-OOM, surely without effect), a script counting as one",
		NotRealTime: "a Redis whose memory swings around its maxmemory needs a writer filling and freeing memory beside the lock, which the environments do not run yet; CONFIG SET maxmemory alone refuses every write, another fault",
		Simulate:    simOOM, SimDoc: "for 3 TTLs the lock's node refuses 10–40% of the writes it is sent, drawn per request, with -OOM (a script counts as one): a lock's retry or cleanup may get through while the call after it is refused"}
}

// simOOM makes the lock's node refuse a share of its writes for 3 TTLs,
// as a Redis at its maxmemory with noeviction does while its memory comes
// and goes around the limit (a cache or a queue sharing it fills and
// frees memory): each refusal is a Redis error reply, an answer that
// says surely nothing happened. With lost replies about (reset), an
// attempt of unknown outcome may be cleaned up and the call's next step
// refused: a WithRetry whose lost attempt is buried must not give up at
// the refusal of the next one without taking the lost one's hold back,
// nor say the lock was surely not acquired.
func simOOM(s *SimStrike) error {
	if !s.wait() {
		return nil
	}
	addr := s.lockNode()
	share := 0.1 + 0.3*s.Rng.Float64()
	name := fmt.Sprintf("%s %s %.0f%% of writes refused", contract.FaultOOM, addr, 100*share)
	return s.onNet(name, func() { s.Net.RefuseWrites(addr, share) }, func() { s.Net.RefuseWrites(addr, 0) },
		func(b, a simnet.Counts) string {
			return fmt.Sprintf("%s: %d requests refused with -OOM", name, a.OutOfMemory-b.OutOfMemory)
		})
}
