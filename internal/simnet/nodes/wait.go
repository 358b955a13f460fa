package nodes

import (
	"bytes"
	"fmt"
	"strconv"
	"time"
)

// The network answers Redis's WAIT itself (miniredis replies 0 at once: it
// has no replicas), as a master with one replica would. The replica is
// the one a failover promotes: outside a failover it is in sync with every
// write, and acknowledges it at once; from SyncReplica to PromoteReplica
// (or DropReplica) it is cut off from the master and acknowledges nothing,
// so that what a client hears from WAIT agrees with what the failover
// keeps: a write acknowledged survives it, one that was not may be lost.
// A WAIT that does not get its replicas blocks its connection for its
// timeout, as Redis's does, and then replies with the count it got. A
// timeout of 0, which blocks Redis's for ever, is answered at once: no
// caller here asks it.

// Replicas is how many replicas a node has in the model.
const Replicas = 1

// waitCommand stands in for a WAIT: a script that replies with the number
// of replicas that acknowledged, in WAIT's place on the connection.
const waitCommand = "*3\r\n$4\r\nEVAL\r\n$%d\r\n%s\r\n$1\r\n0\r\n"

// segment is part of a request, written to the node after a delay (a
// WAIT that blocks its connection before its reply).
type segment struct {
	after time.Duration
	b     []byte
}

// PauseReplicas stops (on) or resumes the replicas of the node at addr:
// while they are stopped the node serves on, and a WAIT for a replica's
// acknowledgement waits out its timeout (the replica-pause fault). What a
// stopped replica misses it catches up with when it resumes: the model's
// replica is a count of acknowledgements, not a copy of the data (a
// failover's replica is SyncReplica's).
func (n *Net) PauseReplicas(addr string, on bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.replicasPaused == nil {
		n.replicasPaused = map[string]bool{}
	}
	n.replicasPaused[addr] = on
}

// acking is how many replicas of the node at addr acknowledge writes now.
// n.mu is held.
func (n *Net) acking(addr string) int {
	if n.replicasPaused[addr] {
		return 0
	}
	for _, r := range n.replicas {
		if r.addr == addr {
			return 0
		}
	}
	return Replicas
}

// answerWaits splits request b, bound for the node at addr, into the
// segments to write: each WAIT command replaced by waitCommand with the
// count of replicas acknowledging, after its timeout when that count is
// short of what it asked. A request without WAIT is one segment. n.mu is
// held.
func (n *Net) answerWaits(addr string, b []byte) []segment {
	if !bytes.Contains(b, []byte("wait")) && !bytes.Contains(b, []byte("WAIT")) {
		return []segment{{b: b}}
	}
	cmds, names, ok := commands(b)
	if !ok {
		return []segment{{b: b}}
	}
	var segs []segment
	cur := segment{}
	for i, c := range cmds {
		args := commandArgs(c)
		if names[i] != "WAIT" || len(args) != 3 {
			cur.b = append(cur.b, c...)
			continue
		}
		want, err1 := strconv.Atoi(string(args[1]))
		ms, err2 := strconv.ParseInt(string(args[2]), 10, 64)
		if err1 != nil || err2 != nil || want < 0 || ms < 0 {
			cur.b = append(cur.b, c...) // the node replies with its error
			continue
		}
		got := n.acking(addr)
		reply := fmt.Sprintf("return %d", got)
		stand := fmt.Appendf(nil, waitCommand, len(reply), reply)
		if got >= want || ms == 0 {
			cur.b = append(cur.b, stand...)
			continue
		}
		n.counts.WaitsShort++
		if len(cur.b) > 0 || cur.after > 0 {
			segs = append(segs, cur)
		}
		cur = segment{after: time.Duration(ms) * time.Millisecond, b: stand}
	}
	return append(segs, cur)
}
