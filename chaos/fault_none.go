package chaos

import (
	"github.com/lockproof/lockproof/contract"
)

func noneFault() Fault {
	return Fault{Name: contract.FaultNone,
		NotSimulated: "the baseline: a run without faults is --faults none",
		Topologies:   everywhere, Doc: "no fault: the baseline", Matrix: true}
}
