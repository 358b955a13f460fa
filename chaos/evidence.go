package chaos

import (
	"fmt"
	"slices"
	"time"

	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/history"
)

// slowOp is the latency above which an op of a client under a network
// fault counts as delayed by it: the latency fault adds 20±10ms each way,
// and an op on loopback takes well under a millisecond.
const slowOp = 10 * time.Millisecond

// evidence is what fault did in the run whose ops are given: the fault's
// own account (nemesis.Witness) and, for a network fault, what happened to
// the traffic of the clients it cut. A fault that cannot account for
// itself has no evidence (and so did not bite).
func evidence(fault nemesis.Fault, ops []history.Op) nemesis.Evidence {
	w, ok := fault.(nemesis.Witness)
	if !ok {
		return nemesis.Evidence{Text: fault.Name() + ": no evidence of what it did"}
	}
	ev := w.Evidence()
	if n, ok := fault.(*nemesis.Network); ok && ev.Bit && len(n.Clients) > 0 {
		return networkBite(ev, fault.Name(), n.Clients, ops)
	}
	if h, ok := fault.(historyWitness); ok {
		return h.evidenceFrom(ev, ops)
	}
	return ev
}

// historyWitness is a fault whose evidence also reads the history: what
// its effect did to the ops (a skewed failover: fences that went back).
type historyWitness interface {
	evidenceFrom(ev nemesis.Evidence, ops []history.Op) nemesis.Evidence
}

// networkBite counts the ops of clients that overlap the fault window
// named name: those that never returned or ended unknown (dropped: a
// timeout, a reset) and those that took slowOp or more (delayed), whatever
// their result. The fault bit when one of them did.
func networkBite(ev nemesis.Evidence, name string, clients []string, ops []history.Op) nemesis.Evidence {
	var start, end int64
	found := false
	for _, op := range ops {
		if op.Kind == history.Fault && op.Name == name {
			start, end, found = op.Call, op.Return, true
			if !op.Completed {
				end = 1<<63 - 1
			}
			break
		}
	}
	if !found {
		return nemesis.Evidence{Text: ev.Text + "; its window is not in the history"}
	}
	n, dropped, delayed := 0, 0, 0
	for _, op := range ops {
		if op.Kind == history.Fault || !slices.Contains(clients, op.Client) || op.Call > end {
			continue
		}
		if op.Completed && op.Return < start {
			continue
		}
		n++
		switch {
		case !op.Completed || op.Result == history.Unknown:
			dropped++
		case op.Return-op.Call >= int64(slowOp):
			delayed++
		}
	}
	text := fmt.Sprintf("%s; of %d ops of %v in the window, %d never returned or ended unknown, %d took %v or more", ev.Text, n, clients, dropped, delayed, slowOp)
	return nemesis.Evidence{Text: text, Bit: dropped+delayed > 0}
}
