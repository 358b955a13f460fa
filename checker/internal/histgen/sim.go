// Package histgen generates random histories of a correct fenced lease lock and
// a correct resource, for testing and benchmarking the checker: every history
// it generates keeps the guarantees of the history contract, so the checker
// must pass it, and a mutation of it must fail.
//
// The simulation runs on one true clock. Each op takes effect atomically at a
// point p inside [call, return], in the order of p, against a correct lock
// (SET NX PX semantics, owner and token checked on release and renew, a per
// key fencing counter) and a correct resource (fenced: accepts a write or a
// read iff its token is not below the largest token seen, and an accepted
// one raises that token; unfenced: clients use it only while their lease is
// truly valid).
package histgen

import (
	"container/heap"
	"fmt"
	"math/rand/v2"

	"github.com/lockproof/lockproof/history"
)

// Config shapes a generated history. Zero fields take the defaults noted.
type Config struct {
	Seed    uint64
	Clients int // default 8
	Keys    int // default 4
	Ops     int // lock and resource ops to generate (faults come on top); default 1000
	// Unfenced: resource ops carry no token (clients then act only inside their true lease).
	Unfenced bool
	Unknown  float64 // probability that an op's outcome is unknown; default 0.03
	NoReturn float64 // probability that an unknown op never returns (the client then stops); default 0.2
	Pause    float64 // probability that a holder pauses past its TTL before a resource op; default 0.03
	Crash    float64 // probability that a client stops for good right after an ok acquire; default 0.01
	Faults   bool    // record fault windows (client pauses, plus random latency windows)
}

func (c *Config) defaults() {
	if c.Clients <= 0 {
		c.Clients = 8
	}
	if c.Keys <= 0 {
		c.Keys = 4
	}
	if c.Ops <= 0 {
		c.Ops = 1000
	}
	if c.Unknown == 0 {
		c.Unknown = 0.03
	}
	if c.NoReturn == 0 {
		c.NoReturn = 0.2
	}
	if c.Pause == 0 {
		c.Pause = 0.03
	}
	if c.Crash == 0 {
		c.Crash = 0.01
	}
}

const (
	us = int64(1000)
	ms = 1000 * us
)

type keyState struct {
	name    string
	holder  int // -1: free
	token   uint64
	expiry  int64
	counter uint64
	value   string
	hasMax  bool
	maxTok  uint64
	writes  int
}

type client struct {
	id      int
	name    string
	lastRet int64
	next    int64 // the point p of its next op
	call    int64 // the call of its next op
	stopped bool

	holding  bool
	key      int
	token    uint64
	ttlMs    int64
	opsLeft  int
	lastRead string
	hasRead  bool
}

type clientHeap []*client

func (h clientHeap) Len() int { return len(h) }
func (h clientHeap) Less(i, j int) bool {
	if h[i].next != h[j].next {
		return h[i].next < h[j].next
	}
	return h[i].id < h[j].id
}
func (h clientHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *clientHeap) Push(x any)   { *h = append(*h, x.(*client)) }
func (h *clientHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

type gen struct {
	cfg    Config
	nextID int
	r      *rand.Rand
	keys   []*keyState
	ops    []history.Op
	count  int
}

func (g *gen) between(lo, hi int64) int64 { return lo + g.r.Int64N(hi-lo+1) }

// schedule plans c's next op after think time (and maybe a pause).
func (g *gen) schedule(c *client, h *clientHeap, pause bool) {
	call := c.lastRet + g.between(0, 500*us)
	if pause {
		d := g.between(3*c.ttlMs*ms/2, 3*c.ttlMs*ms)
		if g.cfg.Faults {
			g.ops = append(g.ops, history.Op{Kind: history.Fault, Name: "pause-client " + c.name,
				Call: call, Return: call + d, Completed: true})
		}
		call += d
	}
	c.call = call
	c.next = call + g.between(50*us, 1*ms)
	heap.Push(h, c)
}

// Generate returns a correct history for cfg; Op.Line is set (1-based, in
// the returned order, which is the order the ops took effect in).
func Generate(cfg Config) []history.Op {
	cfg.defaults()
	g := &gen{cfg: cfg, r: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))}
	for k := 0; k < cfg.Keys; k++ {
		g.keys = append(g.keys, &keyState{name: fmt.Sprintf("k%d", k), holder: -1})
	}
	h := &clientHeap{}
	for i := 0; i < cfg.Clients; i++ {
		g.spawn(h, g.between(0, 2*ms))
	}
	for g.count < cfg.Ops && h.Len() > 0 {
		c := heap.Pop(h).(*client)
		g.act(c, h)
		if cfg.Faults && g.r.Float64() < 0.002 {
			start := c.call
			g.ops = append(g.ops, history.Op{Kind: history.Fault, Name: "latency", Call: start,
				Return: start + g.between(1*ms, 20*ms), Completed: true})
		}
	}
	for i := range g.ops {
		g.ops[i].Line = i + 1
	}
	return g.ops
}

// act performs c's next op at its point c.next.
func (g *gen) act(c *client, h *clientHeap) {
	p := c.next
	op := history.Op{Client: c.name, Call: c.call}
	if !c.holding {
		c.key = g.r.IntN(len(g.keys))
		c.ttlMs = []int64{20, 50, 100}[g.r.IntN(3)]
	}
	k := g.keys[c.key]
	op.Key = k.name
	l2 := g.between(50*us, 1*ms)
	ret := p + l2
	unknown := g.r.Float64() < g.cfg.Unknown
	applied := !unknown || g.r.IntN(2) == 0
	free := k.holder < 0 || p >= k.expiry
	owner := k.holder == c.id && k.token == c.token && p < k.expiry

	pause := false
	switch {
	case !c.holding:
		op.Kind, op.TTLMillis = history.Acquire, c.ttlMs
		if !free {
			op.Result = history.Fail
			break
		}
		if applied {
			k.counter++
			k.holder, k.token, k.expiry = c.id, k.counter, p+c.ttlMs*ms
		}
		if unknown {
			op.Result = history.Unknown
			break
		}
		op.Result = history.OK
		op.Token, op.HasToken = k.token, true
		c.holding, c.token, c.opsLeft, c.hasRead = true, k.token, 1+g.r.IntN(6), false
	case c.opsLeft == 0:
		op.Kind, op.Token, op.HasToken = history.Release, c.token, true
		c.holding = false
		if !owner {
			op.Result = history.Fail
			break
		}
		if applied {
			k.holder = -1
		}
		op.Result = history.OK
		if unknown {
			op.Result = history.Unknown
		}
	case g.r.IntN(5) == 0:
		op.Kind, op.TTLMillis, op.Token, op.HasToken = history.Renew, c.ttlMs, c.token, true
		if !owner {
			op.Result = history.Fail
			c.opsLeft = 0
			break
		}
		if applied {
			k.expiry = p + c.ttlMs*ms
		}
		op.Result = history.OK
		if unknown {
			op.Result = history.Unknown
		}
	default:
		if g.cfg.Unfenced && !(k.holder == c.id && k.token == c.token && ret < k.expiry) {
			// An unfenced client may act only inside its true lease: release instead.
			op.Kind, op.Token, op.HasToken = history.Release, c.token, true
			c.holding = false
			op.Result = history.Fail
			if owner {
				k.holder = -1
				op.Result = history.OK
			}
			break
		}
		c.opsLeft--
		write := c.hasRead && g.r.IntN(2) == 0
		// The fenced resource refuses a write or a read with a token below
		// the largest it has seen. An accepted read raises the largest token
		// seen: without that, a stale holder's write could land between a
		// new holder's read and write and lose an update (fencing writes
		// alone does not protect read-modify-write).
		accept := g.cfg.Unfenced || !k.hasMax || c.token >= k.maxTok
		op.HasValue = true
		if !g.cfg.Unfenced {
			op.Token, op.HasToken = c.token, true
		}
		if write {
			op.Kind = history.Write
			k.writes++
			op.Value = fmt.Sprintf("%s-%d", c.name, k.writes)
			op.Prev, op.HasPrev = c.lastRead, true
		} else {
			op.Kind = history.Read
		}
		switch {
		case !accept:
			op.Result = history.Rejected
			c.opsLeft, c.hasRead = 0, false // it lost the lock: release next
		case unknown:
			op.Result = history.Unknown
			c.hasRead = false
			if applied {
				g.applyResource(k, c, op)
			}
		default:
			if !write {
				op.Value = k.value
				c.lastRead, c.hasRead = k.value, true
			} else {
				c.lastRead = op.Value
			}
			g.applyResource(k, c, op)
			op.Result = history.OK
		}
		if !write && op.Result != history.OK {
			op.HasValue = false // a read that did not complete observed nothing
		}
		pause = c.opsLeft > 0 && g.r.Float64() < g.cfg.Pause
	}
	if unknown && op.Result == history.Unknown && g.r.Float64() < g.cfg.NoReturn {
		g.record(op) // never returned: the client is gone
		c.stopped = true
		g.spawn(h, ret+g.between(0, 10*ms))
		return
	}
	op.Return, op.Completed = ret, true
	g.record(op)
	c.lastRet = ret
	if op.Kind == history.Acquire && op.Result == history.OK && g.r.Float64() < g.cfg.Crash {
		c.stopped = true
		g.spawn(h, ret+g.between(0, 10*ms))
		return
	}
	if op.Kind == history.Acquire && op.Result != history.OK {
		c.lastRet += g.between(1*ms, 5*ms) // back off
	}
	g.schedule(c, h, pause)
}

// spawn starts a new client (a stopped client is replaced by a new one, so
// that the number of live clients stays cfg.Clients).
func (g *gen) spawn(h *clientHeap, at int64) {
	c := &client{id: g.nextID, name: fmt.Sprintf("c%d", g.nextID), lastRet: at}
	g.nextID++
	g.schedule(c, h, false)
}

func (g *gen) applyResource(k *keyState, c *client, op history.Op) {
	if op.Kind == history.Write {
		k.value = op.Value
	}
	if op.HasToken && (!k.hasMax || op.Token > k.maxTok) {
		k.hasMax, k.maxTok = true, op.Token
	}
}

func (g *gen) record(op history.Op) {
	g.ops = append(g.ops, op)
	g.count++
}
