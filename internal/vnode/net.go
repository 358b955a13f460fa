package vnode

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
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
}

// Validate reports a rate out of range, naming the field.
func (r Rates) Validate() error {
	switch {
	case r.Delay < 0:
		return fmt.Errorf("vnode: Rates.Delay = %v: must be at least 0", r.Delay)
	case r.Jitter < 0:
		return fmt.Errorf("vnode: Rates.Jitter = %v: must be at least 0", r.Jitter)
	case r.Drop < 0 || r.Drop > 1:
		return fmt.Errorf("vnode: Rates.Drop = %v: must be in [0, 1]", r.Drop)
	case r.LoseReply < 0 || r.LoseReply > 1:
		return fmt.Errorf("vnode: Rates.LoseReply = %v: must be in [0, 1]", r.LoseReply)
	}
	return nil
}

// Counts say what the network did to messages: its evidence.
type Counts struct {
	// Messages is how many were delivered; Dropped and LostReplies how
	// many requests and replies were lost (each with a reset); Held how
	// many waited out a cut or a pause; Resets the connections reset by a
	// fault (losses, Reset, Crash).
	Messages, Dropped, LostReplies, Held, Resets int
}

// Net is a simulated network between named clients and in-process Redis
// nodes (miniredis) in a testing/synctest bubble. Every connection is a
// pair of in-memory pipes with a pump each way that delivers each
// message (what one Write carried) after the network's delay, holds it
// while its client is cut off or its node paused, or loses it and resets
// the connection. Its keys expire on the bubble's clock: a node is
// advanced to the bubble's now right before each request reaches it
// (miniredis counts TTLs down only when told, and not from inside a
// command), so no ticker runs. Every choice is drawn from the seed and
// the connection's name and rank, so a run whose goroutines are scheduled
// alike (GOMAXPROCS 1) makes the same choices.
type Net struct {
	seed  uint64
	nodes map[string]*Node // by address

	mu     sync.Mutex
	rates  Rates
	dials  map[string]int     // connections made so far, by client and address
	links  map[*link]struct{} // open connections
	cut    map[string]bool    // clients cut off
	paused map[string]bool    // nodes paused, by address
	change chan struct{}      // closed (and replaced) when a cut or pause lifts
	counts Counts
	closed bool
}

// Node is one in-process Redis node of a Net.
type Node struct {
	Addr string
	M    *miniredis.Miniredis

	mu   sync.Mutex
	last time.Time // the bubble instant its keys were last advanced to
}

// Advance counts the node's key TTLs down to the bubble's now.
func (n *Node) Advance() {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := time.Now()
	if d := now.Sub(n.last); d > 0 {
		n.M.FastForward(d)
	}
	n.last = now
}

// NewNet starts one node per address (IP literals: nothing may look a
// name up inside a bubble, the resolver's state being the process's).
// Call it inside a synctest bubble, and Close it before the bubble ends.
func NewNet(seed uint64, addrs ...string) *Net {
	n := &Net{seed: seed, nodes: map[string]*Node{}, dials: map[string]int{}, links: map[*link]struct{}{},
		cut: map[string]bool{}, paused: map[string]bool{}, change: make(chan struct{})}
	for _, a := range addrs {
		n.nodes[a] = &Node{Addr: a, M: miniredis.NewMiniRedis(), last: time.Now()}
	}
	return n
}

// Node returns the node at addr, or nil.
func (n *Net) Node(addr string) *Node { return n.nodes[addr] }

// SetRates sets the message faults from now on.
func (n *Net) SetRates(r Rates) error {
	if err := r.Validate(); err != nil {
		return err
	}
	n.mu.Lock()
	n.rates = r
	n.mu.Unlock()
	return nil
}

// Counts returns what the network did so far.
func (n *Net) Counts() Counts {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.counts
}

// Dialer returns the dialer of client (go-redis's Options.Dialer): the
// connections it makes are that client's, for Cut, Crash and the draws.
func (n *Net) Dialer(client string) Dialer {
	return func(ctx context.Context, _, addr string) (net.Conn, error) {
		node, ok := n.nodes[addr]
		if !ok {
			return nil, fmt.Errorf("vnode: no node at %s", addr)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n.mu.Lock()
		if n.closed {
			n.mu.Unlock()
			return nil, fmt.Errorf("vnode: dial %s: %w", addr, net.ErrClosed)
		}
		if n.cut[client] {
			n.mu.Unlock()
			// A cut-off client's dial hangs until its context ends, as a
			// SYN into a blackhole does.
			<-ctx.Done()
			return nil, ctx.Err()
		}
		id := client + ">" + addr
		rank := n.dials[id]
		n.dials[id]++
		n.mu.Unlock()
		ms, err := node.M.Dial()
		if err != nil {
			return nil, err
		}
		cc, cs := net.Pipe()
		h := fnv.New64a()
		_, _ = fmt.Fprintf(h, "%s#%d", id, rank)
		l := &link{net: n, node: node, client: client, cs: cs, ms: ms,
			rng: rand.New(rand.NewPCG(n.seed, h.Sum64()))}
		n.mu.Lock()
		n.links[l] = struct{}{}
		n.mu.Unlock()
		l.start()
		return cc, nil
	}
}

// Cut holds every message of each client (and its new connections) until
// Heal: a blackhole, as a partition is. Its connections stay open.
func (n *Net) Cut(clients ...string) { n.hold(n.cut, clients...) }

// Heal lifts every cut.
func (n *Net) Heal() { n.lift(n.cut) }

// Pause holds the requests to the node at addr until Resume: a stopped
// server, whose clients time out.
func (n *Net) Pause(addr string) { n.hold(n.paused, addr) }

// Resume lifts every pause.
func (n *Net) Resume() { n.lift(n.paused) }

// hold marks names in set (n.cut or n.paused): their messages wait.
func (n *Net) hold(set map[string]bool, names ...string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, c := range names {
		set[c] = true
	}
}

// lift clears set and wakes the messages that waited.
func (n *Net) lift(set map[string]bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(set)
	n.wake()
}

// Reset resets every connection of the clients; it returns how many.
func (n *Net) Reset(clients ...string) int {
	n.mu.Lock()
	var ls []*link
	for l := range n.links {
		if slices.Contains(clients, l.client) {
			ls = append(ls, l)
		}
	}
	n.counts.Resets += len(ls)
	n.mu.Unlock()
	for _, l := range ls {
		l.close()
	}
	return len(ls)
}

// wake wakes the pumps waiting out a cut or a pause. n.mu is held.
func (n *Net) wake() {
	close(n.change)
	n.change = make(chan struct{})
}

// Close resets every connection, refuses new ones, and stops the nodes.
func (n *Net) Close() {
	n.mu.Lock()
	n.closed = true
	ls := make([]*link, 0, len(n.links))
	for l := range n.links {
		ls = append(ls, l)
	}
	n.mu.Unlock()
	for _, l := range ls {
		l.close()
		l.wg.Wait()
	}
	for _, node := range n.nodes {
		node.M.Close()
	}
}

// errClosed ends a pump: its connection was reset.
var errClosed = errors.New("vnode: connection reset")

// link is one connection: the client's pipe end cs, the node's ms, and a
// pump each way.
type link struct {
	net    *Net
	node   *Node
	client string
	cs, ms net.Conn
	rng    *rand.Rand // guarded by net.mu

	once sync.Once
	done chan struct{}
	wg   sync.WaitGroup
}

// message is what one Write carried, and when it may be delivered.
type message struct {
	b  []byte
	at time.Time
}

func (l *link) start() {
	l.done = make(chan struct{})
	l.wg.Add(4)
	up, down := make(chan message, 64), make(chan message, 64)
	go l.read(l.cs, up)
	go l.deliver(up, l.ms, true)
	go l.read(l.ms, down)
	go l.deliver(down, l.cs, false)
}

// read reads messages from src and queues them with their delivery time:
// the network's delay after now, never before the message ahead (a
// stream keeps its order).
func (l *link) read(src net.Conn, q chan<- message) {
	defer l.wg.Done()
	defer close(q)
	buf := make([]byte, 64<<10)
	var last time.Time
	for {
		k, err := src.Read(buf)
		if err != nil {
			l.close()
			return
		}
		l.net.mu.Lock()
		r := l.net.rates
		d := r.Delay
		if r.Jitter > 0 {
			d += time.Duration(l.rng.Int64N(int64(r.Jitter) + 1))
		}
		l.net.mu.Unlock()
		at := time.Now().Add(d)
		if at.Before(last) {
			at = last
		}
		last = at
		select {
		case q <- message{b: slices.Clone(buf[:k]), at: at}:
		case <-l.done:
			return
		}
	}
}

// deliver writes the queued messages to dst at their time, holding them
// through a cut or a pause, or loses one and resets the connection.
func (l *link) deliver(q <-chan message, dst net.Conn, up bool) {
	defer l.wg.Done()
	for m := range q {
		if d := time.Until(m.at); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-l.done:
				t.Stop()
				return
			}
		}
		if err := l.hold(up); err != nil {
			return
		}
		l.net.mu.Lock()
		lose, rate := false, l.net.rates.LoseReply
		if up {
			rate = l.net.rates.Drop
		}
		if rate > 0 {
			lose = l.rng.Float64() < rate
		}
		if lose {
			if up {
				l.net.counts.Dropped++
			} else {
				l.net.counts.LostReplies++
			}
			l.net.counts.Resets++
		} else {
			l.net.counts.Messages++
		}
		l.net.mu.Unlock()
		if lose {
			l.close()
			return
		}
		if up {
			l.node.Advance()
		}
		if _, err := dst.Write(m.b); err != nil {
			l.close()
			return
		}
	}
}

// hold waits while the link's client is cut off, or (a request) its node
// paused; errClosed when the connection is reset meanwhile.
func (l *link) hold(up bool) error {
	counted := false
	for {
		l.net.mu.Lock()
		held := l.net.cut[l.client] || (up && l.net.paused[l.node.Addr])
		change := l.net.change
		if held && !counted {
			l.net.counts.Held++
			counted = true
		}
		l.net.mu.Unlock()
		if !held {
			return nil
		}
		select {
		case <-change:
		case <-l.done:
			return errClosed
		}
	}
}

// close resets the connection: both pipes close, the pumps end.
func (l *link) close() {
	l.once.Do(func() {
		close(l.done)
		_ = l.cs.Close()
		_ = l.ms.Close()
		l.net.mu.Lock()
		delete(l.net.links, l)
		l.net.mu.Unlock()
	})
}
