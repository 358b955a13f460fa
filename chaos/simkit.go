package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/chaos/workload"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/internal/simnet"
)

// The simulation's kit: what a fault's simulated strike (Fault.Simulate)
// gets, and the helpers the fault files share for it. Package sim runs
// them in virtual time on in-process Redis (internal/simnet/nodes): the same
// fault, declared once in its file beside its real-time strike, so that
// its window in the history carries the same kind and the lock's
// predictions and excuses are the matrix's.

// SimNet is what a simulated strike does to the simulated network and its
// in-process Redis nodes (internal/simnet/nodes's Net implements it): declared
// here, with simnet's plain types, so that package chaos, which a user's
// module imports to run locks in real time, does not pull the
// simulation's in-process Redis.
type SimNet interface {
	// SetRates sets the network's message faults; Counts says what it
	// did so far; LateSettled is closed once no late request is in
	// transit.
	SetRates(r simnet.Rates) error
	Counts() simnet.Counts
	LateSettled() <-chan struct{}
	// Cut drops the clients' messages (a blackhole) until Heal.
	Cut(clients ...string)
	Heal()
	// Pause holds the requests to the node at addr until Resume.
	Pause(addr string)
	Resume()
	// RefuseSubscribe makes the node refuse SUBSCRIBE, or not;
	// DropSubscribed closes its pub/sub connections; StallDials holds back
	// the connections dialed within the next within, by d.
	RefuseSubscribe(addr string, on bool)
	DropSubscribed(addr string) int
	StallDials(within, d time.Duration)
	// RefuseWrites makes the node refuse that share of the requests that
	// hold a write, drawn per request, with -OOM (0: none).
	RefuseWrites(addr string, share float64)
	// PauseReplicas stops the node's replicas (on) or resumes them: WAIT
	// then counts no acknowledgement.
	PauseReplicas(addr string, on bool)
	// Keys are the node's keys; DelKeys deletes those containing part
	// and returns them (each advances the node's clock first).
	Keys(addr string) []string
	DelKeys(addr, part string) []string
	// ClockRate is the node's clock-rate setter (fast by a fraction).
	ClockRate(addr string) func(fast float64)
	// SyncReplica makes a replica of the node in sync now, its clock
	// behind by behind, and says its id and how many keys it holds;
	// PromoteReplica puts it in the node's place and says how many of
	// the old node's entries it lacks; DropReplica discards it.
	SyncReplica(addr string, behind time.Duration) (id, keys int, err error)
	PromoteReplica(id int) (lost int, err error)
	DropReplica(id int)
}

// SimStrike is what a fault's simulated strike gets: the simulated run
// and the fault's own draws. Package sim makes one per fault of a run.
type SimStrike struct {
	// Ctx ends at the run's end: the strike waits for its moment within it.
	Ctx context.Context
	// Rng is the fault's own stream: other draws stay as they were.
	Rng *rand.Rand
	// Net is the simulated network and its nodes (internal/simnet/nodes's).
	Net SimNet
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
func (s *SimStrike) onNet(name string, start, stop func(), say func(before, after simnet.Counts) string) error {
	var before simnet.Counts
	return s.window(&simWindow{name: name,
		start:    func() { before = s.Net.Counts(); start() },
		stop:     stop,
		evidence: func() string { return say(before, s.Net.Counts()) },
	}, 3*s.TTL)
}

// rates changes the network's rates for a window and puts them back.
func (s *SimStrike) rates(name string, r simnet.Rates, say func(before, after simnet.Counts) string) error {
	return s.onNet(name, func() { _ = s.Net.SetRates(r) }, func() { _ = s.Net.SetRates(simnet.Rates{}) }, say)
}

// keysOn reports whether a lock node holds a key of lock key k.
func (s *SimStrike) keysOn(k string) bool {
	for _, a := range s.LockNodes {
		for _, key := range s.Net.Keys(a) {
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
// split brain: a replica in sync at the window's start (SyncReplica) is
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
		var id, synced, lost int
		var err error
		werr := s.window(&simWindow{name: name,
			start: func() { id, synced, err = s.Net.SyncReplica(s.Master, behind) },
			stop: func() {
				if err != nil {
					s.Net.DropReplica(id)
					return
				}
				lost, err = s.Net.PromoteReplica(id)
			},
			evidence: func() string {
				return fmt.Sprintf("%s: a replica in sync at the window's start (%d keys) promoted at its end; %d entries of the old master's data lost", name, synced, lost)
			},
		}, s.TTL)
		return errors.Join(werr, err)
	}
}
