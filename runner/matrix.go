package runner

import (
	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/contract"

	"github.com/lockproof/lockproof/chaos"
)

// Faults are the faults of the default matrix on the Sentinel topology
// (chaos.Fault Matrix), the columns of the summary.json contract, in
// matrix order.
func Faults() []string { return FaultsOn(contract.TopologySentinel) }

// FaultsOn are the faults of the default matrix on topology: those of
// Faults that run there, and those of that topology alone.
func FaultsOn(topology string) []string {
	var names []string
	for _, f := range chaos.Catalogue() {
		if f.InMatrixOn(topology) {
			names = append(names, f.Name)
		}
	}
	return names
}

// AvailableFaults splits the default matrix's faults on topology
// (FaultsOn) into those that can run on an environment of kind k and the
// reasons the others cannot (chaos.Fault Available).
func AvailableFaults(k env.Kind, topology string) (faults []string, left []error) {
	for _, name := range FaultsOn(topology) {
		f, _ := chaos.Lookup(name)
		if err := f.Available(k, topology); err != nil {
			left = append(left, err)
			continue
		}
		// A default matrix never changes a user's deployment: such a
		// fault runs there only when named, with consent (Prepare).
		if err := consented(f, k, topology, false); err != nil {
			left = append(left, err)
			continue
		}
		faults = append(faults, name)
	}
	return faults, left
}
