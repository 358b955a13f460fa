// Package simnet holds what a simulated network's user needs to name its
// faults and read their evidence (Rates, Counts) without the network
// itself: package chaos declares each fault's simulated twin with it, and
// package nodes below it, the network and its in-process Redis nodes,
// implements it. So a module that runs locks in real time does not pull the
// simulation's in-process Redis.
package simnet

import (
	"fmt"
	"time"
)

// Rates are the network's message faults, drawn per message from a
// stream seeded by the network's seed and the connection. Zero means a
// perfect network: every message is delivered at once, in order.
type Rates struct {
	// Delay is the least one-way delay of a message; Jitter the most
	// added to it at random. Messages of one connection keep their order
	// (a stream), those of different connections race.
	Delay, Jitter time.Duration
	// Drop is the chance that a request is lost on its way to the node:
	// the command never runs and the connection is reset.
	Drop float64
	// LoseReply is the chance that a reply is lost after its command ran:
	// the connection is reset, and the client cannot know the outcome.
	LoseReply float64
	// Late is the chance that a request is held in transit for LateBy
	// more (and up to half of it again, drawn), as a TCP retransmit
	// holds it: the requests behind it on its connection wait too, and
	// when its sender gives up meanwhile and closes the connection, the
	// request is still delivered, at its time, to whichever node then
	// serves its address (the sender never hears the reply). LateBy
	// above the clients' op timeout makes requests land after their
	// sender gave up: the lock's recovery paths (undo, bury, cleanup)
	// race them.
	Late   float64
	LateBy time.Duration
	// Drain: a request on its way when its sender closes the connection
	// still lands, at its time, as TCP delivers what was written before
	// the FIN and Redis runs a command it read before the EOF; its reply
	// goes nowhere. Without it the close loses the request. With Jitter,
	// a request whose sender gave up on it (a call with a short deadline)
	// lands after requests its client sent later on other connections,
	// its retry and the lock's cleanup of it among them, in an order the
	// draws decide: a real network and a connection pool reorder so.
	Drain bool
}

// Validate reports a rate out of range, naming the field.
func (r Rates) Validate() error {
	switch {
	case r.Delay < 0:
		return fmt.Errorf("simnet: Rates.Delay = %v: must be at least 0", r.Delay)
	case r.Jitter < 0:
		return fmt.Errorf("simnet: Rates.Jitter = %v: must be at least 0", r.Jitter)
	case r.Drop < 0 || r.Drop > 1:
		return fmt.Errorf("simnet: Rates.Drop = %v: must be in [0, 1]", r.Drop)
	case r.LoseReply < 0 || r.LoseReply > 1:
		return fmt.Errorf("simnet: Rates.LoseReply = %v: must be in [0, 1]", r.LoseReply)
	case r.Late < 0 || r.Late > 1:
		return fmt.Errorf("simnet: Rates.Late = %v: must be in [0, 1]", r.Late)
	case r.LateBy < 0:
		return fmt.Errorf("simnet: Rates.LateBy = %v: must be at least 0", r.LateBy)
	case r.Late > 0 && r.LateBy == 0:
		return fmt.Errorf("simnet: Rates.LateBy = 0 with Late = %v: a late request needs a delay", r.Late)
	}
	return nil
}

// Counts say what the network did to messages: its evidence.
type Counts struct {
	// Messages is how many were delivered; Dropped and LostReplies how
	// many requests and replies were lost (each with a reset); Blackholed
	// how many a cut dropped; Held how many requests waited out a pause;
	// Resets the connections a lost message reset. Late is how many
	// requests were held in transit (Rates.Late), and Orphaned how many
	// of those were delivered after their connection had closed: their
	// sender had given up on them.
	Messages, Dropped, LostReplies, Blackholed, Held, Resets int
	Late, Orphaned                                           int
	// Drained is how many requests in flight when their sender closed
	// the connection landed afterwards (Rates.Drain).
	Drained int
	// PubSubDropped is how many pub/sub connections DropSubscribed
	// closed, Refused how many SUBSCRIBE commands a node refused
	// (RefuseSubscribe), and Stalled how many connections StallDials
	// held back.
	PubSubDropped, Refused, Stalled int
	// OutOfMemory is how many requests a node refused with -OOM
	// (RefuseWrites): each had no effect.
	OutOfMemory int
	// WaitsShort is how many WAIT commands got fewer replicas than they
	// asked and blocked for their timeout (a replica cut off from its
	// master while a failover is under way).
	WaitsShort int
}
