package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/chaos/workload"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/internal/vnode"
)

// The simulation's kit: what a fault's simulated strike (Fault.Simulate)
// gets, and the helpers the fault files share for it. Package sim runs
// them in virtual time on in-process Redis (internal/vnode): the same
// fault, declared once in its file beside its real-time strike, so that
// its window in the history carries the same kind and the lock's
// predictions and excuses are the matrix's.

// SimStrike is what a fault's simulated strike gets: the simulated run
// and the fault's own draws. Package sim makes one per fault of a run.
type SimStrike struct {
	// Ctx ends at the run's end: the strike waits for its moment within it.
	Ctx context.Context
	// Rng is the fault's own stream: other draws stay as they were.
	Rng *rand.Rand
	// Net is the simulated network and its nodes.
	Net *vnode.Net
	// Workload is the run's workload (its clients, their gates and clocks).
	Workload *workload.Workload
	// Rec records the fault's window.
	Rec nemesis.Recorder
	// TTL is the lease TTL; Run the run's duration.
	TTL, Run time.Duration
	// OpTimeout is the workload's op timeout: how long a client waits
	// for a reply before it gives up (late-delivery holds past it).
	OpTimeout time.Duration
	// Point is where a client fault strikes the run's lock
	// (judge.PointOf): right after, or before, a named command; zero:
	// while the victim holds its lock, its write ahead.
	Point contract.Point
	// Master is the address of the lock's master (failover's node);
	// LockNodes the addresses of the lock's nodes: the master, or a
	// Redlock's independent masters.
	Master    string
	LockNodes []string
}

// lockNode draws one of the lock's nodes (no draw when there is one, so
// that a single-master run's draws stay as they were).
func (s *SimStrike) lockNode() string {
	if len(s.LockNodes) == 1 {
		return s.LockNodes[0]
	}
	return s.LockNodes[s.Rng.IntN(len(s.LockNodes))]
}

// simWindow is a nemesis.Fault of the simulation: start and stop act (stop
// may be nil), the evidence says what they did.
type simWindow struct {
	name        string
	start, stop func()
	evidence    func() string
}

func (w *simWindow) Name() string { return w.name }

func (w *simWindow) Start(context.Context) error {
	w.start()
	return nil
}

func (w *simWindow) Stop(context.Context) error {
	if w.stop != nil {
		w.stop()
	}
	return nil
}

// Evidence implements nemesis.Witness.
func (w *simWindow) Evidence() nemesis.Evidence {
	return nemesis.Evidence{Text: w.evidence(), Bit: true}
}

// wait waits for the fault's moment, drawn in the first half of the run
// after its first tenth; false when the run ended first.
func (s *SimStrike) wait() bool {
	d := s.Run/10 + time.Duration(s.Rng.Int64N(int64(s.Run*4/10)+1))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.Ctx.Done():
		return false
	}
}

// victim draws a client that holds with its write ahead, waiting for it;
// nil when none did before the run ended.
func (s *SimStrike) victim() *workload.Client {
	v := s.Workload.Clients[s.Rng.IntN(len(s.Workload.Clients))]
	if err := v.WaitHolding(s.Ctx); err != nil {
		return nil
	}
	return v
}

// window records f's window around its start and stop, d long and a
// drawn fraction of a millisecond (jitter): the whole window, even past the
// run's moments (the workload waits for it).
func (s *SimStrike) window(f nemesis.Fault, d time.Duration) error {
	return nemesis.Apply(context.WithoutCancel(s.Ctx), s.Rec, f, d+s.jitter())
}

// jitter is a drawn fraction of a millisecond, added to a fault's window
// so that it ends at an instant of its own: events at one virtual instant
// (a window's end and a call's deadline, say) meet in a select that Go
// resolves at random, and a seed would not replay.
func (s *SimStrike) jitter() time.Duration {
	return time.Duration(s.Rng.Int64N(int64(time.Millisecond)))
}

// onNet applies a window of the network, 3 TTLs long, whose evidence
// says (say) what the network did in it: the counts from its start to
// its end. nemesis.Apply starts the window and reads its evidence in one
// goroutine.
func (s *SimStrike) onNet(name string, start, stop func(), say func(before, after vnode.Counts) string) error {
	var before vnode.Counts
	return s.window(&simWindow{name: name,
		start:    func() { before = s.Net.Counts(); start() },
		stop:     stop,
		evidence: func() string { return say(before, s.Net.Counts()) },
	}, 3*s.TTL)
}

// rates changes the network's rates for a window and puts them back.
func (s *SimStrike) rates(name string, r vnode.Rates, say func(before, after vnode.Counts) string) error {
	return s.onNet(name, func() { _ = s.Net.SetRates(r) }, func() { _ = s.Net.SetRates(vnode.Rates{}) }, say)
}

// keysOn reports whether a lock node holds a key of lock key k.
func (s *SimStrike) keysOn(k string) bool {
	for _, a := range s.LockNodes {
		node := s.Net.Node(a)
		node.Advance()
		for _, key := range node.M.Keys() {
			if strings.Contains(key, k) {
				return true
			}
		}
	}
	return false
}

// simOnHolder waits for the fault's moment and a holder drawn from the
// seed, then strikes it; nothing when the run ends first.
func simOnHolder(strike func(s *SimStrike, v *workload.Client) error) func(*SimStrike) error {
	return func(s *SimStrike) error {
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

// simOnWorker strikes at the first client found working under its lock
// (between its read and its lease check: workload.Client.Working) with
// its lock's keys on a lock node, looking every millisecond of virtual
// time from the fault's moment, as the real-time key-loss finds its
// victim (chaos's holderKeys): the loss strikes mid-work, so the
// holder's own check before its write must see it (its loss notice).
func simOnWorker(strike func(s *SimStrike, v *workload.Client) error) func(*SimStrike) error {
	return func(s *SimStrike) error {
		if !s.wait() {
			return nil
		}
		for {
			for _, c := range s.Workload.Clients {
				if c.Working() && s.keysOn(c.Key) {
					return strike(s, c)
				}
			}
			t := time.NewTimer(time.Millisecond)
			select {
			case <-t.C:
			case <-s.Ctx.Done():
				t.Stop()
				return nil
			}
		}
	}
}

// simAtPoint strikes as simOnHolder does, or, when the lock names a fault
// point (striking.point), arms the fault at a victim drawn from the seed
// at the fault's moment, to strike when it gets there.
func simAtPoint(strike func(s *SimStrike, v *workload.Client) error) func(*SimStrike) error {
	return func(s *SimStrike) error {
		if s.Point.IsZero() {
			return simOnHolder(strike)(s)
		}
		if !s.wait() {
			return nil
		}
		return strike(s, s.Workload.Clients[s.Rng.IntN(len(s.Workload.Clients))])
	}
}

// simFailover is a failover of the lock's node, as Sentinel's after a
// split brain: a replica in sync at the window's start (vnode.Copy) is
// promoted at its end, one TTL later (as the real-time failover's window,
// its replication lag a TTL): what the old master took in the gap is
// lost, every connection to it is reset, and clients reconnect to the
// promoted node, whose clock runs behind by behind (failover-skew).
func simFailover(behind time.Duration) func(*SimStrike) error {
	return func(s *SimStrike) error {
		if !s.wait() {
			return nil
		}
		name := contract.FaultFailover + " " + s.Master
		if behind > 0 {
			name = fmt.Sprintf("%s %s, the replica's clock %v behind", contract.FaultFailoverSkew, s.Master, behind)
		}
		replica := miniredis.NewMiniRedis()
		var synced, lost int
		var synced0 time.Time
		var err error
		werr := s.window(&simWindow{name: name,
			start: func() {
				node := s.Net.Node(s.Master)
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
				node := s.Net.Node(s.Master)
				node.Advance()
				lost = simGap(node.M, replica)
				err = s.Net.Promote(s.Master, replica, behind)
			},
			evidence: func() string {
				return fmt.Sprintf("%s: a replica in sync at the window's start (%d keys) promoted at its end; %d entries of the old master's data lost", name, synced, lost)
			},
		}, s.TTL)
		return errors.Join(werr, err)
	}
}

// simGap counts the entries (keys with their values, as Dump renders them)
// of the old master that the promoted replica does not have.
func simGap(old, replica *miniredis.Miniredis) int {
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
