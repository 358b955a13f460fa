package nemesis

import (
	"fmt"
	"strings"
	"time"

	"github.com/lockproof/lockproof/chaos/env"
)

// Evidence is what a fault did, so that a scenario can show that its fault
// bit instead of assuming it: a scenario whose fault did not bite proves
// nothing and is inconclusive, however its verdicts read.
type Evidence struct {
	// Text says what the fault did, in one sentence (the history's fault
	// op and the summary row carry it).
	Text string
	// Bit: the fault provably acted (a client's calls were held, a node
	// was promoted, a process was signalled...). Network faults only know
	// that their toxics were in place; what they did to the traffic shows
	// in the history (see chaos: the ops of the clients they cut).
	Bit bool
}

// Witness is a fault that can say what it did. Asked after Stop, it says
// what happened in the window; asked again at the end of the run, it also
// counts what an armed fault (a crash after a command) did later.
type Witness interface {
	Evidence() Evidence
}

// Evidence implements Witness: which toxics were in place on how many
// proxies; Bit says they were.
func (n *Network) Evidence() Evidence {
	n.mu.Lock()
	defer n.mu.Unlock()
	var kinds []string
	for _, t := range n.Toxics {
		kinds = append(kinds, t.Type+"/"+t.Stream)
	}
	if n.applied == 0 {
		return Evidence{Text: fmt.Sprintf("%s: no toxic was put on a proxy", n.Label)}
	}
	return Evidence{Text: fmt.Sprintf("%d toxics (%s) on %d proxies", n.applied, strings.Join(kinds, ", "), len(n.Proxies)), Bit: true}
}

// Evidence implements Witness: how many of the client's calls its gate
// held while paused (counted from Arm for a pause at a fault point: the
// call whose reply it struck after is the first).
func (f *PauseClient) Evidence() Evidence {
	f.mu.Lock()
	defer f.mu.Unlock()
	held := f.held
	if f.running {
		held = f.Gate.Holds() - f.base
	}
	where := ""
	if f.Point.After != "" {
		where = " after the reply of " + f.Point.After
	}
	text := fmt.Sprintf("%s paused%s for %v: %d of its calls held", f.Client, where, f.span.Round(time.Millisecond), held)
	return Evidence{Text: text, Bit: held > 0}
}

// Evidence implements Witness: whether the client crashed.
func (f *CrashClient) Evidence() Evidence {
	point := ""
	switch {
	case f.Point.After != "":
		point = " after the reply of " + f.Point.After
	case f.Point.Before != "":
		point = " before sending " + f.Point.Before
	}
	if !f.Gate.Crashed() {
		return Evidence{Text: fmt.Sprintf("%s armed to crash%s, never got there", f.Client, point)}
	}
	return Evidence{Text: fmt.Sprintf("%s crashed%s", f.Client, point), Bit: true}
}

// Evidence implements Witness: how many of the steps crashed their victim.
func (f *CrashClients) Evidence() Evidence {
	f.mu.Lock()
	defer f.mu.Unlock()
	text := fmt.Sprintf("%s: %d of %d crash steps done", f.Label, f.done, len(f.Steps))
	if len(f.victims) > 0 {
		text += " (crashed " + strings.Join(f.victims, ", ") + ")"
	}
	return Evidence{Text: text, Bit: f.done > 0}
}

// Evidence implements Witness: the node was frozen, and for how long.
func (f *PauseServer) Evidence() Evidence {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.paused {
		return Evidence{Text: "node " + f.NodeID + " was not paused"}
	}
	return Evidence{Text: fmt.Sprintf("node %s frozen for %v", f.NodeID, f.span.Round(time.Millisecond)), Bit: true}
}

// Evidence implements Witness: which nodes were frozen, for how long;
// Bit says every node asked for was.
func (f *PauseServers) Evidence() Evidence {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.frozen) < len(f.NodeIDs) {
		return Evidence{Text: fmt.Sprintf("%d of nodes %s frozen", len(f.frozen), strings.Join(f.NodeIDs, " "))}
	}
	return Evidence{Text: fmt.Sprintf("nodes %s frozen for %v", strings.Join(f.frozen, " "), f.span.Round(time.Millisecond)), Bit: true}
}

// Evidence implements Witness: the process group got SIGSTOP.
func (f *PauseProcess) Evidence() Evidence {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped == 0 {
		return Evidence{Text: f.Client + "'s process was not stopped"}
	}
	return Evidence{Text: fmt.Sprintf("%s's process %d stopped (SIGSTOP) for %v", f.Client, f.stopped, f.span.Round(time.Millisecond)), Bit: true}
}

// Evidence implements Witness: the offset set, and how often the client
// read its clock while skewed. A lock that never reads client clocks reads
// it 0 times: the skew was applied, and the lock was indifferent to it
// (which is what the scenario shows about it).
func (f *ClockSkew) Evidence() Evidence {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.applied {
		return Evidence{Text: f.Client + "'s clock was not skewed"}
	}
	return Evidence{Text: fmt.Sprintf("%s's clock set %v ahead; read %d times while skewed", f.Client, f.Offset, f.reads), Bit: true}
}

// Evidence implements Witness: which master failed, and which Sentinel
// promoted.
func (f *Failover) Evidence() Evidence {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.promoted.ID == "" || f.promoted.ID == f.old.ID {
		return Evidence{Text: fmt.Sprintf("master %s failed; no other node was promoted", f.old.ID)}
	}
	if f.old.Role == env.RoleCluster {
		return Evidence{Text: fmt.Sprintf("master %s of slot %d failed; the cluster promoted %s", f.old.ID, f.Slot, f.promoted.ID), Bit: true}
	}
	return Evidence{Text: fmt.Sprintf("master %s failed; Sentinel promoted %s", f.old.ID, f.promoted.ID), Bit: true}
}
