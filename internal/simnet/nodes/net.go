package nodes

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/lockproof/lockproof/internal/simnet"
)

// Rates are the network's message faults (simnet.Rates).
type Rates = simnet.Rates

// Counts say what the network did to messages (simnet.Counts).
type Counts = simnet.Counts

// Net is a simulated network between named clients and in-process Redis
// nodes (miniredis) in a testing/synctest bubble. Every connection is a
// pair of in-memory pipes with a pump each way that delivers each
// message (what one Write carried) after the network's delay, drops it
// while its client is cut off, holds a request while its node is paused,
// or loses it and resets the connection. Its keys expire on the bubble's clock: a node is
// advanced to the bubble's now right before each request reaches it
// (miniredis counts TTLs down only when told, and not from inside a
// command), so no ticker runs. Every choice is drawn from the seed and
// the connection's name and rank, so a run whose goroutines are scheduled
// alike (GOMAXPROCS 1) makes the same choices.
type Net struct {
	seed uint64

	mu      sync.Mutex
	nodes   map[string]*Node // by address
	retired []*Node          // nodes a promotion replaced, stopped at Close
	// replicas are the replicas SyncReplica made, not yet promoted or
	// dropped, by id; replicaSeq is the last id given.
	replicas   map[int]*replica
	replicaSeq int
	// replicasPaused are the nodes whose replicas acknowledge nothing
	// (PauseReplicas), by address.
	replicasPaused map[string]bool
	rates          Rates
	dials          map[string]int     // connections made so far, by client and address
	links          map[*link]struct{} // open connections
	cut            map[string]bool    // clients cut off
	paused         map[string]bool    // nodes paused, by address
	// refusing are the nodes that refuse SUBSCRIBE, by address
	// (RefuseSubscribe); a connection dialed before stallTo has its
	// requests held back for stallFor from its dial (StallDials).
	refusing map[string]bool
	// oom is, by address, the share of the writes a node refuses with
	// -OOM (RefuseWrites); scripts are the scripts seen on the network
	// (EVAL, SCRIPT LOAD), by SHA-1, each with whether it may add memory.
	oom      map[string]float64
	scripts  map[string]bool
	stallTo  time.Time
	stallFor time.Duration
	change   chan struct{} // closed (and replaced) when a cut or pause lifts
	counts   Counts
	closed   bool
	// orphans are the late requests whose connection closed before their
	// time (deliverOrphan); quit ends their waits at Close.
	orphans sync.WaitGroup
	quit    chan struct{}
	// inTransit counts the late requests not yet delivered or dropped;
	// settled is closed while it is 0 (LateSettled).
	inTransit int
	settled   chan struct{}
}

// Node is one in-process Redis node of a Net.
type Node struct {
	Addr string
	M    *miniredis.Miniredis
	// Behind is how far the node's clock (TIME, and what EXPIREAT and
	// PXAT read) runs behind the bubble's; its TTLs count down alike.
	Behind time.Duration

	mu   sync.Mutex
	last time.Time // the bubble instant its keys were last advanced to
	// fast is how much faster than the bubble's the node's clock runs
	// (SetRate), ahead how far it has run ahead so far.
	fast  float64
	ahead time.Duration
}

// SetRate makes the node's clock run fast by the fraction fast (0.01:
// 1% fast; 0: at the bubble's pace) from now on: its key TTLs count down
// that much faster, and its clock (TIME) runs ahead by what it gained,
// which it keeps after the rate is put back, as a drifted clock does.
func (n *Node) SetRate(fast float64) {
	n.Advance()
	n.mu.Lock()
	defer n.mu.Unlock()
	n.fast = fast
}

// Advance counts the node's key TTLs down to the bubble's now (faster by
// its rate), and sets its clock to now less Behind, plus what it ran
// ahead.
func (n *Node) Advance() {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := time.Now()
	if d := now.Sub(n.last); d > 0 {
		gain := time.Duration(float64(d) * n.fast)
		n.ahead += gain
		n.M.FastForward(d + gain)
	}
	n.last = now
	if n.Behind > 0 || n.ahead != 0 {
		n.M.SetTime(now.Add(n.ahead - n.Behind))
	}
}

// NewNet starts one node per address (IP literals: nothing may look a
// name up inside a bubble, the resolver's state being the process's).
// Call it inside a synctest bubble, and Close it before the bubble ends.
func NewNet(seed uint64, addrs ...string) *Net {
	n := &Net{seed: seed, nodes: map[string]*Node{}, dials: map[string]int{}, links: map[*link]struct{}{},
		cut: map[string]bool{}, paused: map[string]bool{}, refusing: map[string]bool{}, oom: map[string]float64{}, scripts: map[string]bool{}, change: make(chan struct{}), quit: make(chan struct{}), settled: closed()}
	for _, a := range addrs {
		n.nodes[a] = &Node{Addr: a, M: miniredis.NewMiniRedis(), last: time.Now()}
	}
	return n
}

// Keys are the keys of the node at addr, its clock advanced to the
// bubble's now first.
func (n *Net) Keys(addr string) []string {
	node := n.Node(addr)
	node.Advance()
	return node.M.Keys()
}

// DelKeys deletes the keys of the node at addr that contain part, as an
// operator's DEL does, its clock advanced first, and returns those it
// deleted.
func (n *Net) DelKeys(addr, part string) []string {
	node := n.Node(addr)
	node.Advance()
	var deleted []string
	for _, k := range node.M.Keys() {
		if strings.Contains(k, part) && node.M.Del(k) {
			deleted = append(deleted, k)
		}
	}
	return deleted
}

// ClockRate is the clock-rate setter of the node at addr now
// (Node.SetRate: fast by that fraction; 0 puts it back): the node's, also
// once a promotion has replaced it at addr.
func (n *Net) ClockRate(addr string) func(fast float64) { return n.Node(addr).SetRate }

// closed returns a closed channel.
func closed() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// LateSettled returns a channel closed once no late request (Rates.Late)
// is in transit any more: each was delivered or dropped. A fault that
// makes requests late lasts until then: what it holds lands after the
// rates are put back.
func (n *Net) LateSettled() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.settled
}

// settle marks one late request delivered or dropped.
func (n *Net) settle() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.inTransit--
	if n.inTransit == 0 {
		close(n.settled)
	}
}

// Node returns the node at addr, or nil.
func (n *Net) Node(addr string) *Node {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.nodes[addr]
}

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
// connections it makes are that client's, for Cut and the draws.
func (n *Net) Dialer(client string) Dialer {
	return func(ctx context.Context, _, addr string) (net.Conn, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n.mu.Lock()
		node, ok := n.nodes[addr]
		if !ok {
			n.mu.Unlock()
			return nil, fmt.Errorf("simnet: no node at %s", addr)
		}
		if n.closed {
			n.mu.Unlock()
			return nil, fmt.Errorf("simnet: dial %s: %w", addr, net.ErrClosed)
		}
		// A cut-off client's dial succeeds, and its messages wait like
		// those of its open connections: a dial that hung instead would
		// hang inside go-redis's PubSub mutex, and a goroutine waiting on
		// a mutex is not durably blocked, so the bubble's clock would stop
		// for good (testing/synctest).
		id := client + ">" + addr
		rank := n.dials[id]
		n.dials[id]++
		n.mu.Unlock()
		ms, err := node.M.Dial()
		if err != nil {
			return nil, err
		}
		cc, cs := net.Pipe()
		name := fmt.Sprintf("%s#%d", id, rank)
		h := fnv.New64a()
		_, _ = h.Write([]byte(name))
		l := &link{net: n, node: node, client: client, name: name, cs: cs, ms: ms, draws: h.Sum64()}
		n.mu.Lock()
		n.links[l] = struct{}{}
		if now := time.Now(); now.Before(n.stallTo) {
			l.stallTill = now.Add(n.stallFor)
			n.counts.Stalled++
		}
		n.mu.Unlock()
		l.start()
		return cc, nil
	}
}

// Cut drops every message of each client until Heal, on its open
// connections and on those it makes meanwhile (past their handshake): a
// blackhole, as the real-time partition is (Toxiproxy's timeout toxic
// with no timeout). Its connections stay open; its calls time out.
func (n *Net) Cut(clients ...string) { n.hold(n.cut, clients...) }

// Heal lifts every cut.
func (n *Net) Heal() { n.lift(n.cut) }

// RefuseSubscribe makes the node at addr refuse SUBSCRIBE, PSUBSCRIBE
// and SSUBSCRIBE (on), each with an error reply in its place on the
// connection, as Redis does when an ACL denies them (NOPERM), or accept
// them again (off). Other commands pass.
func (n *Net) RefuseSubscribe(addr string, on bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if on {
		n.refusing[addr] = true
	} else {
		delete(n.refusing, addr)
	}
}

// RefuseWrites makes the node at addr refuse share (0 to 1) of the
// requests that hold a write (writes), drawn per request, each command
// of them with -OOM in its place, as Redis at its maxmemory with the
// noeviction policy refuses a command that may add memory while its
// memory is over the limit: a node whose memory comes and goes around it
// refuses some writes and takes others. A refused command has no effect.
// A script counts as a write when its body calls a command that may add
// memory (a script that only reads, such as a lookup, passes); it is
// refused whole, before it runs: Redis runs a script without flags up to
// its first such command, so the commands that only free memory before
// it (a DEL, an HDEL) would run, which the stand-in does not model. An
// EVALSHA of a script the network has not carried yet (no EVAL or SCRIPT
// LOAD of it) passes. 0 takes every write again.
func (n *Net) RefuseWrites(addr string, share float64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if share > 0 {
		n.oom[addr] = share
	} else {
		delete(n.oom, addr)
	}
}

// DropSubscribed resets every connection to the node at addr that has
// subscribed (sent SUBSCRIBE, PSUBSCRIBE or SSUBSCRIBE the node took),
// as CLIENT KILL TYPE pubsub does, and returns how many.
func (n *Net) DropSubscribed(addr string) int {
	n.mu.Lock()
	var drop []*link
	for l := range n.links {
		if l.subscribed && l.node.Addr == addr {
			drop = append(drop, l)
		}
	}
	n.counts.PubSubDropped += len(drop)
	n.mu.Unlock()
	for _, l := range drop {
		l.close()
	}
	return len(drop)
}

// StallDials holds back the requests of every connection dialed from now
// for within, for d from its dial (a lost SYN: the connection opens late),
// past its handshake (which must pass at once: see message). The
// connections already open serve as before.
func (n *Net) StallDials(within, d time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stallTo, n.stallFor = time.Now().Add(within), d
}

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

// wake wakes the pumps waiting out a cut or a pause. n.mu is held.
func (n *Net) wake() {
	close(n.change)
	n.change = make(chan struct{})
}

// Close resets every connection, refuses new ones, and stops the nodes.
func (n *Net) Close() {
	n.mu.Lock()
	if !n.closed {
		close(n.quit)
	}
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
	n.orphans.Wait()
	n.mu.Lock()
	nodes := slices.Concat(slices.Collect(maps.Values(n.nodes)), n.retired)
	n.mu.Unlock()
	for _, node := range nodes {
		node.M.Close()
	}
}

// Transit bounds the time every message (but a handshake's) takes on
// top of the network's delay: 1 ns to Transit, drawn from the seed. Two
// goroutines woken at one virtual instant run in an order Go does not
// fix, so two messages of different connections sent at one instant, or
// a reply that reached its client at the very instant a timer of the
// client fired, made a seed's history differ from run to run; with a
// drawn transit they reach their ends at distinct instants, in an order
// the seed decides. A microsecond is well below a real loopback's round
// trip.
const Transit = time.Microsecond

// errClosed ends a pump: its connection was reset.
var errClosed = errors.New("simnet: connection reset")

// link is one connection: the client's pipe end cs, the node's ms, and a
// pump each way.
type link struct {
	net    *Net
	node   *Node
	client string
	name   string // the client, the address and the connection's rank: its draws' seed
	cs, ms net.Conn
	// draws seeds the random sources of the link's pumps, one each: a
	// source shared by two pumps would hand out its numbers in the order
	// the pumps happen to run.
	draws uint64
	// pastSetUp: the connection has sent a request that is not a set-up
	// command (guarded by net.mu).
	pastSetUp bool
	// subscribed: the node took a SUBSCRIBE of the connection (guarded
	// by net.mu; DropSubscribed).
	subscribed bool
	// stallTill: its requests wait until then (StallDials; set at dial).
	stallTill time.Time

	once sync.Once
	done chan struct{}
	wg   sync.WaitGroup
}

// message is what one Write carried, and when it may be delivered.
// A handshake message (the connection's set-up requests, and the replies
// before its first other request) is delivered at once, never held or lost: go-redis
// runs a connection's handshake inside its PubSub's mutex, and a goroutine
// waiting on a mutex is not durably blocked (testing/synctest), so a
// handshake that waited on the bubble's clock while another goroutine
// waited on that mutex would stop the clock for good. A fault strikes the
// connection from its first command on.
type message struct {
	b         []byte
	at        time.Time
	handshake bool
	late      bool // held in transit (Rates.Late): delivered even if the connection closes first
	// drains: sent while Rates.Drain was on, a request that lands even if
	// its sender closes the connection before its time (deliverOrphan).
	drains bool
}

func (l *link) start() {
	l.done = make(chan struct{})
	l.wg.Add(4)
	up, down := make(chan message, 64), make(chan message, 64)
	go l.read(l.cs, up, true, l.rng(0))
	go l.deliver(up, l.ms, true, l.rng(1))
	go l.read(l.ms, down, false, l.rng(2))
	go l.deliver(down, l.cs, false, l.rng(3))
}

// rng returns the random source of the link's pump number k.
func (l *link) rng(k uint64) *rand.Rand {
	return rand.New(rand.NewPCG(l.net.seed, l.draws+k))
}

// handshaking reports whether message b, read now, is part of the
// connection's handshake: a request of connection set-up commands only
// (handshakeCommands) before any other, or a reply before the first other
// request; up says which way b goes.
func (l *link) handshaking(up bool, b []byte) bool {
	l.net.mu.Lock()
	defer l.net.mu.Unlock()
	if up && !l.pastSetUp && !onlySetUp(b) {
		l.pastSetUp = true
	}
	return !l.pastSetUp
}

// handshakeCommands are the commands go-redis sends on a new connection
// before the caller's.
var handshakeCommands = map[string]bool{"HELLO": true, "CLIENT": true, "AUTH": true, "SELECT": true, "READONLY": true}

// onlySetUp reports whether b holds only whole RESP commands that are
// connection set-up (handshakeCommands).
func onlySetUp(b []byte) bool {
	_, names, ok := commands(b)
	if !ok || len(names) == 0 {
		return false
	}
	for _, n := range names {
		if !handshakeCommands[n] {
			return false
		}
	}
	return true
}

// respLen reads a RESP length line ("*3\r\n", "$5\r\n") of the given
// type and returns the number and what follows.
func respLen(b []byte, typ byte) (int, []byte, bool) {
	if len(b) == 0 || b[0] != typ {
		return 0, nil, false
	}
	end := bytes.Index(b, []byte("\r\n"))
	if end < 0 {
		return 0, nil, false
	}
	n, err := strconv.Atoi(string(b[1:end]))
	if err != nil {
		return 0, nil, false
	}
	return n, b[end+2:], true
}

// read reads messages from src and queues them with their delivery time:
// the network's delay after now, never before the message ahead (a
// stream keeps its order).
func (l *link) read(src net.Conn, q chan<- message, up bool, rng *rand.Rand) {
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
		hs := l.handshaking(up, buf[:k])
		d, late, drains := time.Duration(0), false, false
		if !hs {
			l.net.mu.Lock()
			r := l.net.rates
			drains = up && r.Drain
			d = r.Delay + 1 + time.Duration(rng.Int64N(int64(Transit)))
			if r.Jitter > 0 {
				d += time.Duration(rng.Int64N(int64(r.Jitter) + 1))
			}
			// Drawn only while requests may be late: the draws of a seed
			// without this fault stay as they were.
			if up && r.Late > 0 && rng.Float64() < r.Late {
				late = true
				d += r.LateBy + time.Duration(rng.Int64N(int64(r.LateBy/2)+1))
				l.net.counts.Late++
				if l.net.inTransit == 0 {
					l.net.settled = make(chan struct{})
				}
				l.net.inTransit++
			}
			l.net.mu.Unlock()
		}
		at := time.Now().Add(d)
		if at.Before(last) {
			at = last
		}
		last = at
		select {
		case q <- message{b: slices.Clone(buf[:k]), at: at, handshake: hs, late: late, drains: drains}:
		case <-l.done:
			if late {
				l.net.settle()
			} else if drains {
				// Written before the close: on the wire, it lands.
				l.orphan(message{b: slices.Clone(buf[:k]), at: at, drains: true})
			}
			return
		}
	}
}

// deliver writes the queued messages to dst at their time, holding them
// through a cut or a pause, or loses one and resets the connection. When
// the connection closes, the late requests still queued (Rates.Late),
// and those sent while the network drained closed connections
// (Rates.Drain), were on the wire already: they land anyway
// (deliverOrphan).
func (l *link) deliver(q <-chan message, dst net.Conn, up bool, rng *rand.Rand) {
	defer l.wg.Done()
	defer func() {
		for m := range q {
			l.orphan(m)
		}
	}()
	for m := range q {
		if !l.deliverOne(m, dst, up, rng) {
			return
		}
	}
}

// orphan hands late or draining request m, whose connection closed, to
// deliverOrphan; any other message is lost with the connection.
func (l *link) orphan(m message) {
	if m.late || m.drains {
		l.net.deliverOrphan(l.node.Addr, m)
	}
}

// deliverOne delivers m at its time; false when the connection was
// reset meanwhile or by m's loss (m is then orphaned or lost).
func (l *link) deliverOne(m message, dst net.Conn, up bool, rng *rand.Rand) bool {
	if !l.until(m.at) {
		// Its sender gave up and closed the connection; a late request
		// was on the wire already, and lands anyway.
		l.orphan(m)
		return false
	}
	if m.handshake {
		return l.write(dst, m.b, up)
	}
	if up && !l.until(l.stallTill) {
		l.orphan(m)
		return false
	}
	if err := l.hold(up); err != nil {
		l.orphan(m)
		return false
	}
	if m.late {
		defer l.net.settle()
	}
	l.net.mu.Lock()
	if l.net.cut[l.client] {
		// A blackhole: the message is gone, the connection stays.
		l.net.counts.Blackholed++
		l.net.mu.Unlock()
		return true
	}
	lose, rate := false, l.net.rates.LoseReply
	if up {
		rate = l.net.rates.Drop
	}
	if rate > 0 {
		lose = rng.Float64() < rate
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
	b := m.b
	if up && !lose {
		l.net.learnScripts(b)
	}
	// Drawn only while the node refuses writes: the draws of a seed
	// without that fault stay as they were.
	if share := l.net.oom[l.node.Addr]; up && !lose && share > 0 && rng.Float64() < share {
		var n int
		if b, n = l.net.refuseWrites(b); n > 0 {
			l.net.counts.OutOfMemory++
		}
	}
	if up && !lose && subscribes(b) {
		if l.net.refusing[l.node.Addr] {
			b = refuseSubscribes(b)
			l.net.counts.Refused++
		} else {
			l.subscribed = true
		}
	}
	segs := []segment{{b: b}}
	if up && !lose {
		segs = l.net.answerWaits(l.node.Addr, b)
	}
	l.net.mu.Unlock()
	if lose {
		l.close()
		return false
	}
	for _, seg := range segs {
		if !l.writeAfter(dst, seg, up) {
			return false
		}
	}
	return true
}

// writeAfter writes seg.b once seg.after has passed (a WAIT blocking its
// connection); false when the connection was reset.
func (l *link) writeAfter(dst net.Conn, seg segment, up bool) bool {
	if seg.after > 0 && !l.until(time.Now().Add(seg.after)) {
		return false
	}
	return l.write(dst, seg.b, up)
}

// subscribeCommands are the commands that put a connection in pub/sub
// mode.
var subscribeCommands = map[string]bool{"SUBSCRIBE": true, "PSUBSCRIBE": true, "SSUBSCRIBE": true}

// commands splits b into its whole RESP commands, each with its name
// (upper case); ok is false when b is not whole commands.
func commands(b []byte) (cmds [][]byte, names []string, ok bool) {
	for len(b) > 0 {
		start := b
		n, rest, ok := respLen(b, '*')
		if !ok || n < 1 {
			return nil, nil, false
		}
		b = rest
		name := ""
		for i := 0; i < n; i++ {
			k, rest, ok := respLen(b, '$')
			if !ok || k < 0 || len(rest) < k+2 {
				return nil, nil, false
			}
			if i == 0 {
				name = strings.ToUpper(string(rest[:k]))
			}
			b = rest[k+2:]
		}
		cmds = append(cmds, start[:len(start)-len(b)])
		names = append(names, name)
	}
	return cmds, names, true
}

// subscribes reports whether b holds a subscribe command.
func subscribes(b []byte) bool {
	// Most messages are not: skip the parse (every request passes here).
	if !bytes.Contains(b, []byte("ubscribe")) && !bytes.Contains(b, []byte("UBSCRIBE")) {
		return false
	}
	_, names, ok := commands(b)
	if !ok {
		return false
	}
	for _, n := range names {
		if subscribeCommands[n] {
			return true
		}
	}
	return false
}

// refusedCommand stands in for a refused subscribe command: the node
// does not know it and replies with an error, in the refused command's
// place on the connection, as Redis replies NOPERM to a command an ACL
// denies (miniredis has no ACL).
const refusedCommand = "NOPERM-SUBSCRIBE-REFUSED"

// refuseSubscribes replaces each subscribe command of b with
// refusedCommand.
func refuseSubscribes(b []byte) []byte {
	cmds, names, _ := commands(b)
	var out []byte
	for i, c := range cmds {
		if subscribeCommands[names[i]] {
			out = fmt.Appendf(out, "*1\r\n$%d\r\n%s\r\n", len(refusedCommand), refusedCommand)
		} else {
			out = append(out, c...)
		}
	}
	return out
}

// writeCommands are the commands that may add memory (Redis flags them
// denyoom), those the harness's locks and resources send, directly or
// from their scripts.
var writeCommands = map[string]bool{"SET": true, "SETNX": true, "SETEX": true, "PSETEX": true, "GETSET": true,
	"MSET": true, "MSETNX": true, "APPEND": true, "SETRANGE": true, "INCR": true, "INCRBY": true, "DECR": true, "DECRBY": true,
	"HSET": true, "HMSET": true, "HSETNX": true, "HINCRBY": true, "ZADD": true, "SADD": true, "LPUSH": true, "RPUSH": true,
	"RESTORE": true}

// scriptCall finds the commands a script calls by name (redis.call or
// redis.pcall with a quoted name).
var scriptCall = regexp.MustCompile(`redis\.p?call\(\s*['"]([A-Za-z]+)['"]`)

// writes reports whether a script's body calls a command that may add
// memory.
func writes(body []byte) bool {
	for _, m := range scriptCall.FindAllSubmatch(body, -1) {
		if writeCommands[strings.ToUpper(string(m[1]))] {
			return true
		}
	}
	return false
}

// learnScripts records the scripts request b carries (EVAL's body,
// SCRIPT LOAD's), by SHA-1, as Redis caches them: a later EVALSHA of one
// is then known for a write or not. n.mu is held.
func (n *Net) learnScripts(b []byte) {
	if !bytes.Contains(b, []byte("val")) && !bytes.Contains(b, []byte("VAL")) &&
		!bytes.Contains(b, []byte("cript")) && !bytes.Contains(b, []byte("CRIPT")) {
		return // most requests carry no script: skip the parse
	}
	cmds, names, ok := commands(b)
	if !ok {
		return
	}
	for i, c := range cmds {
		args := commandArgs(c)
		var body []byte
		switch {
		case names[i] == "EVAL" && len(args) > 1:
			body = args[1]
		case names[i] == "SCRIPT" && len(args) > 2 && strings.EqualFold(string(args[1]), "LOAD"):
			body = args[2]
		default:
			continue
		}
		sum := sha1.Sum(body)
		n.scripts[hex.EncodeToString(sum[:])] = writes(body)
	}
}

// commandArgs splits one whole RESP command (commands) into its
// arguments, its name first.
func commandArgs(c []byte) [][]byte {
	n, b, ok := respLen(c, '*')
	if !ok {
		return nil
	}
	args := make([][]byte, 0, n)
	for i := 0; i < n; i++ {
		k, rest, ok := respLen(b, '$')
		if !ok || k < 0 || len(rest) < k+2 {
			return nil
		}
		args = append(args, rest[:k])
		b = rest[k+2:]
	}
	return args
}

// refusable reports whether command c (name, upper case) may add memory:
// a plain write, or a script whose body may (an EVALSHA of a script not
// seen yet passes). n.mu is held.
func (n *Net) refusable(name string, c []byte) bool {
	switch name {
	case "EVAL":
		args := commandArgs(c)
		return len(args) > 1 && writes(args[1])
	case "EVALSHA":
		args := commandArgs(c)
		return len(args) > 1 && n.scripts[strings.ToLower(string(args[1]))]
	}
	return writeCommands[name]
}

// oomCommand stands in for a refused write: a script that replies with
// Redis's -OOM error, in the refused command's place on the connection.
const oomCommand = "*3\r\n$4\r\nEVAL\r\n$%d\r\n%s\r\n$1\r\n0\r\n"

// oomReply is the script oomCommand runs: Redis's words for a write it
// refuses at its maxmemory.
const oomReply = "return redis.error_reply(\"OOM command not allowed when used memory > 'maxmemory'.\")"

// refuseWrites replaces each command of request b that may add memory
// (refusable) with oomCommand, and says how many it replaced. A
// transaction (MULTI) is left whole: Redis would refuse it at EXEC, all
// or nothing, which a command-by-command stand-in cannot do. n.mu is
// held.
func (n *Net) refuseWrites(b []byte) ([]byte, int) {
	cmds, names, ok := commands(b)
	if !ok || slices.Contains(names, "MULTI") {
		return b, 0
	}
	var out []byte
	refused := 0
	for i, c := range cmds {
		if n.refusable(names[i], c) {
			out = fmt.Appendf(out, oomCommand, len(oomReply), oomReply)
			refused++
		} else {
			out = append(out, c...)
		}
	}
	return out, refused
}

// until waits until t; false when the connection was reset first.
func (l *link) until(t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return true
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-l.done:
		return false
	}
}

// write delivers b to dst (a request reaches a node advanced to now);
// false when the connection was reset.
func (l *link) write(dst net.Conn, b []byte, up bool) bool {
	if up {
		l.node.Advance()
	}
	if _, err := dst.Write(b); err != nil {
		l.close()
		return false
	}
	return true
}

// hold waits while a request's node is paused; errClosed when the
// connection is reset meanwhile.
func (l *link) hold(up bool) error {
	counted := false
	for {
		l.net.mu.Lock()
		held := up && l.net.paused[l.node.Addr]
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

// deliverOrphan delivers late or draining request m, whose connection
// has closed, at its time to the node that then serves addr (a promotion
// may have replaced the one it was sent to), on a connection of its own,
// held through a pause like any request; the reply goes nowhere. Nothing
// is delivered once the network is closed.
func (n *Net) deliverOrphan(addr string, m message) {
	n.orphans.Add(1)
	go func() {
		defer n.orphans.Done()
		if m.late {
			defer n.settle()
		}
		t := time.NewTimer(max(time.Until(m.at), 0))
		defer t.Stop()
		select {
		case <-t.C:
		case <-n.quit:
			return
		}
		for {
			n.mu.Lock()
			node, paused, change, closed := n.nodes[addr], n.paused[addr], n.change, n.closed
			if !paused && !closed && node != nil {
				if m.late {
					n.counts.Orphaned++
				} else {
					n.counts.Drained++
				}
			}
			n.mu.Unlock()
			if closed || node == nil {
				return
			}
			if !paused {
				node.Advance()
				c, err := node.M.Dial()
				if err != nil {
					return
				}
				if _, err := c.Write(m.b); err == nil {
					buf := make([]byte, 4096)
					_, _ = c.Read(buf) // the command ran; its reply goes nowhere
				}
				_ = c.Close()
				return
			}
			select {
			case <-change:
			case <-n.quit:
				return
			}
		}
	}()
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
