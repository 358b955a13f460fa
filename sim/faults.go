package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/lockproof/lockproof/chaos"
	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/chaos/workload"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/internal/vnode"

	"github.com/alicebob/miniredis/v2"
)

// Fault is one fault of the simulation: what it does to the simulated
// network, nodes or clients, at a moment and for a window drawn from the
// seed. Its Name is the kind of the real-time fault it models (a
// contract.Fault* constant): its window in the history carries that kind,
// so the checker's excuses and the lock's predictions are the matrix's.
type Fault struct {
	Name string
	// Doc says what it does, in one line.
	Doc string
	// strike waits for the fault's moment and applies it, recording its
	// window; it returns when the window has closed or the run ended.
	strike func(s *striking) error
}

// striking is what a strike gets: the run and the fault's own draws.
type striking struct {
	ctx      context.Context
	rng      *rand.Rand // the fault's own stream: other draws stay as they were
	net      *vnode.Net
	wl       *workload.Workload
	rec      nemesis.Recorder
	ttl, run time.Duration
	// opTimeout is the workload's op timeout: how long a client waits
	// for a reply before it gives up (late-delivery holds past it).
	opTimeout time.Duration
	// point is where a client fault strikes the run's lock
	// (judge.PointOf): right after, or before, a named command; zero:
	// while the victim holds its lock, its write ahead.
	point contract.Point
	// lockNodes are the addresses of the lock's nodes: the master, or a
	// Redlock's independent masters.
	lockNodes []string
}

// lockNode draws one of the lock's nodes (no draw when there is one, so
// that a single-master run's draws stay as they were).
func (s *striking) lockNode() string {
	if len(s.lockNodes) == 1 {
		return s.lockNodes[0]
	}
	return s.lockNodes[s.rng.IntN(len(s.lockNodes))]
}

// Catalogue is every fault of the simulation, in order.
func Catalogue() []Fault {
	return []Fault{
		{Name: contract.FaultLatency, Doc: "every message delayed 1–5ms plus up to 5–30ms at random for 3 TTLs (messages of different connections race)", strike: strikeLatency},
		{Name: contract.FaultReset, Doc: "for 3 TTLs, 2–10% of requests lost before they run and of replies lost after (the connection reset: an unknown outcome)", strike: strikeLoss},
		{Name: contract.FaultPartition, Doc: "half the clients cut off (their messages dropped, a blackhole; connections stay open) for 3 TTLs", strike: strikePartition},
		{Name: contract.FaultPauseClient, Doc: "a holder frozen between its lease check and its write for 3 TTLs (its gate holds every command, its watchdog's too)", strike: atPoint(strikePauseClient)},
		{Name: contract.FaultPauseServer, Doc: "the lock's node stops serving for 3 TTLs (requests held), then serves again", strike: strikePauseServer},
		{Name: contract.FaultCrashClient, Doc: "a holder crashes for good while it holds", strike: atPoint(strikeCrashClient)},
		{Name: contract.FaultKeyLoss, Doc: "an operator deletes the lock keys of a holder found working under its lock (before its lease check), as the real-time key-loss does", strike: onWorker(strikeKeyLoss)},
		{Name: contract.FaultClockSkew, Doc: "one client's clock set 4 TTLs ahead for half the run (for locks that read client clocks)", strike: strikeClockSkew},
		{Name: contract.FaultFailover, Doc: "the lock's node fails over to a replica that was in sync one TTL before: the writes of that gap are lost, and every connection to the node is reset", strike: strikeFailover(0)},
		{Name: contract.FaultFailoverSkew, Doc: fmt.Sprintf("a failover (as failover) to a replica whose clock runs %v behind the old master's", chaos.SkewBehind), strike: strikeFailover(chaos.SkewBehind)},
		// Last: Swarm draws each fault in this order, and the mixes of
		// the seeds saved before it came stay as they were.
		{Name: contract.FaultLateDelivery, Doc: "for 3 TTLs, 5–20% of requests held in transit for the op timeout and a fifth to a half TTL more: they land after their sender gave up, while its cleanup or retry runs", strike: strikeLate},
		{Name: contract.FaultClockRate, Doc: "the lock's node's clock runs 0.7–1% fast (within the contract's 1% drift bound) for half the run: its TTLs count down that much faster than the clients' clocks", strike: strikeClockRate},
		{Name: contract.FaultPubSubReset, Doc: "the lock's node drops its pub/sub connections while it refuses SUBSCRIBE, every TTL/2 for 3 TTLs, and the clients' connections dialed in the first TTL/10 after each drop open TTL/2 late (subscriptions die, commands pass)", strike: strikePubSubReset},
	}
}

// Unsimulated are the faults of the real-time catalogue (chaos.Faults)
// the simulation has no counterpart of, each with why: `lockproof sim`
// says so, and a test holds the two catalogues to it (each fault of one
// is in the other, or says why not: chaos.NotSimulatedInRealTime for the
// other way).
func Unsimulated() map[string]string {
	return map[string]string{
		contract.FaultNone:              "the baseline: a run without faults is --faults none",
		contract.FaultCrowd:             "contention, not a fault: 32 clients on one key in brief sections; the simulation takes --clients (up to 64) and --mix, not the crowd's brief sections yet",
		contract.FaultBandwidth:         "a throttled link: the simulated network delays messages (latency, late-delivery) but has no byte rate",
		contract.FaultIsolate:           "one holder cut off from every Redis while its go-redis ignores contexts: the simulated clients always honour theirs",
		contract.FaultForceUnlock:       "an operator's force unlock through the lock's API: not simulated yet (key-loss deletes the keys the same way for a lock without one)",
		contract.FaultKillProcess:       "a client run as a child process: the simulation runs every client in one process, in virtual time",
		contract.FaultPauseProcess:      "a client run as a child process: the simulation runs every client in one process, in virtual time",
		contract.FaultRestart:           "a master that restarts empty: not simulated yet (key-loss and failover cover its losses separately)",
		contract.FaultTakeover:          "a Redis Cluster's fault: the simulation runs the Sentinel topology only",
		contract.FaultMinorityPartition: "a Redis Cluster's fault: the simulation runs the Sentinel topology only",
		contract.FaultMigrate:           "a Redis Cluster's fault: the simulation runs the Sentinel topology only",
		contract.FaultShardOutage:       "a Redis Cluster's fault: the simulation runs the Sentinel topology only",
	}
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
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.Name
	}
	return strings.Join(names, "+")
}

// window is a nemesis.Fault of the simulation: start and stop act (stop
// may be nil), the evidence says what they did.
type window struct {
	name        string
	start, stop func()
	evidence    func() string
}

func (w *window) Name() string { return w.name }

func (w *window) Start(context.Context) error {
	w.start()
	return nil
}

func (w *window) Stop(context.Context) error {
	if w.stop != nil {
		w.stop()
	}
	return nil
}

// Evidence implements nemesis.Witness.
func (w *window) Evidence() nemesis.Evidence { return nemesis.Evidence{Text: w.evidence(), Bit: true} }

// wait waits for the fault's moment, drawn in the first half of the run
// after its first tenth; false when the run ended first.
func (s *striking) wait() bool {
	d := s.run/10 + time.Duration(s.rng.Int64N(int64(s.run*4/10)+1))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.ctx.Done():
		return false
	}
}

// victim draws a client that holds with its write ahead, waiting for it;
// nil when none did before the run ended.
func (s *striking) victim() *workload.Client {
	v := s.wl.Clients[s.rng.IntN(len(s.wl.Clients))]
	if err := v.WaitHolding(s.ctx); err != nil {
		return nil
	}
	return v
}

// window records f's window around its start and stop, d long and a
// drawn fraction of a millisecond (jitter): the whole window, even past the
// run's moments (the workload waits for it).
func (s *striking) window(f nemesis.Fault, d time.Duration) error {
	return nemesis.Apply(context.WithoutCancel(s.ctx), s.rec, f, d+s.jitter())
}

// jitter is a drawn fraction of a millisecond, added to a fault's window
// so that it ends at an instant of its own: events at one virtual instant
// (a window's end and a call's deadline, say) meet in a select that Go
// resolves at random, and a seed would not replay.
func (s *striking) jitter() time.Duration {
	return time.Duration(s.rng.Int64N(int64(time.Millisecond)))
}

// onNet applies a window of the network, 3 TTLs long, whose evidence
// says (say) what the network did in it: the counts from its start to
// its end. nemesis.Apply starts the window and reads its evidence in one
// goroutine.
func (s *striking) onNet(name string, start, stop func(), say func(before, after vnode.Counts) string) error {
	var before vnode.Counts
	return s.window(&window{name: name,
		start:    func() { before = s.net.Counts(); start() },
		stop:     stop,
		evidence: func() string { return say(before, s.net.Counts()) },
	}, 3*s.ttl)
}

// rates changes the network's rates for a window and puts them back.
func (s *striking) rates(name string, r vnode.Rates, say func(before, after vnode.Counts) string) error {
	return s.onNet(name, func() { _ = s.net.SetRates(r) }, func() { _ = s.net.SetRates(vnode.Rates{}) }, say)
}

func strikeLatency(s *striking) error {
	if !s.wait() {
		return nil
	}
	r := vnode.Rates{Delay: time.Millisecond + time.Duration(s.rng.Int64N(int64(4*time.Millisecond))),
		Jitter: 5*time.Millisecond + time.Duration(s.rng.Int64N(int64(25*time.Millisecond)))}
	name := fmt.Sprintf("%s %v+%v", contract.FaultLatency, r.Delay.Round(time.Microsecond), r.Jitter.Round(time.Microsecond))
	return s.rates(name, r, func(b, a vnode.Counts) string {
		return fmt.Sprintf("%s: %d messages delayed", name, a.Messages-b.Messages)
	})
}

func strikeLoss(s *striking) error {
	if !s.wait() {
		return nil
	}
	p := 0.02 + 0.08*s.rng.Float64()
	r := vnode.Rates{Drop: p, LoseReply: p}
	name := fmt.Sprintf("%s lost messages %.1f%%", contract.FaultReset, 100*p)
	return s.rates(name, r, func(b, a vnode.Counts) string {
		return fmt.Sprintf("%s: %d requests and %d replies lost, %d connections reset", name,
			a.Dropped-b.Dropped, a.LostReplies-b.LostReplies, a.Resets-b.Resets)
	})
}

// strikeLate holds some requests in transit past their sender's
// deadline (vnode.Rates.Late): a request that lands after its sender
// gave up races the lock's cleanup of that unknown outcome, or its
// retry. It bites when some request landed after its connection closed.
// Its window closes when the last held request has landed: a lock must
// keep every promise once it has (a late request of a call that gave up
// takes nothing), and a waiter's hand-off held up by a late pickup is
// excused only within it.
func strikeLate(s *striking) error {
	if !s.wait() {
		return nil
	}
	p := 0.05 + 0.15*s.rng.Float64()
	by := s.opTimeout + s.ttl/5 + time.Duration(s.rng.Int64N(int64(s.ttl*3/10)+1))
	name := fmt.Sprintf("%s %.1f%% by %v", contract.FaultLateDelivery, 100*p, by.Round(time.Millisecond))
	// The window lasts until the last request it held has landed (or
	// was dropped): what it does goes on after the rates are put back.
	return s.onNet(name, func() { _ = s.net.SetRates(vnode.Rates{Late: p, LateBy: by}) },
		func() { _ = s.net.SetRates(vnode.Rates{}); <-s.net.LateSettled() },
		func(b, a vnode.Counts) string {
			return fmt.Sprintf("%s: %d requests held in transit, %d of them landed after their sender gave up", name,
				a.Late-b.Late, a.Orphaned-b.Orphaned)
		})
}

func strikePartition(s *striking) error {
	if !s.wait() {
		return nil
	}
	var names []string
	for _, i := range s.rng.Perm(len(s.wl.Clients))[:max(1, len(s.wl.Clients)/2)] {
		names = append(names, s.wl.Clients[i].Name)
	}
	slices.Sort(names)
	name := fmt.Sprintf("%s %v", contract.FaultPartition, names)
	return s.onNet(name, func() { s.net.Cut(names...) }, s.net.Heal, func(b, a vnode.Counts) string {
		return fmt.Sprintf("%s: %d messages dropped", name, a.Blackholed-b.Blackholed)
	})
}

// onHolder waits for the fault's moment and a holder drawn from the
// seed, then strikes it; nothing when the run ends first.
func onHolder(strike func(s *striking, v *workload.Client) error) func(*striking) error {
	return func(s *striking) error {
		if !s.wait() {
			return nil
		}
		v := s.victim()
		if v == nil {
			return nil
		}
		return strike(s, v)
	}
}

// onWorker strikes at the first client found working under its lock
// (between its read and its lease check: workload.Client.Working) with
// its lock's keys on a lock node, looking every millisecond of virtual
// time from the fault's moment, as the real-time key-loss finds its
// victim (chaos's holderKeys): the loss strikes mid-work, so the
// holder's own check before its write must see it (its loss notice).
func onWorker(strike func(s *striking, v *workload.Client) error) func(*striking) error {
	return func(s *striking) error {
		if !s.wait() {
			return nil
		}
		for {
			for _, c := range s.wl.Clients {
				if c.Working() && s.keysOn(c.Key) {
					return strike(s, c)
				}
			}
			t := time.NewTimer(time.Millisecond)
			select {
			case <-t.C:
			case <-s.ctx.Done():
				t.Stop()
				return nil
			}
		}
	}
}

// keysOn reports whether a lock node holds a key of lock key k.
func (s *striking) keysOn(k string) bool {
	for _, a := range s.lockNodes {
		node := s.net.Node(a)
		node.Advance()
		for _, key := range node.M.Keys() {
			if strings.Contains(key, k) {
				return true
			}
		}
	}
	return false
}

// atPoint strikes as onHolder does, or, when the lock names a fault
// point (striking.point), arms the fault at a victim drawn from the seed
// at the fault's moment, to strike when it gets there.
func atPoint(strike func(s *striking, v *workload.Client) error) func(*striking) error {
	return func(s *striking) error {
		if s.point.IsZero() {
			return onHolder(strike)(s)
		}
		if !s.wait() {
			return nil
		}
		return strike(s, s.wl.Clients[s.rng.IntN(len(s.wl.Clients))])
	}
}

func strikePauseClient(s *striking, v *workload.Client) error {
	if s.point.After == "" {
		return s.window(&nemesis.PauseClient{Client: v.Name, Gate: v.Gate}, 3*s.ttl)
	}
	// Armed now, its window counted from the strike, as the real-time
	// fault does: the victim may get to its point long after.
	pf := &nemesis.PauseClient{Client: v.Name, Gate: v.Gate, Point: s.point}
	pf.Arm()
	select {
	case <-v.Gate.Struck():
	case <-s.ctx.Done():
		v.Gate.PauseAfter("")
		v.Gate.Resume() // in case it struck as the run ended
		return nil
	}
	return s.window(pf, 3*s.ttl)
}

func strikePauseServer(s *striking) error {
	if !s.wait() {
		return nil
	}
	addr := s.lockNode()
	name := contract.FaultPauseServer + " " + addr
	return s.onNet(name, func() { s.net.Pause(addr) }, s.net.Resume, func(b, a vnode.Counts) string {
		return fmt.Sprintf("%s: %d messages held", name, a.Held-b.Held)
	})
}

// strikePubSubReset is the real-time pubsub-reset (nemesis.PubSubReset,
// with the matrix's bounds) on the simulated network: every TTL/2 for 3
// TTLs the lock's node refuses SUBSCRIBE for TTL/5 and drops its pub/sub
// connections, and the connections dialed in the first TTL/10 after each
// drop (the clients' reconnections) have their requests held back TTL/2.
// Commands on open connections pass all along. It bites when it dropped
// a subscription.
func strikePubSubReset(s *striking) error {
	if !s.wait() {
		return nil
	}
	addr := s.lockNode()
	name := contract.FaultPubSubReset + " " + addr
	every, refuse := s.ttl/2, s.ttl/5
	stop, done := make(chan struct{}), make(chan struct{})
	// sleep waits d, false when the window closes first.
	sleep := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-stop:
			return false
		}
	}
	rounds := func() {
		defer close(done)
		for {
			s.net.RefuseSubscribe(addr, true)
			s.net.StallDials(s.ttl/10, s.ttl/2)
			s.net.DropSubscribed(addr)
			ok := sleep(refuse)
			s.net.RefuseSubscribe(addr, false)
			if !ok || !sleep(every-refuse) {
				return
			}
		}
	}
	return s.onNet(name, func() { go rounds() },
		func() { close(stop); <-done; s.net.RefuseSubscribe(addr, false) },
		func(b, a vnode.Counts) string {
			return fmt.Sprintf("%s: %d pub/sub connections dropped, %d SUBSCRIBE refused, %d new connections held back %v", name,
				a.PubSubDropped-b.PubSubDropped, a.Refused-b.Refused, a.Stalled-b.Stalled, s.ttl/2)
		})
}

func strikeCrashClient(s *striking, v *workload.Client) error {
	return s.window(&nemesis.CrashClient{Client: v.Name, Gate: v.Gate, Point: s.point}, 3*s.ttl)
}

func strikeKeyLoss(s *striking, v *workload.Client) error {
	var deleted []string
	name := contract.FaultKeyLoss + " " + v.Name
	return s.window(&window{name: name,
		start: func() {
			// The victim's keys on the first of the lock's nodes that has
			// any (for Redlock, one of its masters found holding the lock,
			// as the real-time key-loss strikes).
			for _, a := range s.lockNodes {
				node := s.net.Node(a)
				node.Advance()
				for _, k := range node.M.Keys() {
					if strings.Contains(k, v.Key) && node.M.Del(k) {
						deleted = append(deleted, k)
					}
				}
				if len(deleted) > 0 {
					return
				}
			}
		},
		evidence: func() string { return fmt.Sprintf("%s: deleted %d keys %v", name, len(deleted), deleted) },
	}, s.ttl)
}

// strikeClockSkew sets a client's clock 4 TTLs ahead for half the run, as
// the real-time clock-skew does: only locks that read their client's
// clock (locker.Deps.Clock) notice.
func strikeClockSkew(s *striking) error {
	if !s.wait() {
		return nil
	}
	v := s.wl.Clients[s.rng.IntN(len(s.wl.Clients))]
	return s.window(&nemesis.ClockSkew{Client: v.Name, Clock: v.Clock, Offset: 4 * s.ttl}, s.run/2)
}

// strikeClockRate makes the lock's node's clock run fast, within the
// contract's drift bound, for half the run: a lease's key expires up to
// 1% of its TTL early by the clients' clocks, which a validity claim
// must allow for (package lock's Options.Drift). Its evidence is how far
// the node's clock ran ahead.
func strikeClockRate(s *striking) error {
	if !s.wait() {
		return nil
	}
	addr := s.lockNode()
	fast := 0.007 + 0.003*s.rng.Float64()
	name := fmt.Sprintf("%s %s %.2f%% fast", contract.FaultClockRate, addr, 100*fast)
	node := s.net.Node(addr)
	var from time.Time
	return s.window(&window{name: name,
		start: func() { from = time.Now(); node.SetRate(fast) },
		stop:  func() { node.SetRate(0) },
		evidence: func() string {
			return fmt.Sprintf("%s: the node's clock ran %v ahead in %v", name,
				time.Duration(float64(time.Since(from))*fast).Round(time.Microsecond), time.Since(from).Round(time.Millisecond))
		},
	}, s.run/2)
}

// strikeFailover is a failover of the lock's node, as Sentinel's after a
// split brain: a replica in sync at the window's start (vnode.Copy) is
// promoted at its end, one TTL later (as the real-time failover's window,
// its replication lag a TTL): what the old master took in the gap is
// lost, every connection to it is reset, and clients reconnect to the
// promoted node, whose clock runs behind by behind (failover-skew).
func strikeFailover(behind time.Duration) func(*striking) error {
	return func(s *striking) error {
		if !s.wait() {
			return nil
		}
		name := contract.FaultFailover + " " + masterAddr
		if behind > 0 {
			name = fmt.Sprintf("%s %s, the replica's clock %v behind", contract.FaultFailoverSkew, masterAddr, behind)
		}
		replica := miniredis.NewMiniRedis()
		var synced, lost int
		var synced0 time.Time
		var err error
		werr := s.window(&window{name: name,
			start: func() {
				node := s.net.Node(masterAddr)
				node.Advance()
				err = vnode.Copy(replica, node.M, behind)
				synced, synced0 = len(replica.Keys()), time.Now()
			},
			stop: func() {
				if err != nil {
					replica.Close()
					return
				}
				// The replica's keys expired on its clock meanwhile.
				replica.FastForward(time.Since(synced0))
				node := s.net.Node(masterAddr)
				node.Advance()
				lost = gap(node.M, replica)
				err = s.net.Promote(masterAddr, replica, behind)
			},
			evidence: func() string {
				return fmt.Sprintf("%s: a replica in sync at the window's start (%d keys) promoted at its end; %d entries of the old master's data lost", name, synced, lost)
			},
		}, s.ttl)
		return errors.Join(werr, err)
	}
}

// gap counts the entries (keys with their values, as Dump renders them)
// of the old master that the promoted replica does not have.
func gap(old, replica *miniredis.Miniredis) int {
	have := map[string]bool{}
	for _, l := range strings.Split(replica.Dump(), "\n") {
		have[l] = true
	}
	n := 0
	for _, l := range strings.Split(old.Dump(), "\n") {
		if l != "" && !have[l] {
			n++
		}
	}
	return n
}
