package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/lockproof/lockproof/chaos"
	"github.com/lockproof/lockproof/contract"
)

// Fault is one fault of the simulation: what it does to the simulated
// network, nodes or clients, at a moment and for a window drawn from the
// seed. It is declared once, in its chaos.Fault (Simulate, SimDoc), beside
// its real-time strike: its Name is that fault's (a contract.Fault*
// constant) and its window in the history carries that kind, so the
// checker's excuses and the lock's predictions are the matrix's.
type Fault struct {
	Name string
	// Doc says what it does, in one line (chaos.Fault SimDoc).
	Doc string
	// simulate waits for the fault's moment and applies it, recording its
	// window; it returns when the window has closed or the run ended.
	simulate func(s *chaos.SimStrike) error
}

// drawOrder is the order Swarm draws the faults in, the catalogue's
// order: the simulated faults as they stood when seeds were first saved.
// It never changes, so that a saved seed's mix stays as it was; a fault
// simulated later follows these, in chaos.Catalogue's order.
func drawOrder() []string {
	return []string{contract.FaultLatency, contract.FaultReset, contract.FaultPartition, contract.FaultPauseClient,
		contract.FaultPauseServer, contract.FaultCrashClient, contract.FaultKeyLoss, contract.FaultClockSkew,
		contract.FaultFailover, contract.FaultFailoverSkew, contract.FaultLateDelivery, contract.FaultClockRate,
		contract.FaultPubSubReset}
}

// Catalogue is every fault of the simulation (each chaos.Fault with a
// Simulate), in drawOrder.
func Catalogue() []Fault {
	var fs []Fault
	for _, f := range chaos.Catalogue() {
		if f.Simulate != nil {
			fs = append(fs, Fault{Name: f.Name, Doc: f.SimDoc, simulate: f.Simulate})
		}
	}
	order := drawOrder()
	rank := func(name string) int {
		if i := slices.Index(order, name); i >= 0 {
			return i
		}
		return len(order)
	}
	slices.SortStableFunc(fs, func(a, b Fault) int { return rank(a.Name) - rank(b.Name) })
	return fs
}

// Unsimulated are the faults of the real-time catalogue (chaos.Faults)
// the simulation has no counterpart of, each with why (chaos.Fault
// NotSimulated): `lockproof sim` says so.
func Unsimulated() map[string]string {
	out := map[string]string{}
	for _, f := range chaos.Catalogue() {
		if f.Simulate == nil {
			out[f.Name] = f.NotSimulated
		}
	}
	return out
}

// Lookup returns the fault of the catalogue named name.
func Lookup(name string) (Fault, bool) {
	for _, f := range Catalogue() {
		if f.Name == name {
			return f, true
		}
	}
	return Fault{}, false
}

// Names are the catalogue's fault names, in order.
func Names() []string {
	var names []string
	for _, f := range Catalogue() {
		names = append(names, f.Name)
	}
	return names
}

// Swarm draws a seed's own mix of faults (swarm testing): each fault of
// the catalogue with even odds, so that across seeds every combination
// runs, each fault alone and none at all included.
func Swarm(seed uint64) []Fault {
	rng := rand.New(rand.NewPCG(seed, 0x5a4a))
	var fs []Fault
	for _, f := range Catalogue() {
		if rng.IntN(2) == 1 {
			fs = append(fs, f)
		}
	}
	return fs
}

// Mix resolves a fault setting (`lockproof sim --faults`, a regression's
// faults): "swarm" (each seed its own mix, Swarm), "none", or fault names
// of the catalogue separated by commas or by '+' as Label joins them
// (every seed the same).
func Mix(spec string) (func(seed uint64) []Fault, error) {
	switch spec {
	case "swarm":
		return Swarm, nil
	case contract.FaultNone:
		return func(uint64) []Fault { return nil }, nil
	}
	names := strings.FieldsFunc(spec, func(r rune) bool { return r == ',' || r == '+' })
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: faults %q: empty (%s, or swarm, or none)", ErrScenario, spec, strings.Join(Names(), ", "))
	}
	var fs []Fault
	for _, n := range names {
		f, ok := Lookup(strings.TrimSpace(n))
		if !ok {
			return nil, fmt.Errorf("%w: faults %q: %q is not a simulated fault (%s, or swarm, or none)", ErrScenario, spec, n, strings.Join(Names(), ", "))
		}
		fs = append(fs, f)
	}
	return func(uint64) []Fault { return fs }, nil
}

// Label names a mix of faults ("none" when empty): "latency+partition".
func Label(fs []Fault) string {
	if len(fs) == 0 {
		return contract.FaultNone
	}
	return strings.Join(faultNames(fs), "+")
}
