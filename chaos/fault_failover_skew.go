package chaos

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/internal/redisproc"
	"github.com/lockproof/lockproof/locker"
)

func failoverSkewFault() Fault {
	return Fault{Name: contract.FaultFailoverSkew, Simulate: simFailover(SkewBehind), SimDoc: fmt.Sprintf("a failover (as failover) to a replica whose clock runs %v behind the old master's", SkewBehind), Topologies: both, Matrix: true,
		Doc:   fmt.Sprintf("a failover (as failover) to a replica whose clock runs %v behind the old master's", SkewBehind),
		Scope: ScopeFresh, Duration: 6*time.Second + SkewBehind,
		Env: func(needs locker.Needs) env.Spec {
			s := FreshSpec(needs)
			s.ReplicaClockBehind = SkewBehind
			return s
		},
		Needs: func(k env.Kind) error {
			if k != env.Process {
				return ErrNeedsProcesses
			}
			_, err := redisproc.ClockBehind(SkewBehind)
			return err
		},
		strike: func(s *striking) (armed, error) {
			f, err := failover(s)
			if err != nil {
				return armed{}, fmt.Errorf("failover-skew: %w", err)
			}
			return armed{fault: &skewedFailover{Failover: f}, window: s.sc.TTL, outer: onCluster(s)}, nil
		}}
}

// SkewBehind is how far the replicas' clocks run behind the master's under
// failover-skew: well beyond the failover time (down-after 1s plus the
// election), so that the promoted replica's clock-based fences fall below
// the old master's (docs/DESIGN.md, "Fences across a failover, and
// clocks").
const SkewBehind = 3 * time.Second

// skewedFailover is a failover whose promoted replica's clock is behind:
// it reads that clock right after the promotion (the proof the skew is
// there), and its evidence says how far the fences went back.
type skewedFailover struct {
	*nemesis.Failover
	behind time.Duration // measured: the harness's clock minus the promoted node's
	read   error
}

// Name is the failover's, under this fault's name ("failover-skew
// partition"): tla/trace reads the window's kind off its first word.
func (f *skewedFailover) Name() string {
	return contract.FaultFailoverSkew + strings.TrimPrefix(f.Failover.Name(), contract.FaultFailover)
}

// Start fails the master over, then reads the promoted node's clock.
func (f *skewedFailover) Start(ctx context.Context) error {
	if err := f.Failover.Start(ctx); err != nil {
		return err
	}
	f.behind, f.read = clockBehind(ctx, f.Env.Topology().Auth, f.Failover.Promoted())
	return nil
}

// clockBehind reads node's TIME directly (not through a proxy) and returns
// how far it is behind this process's clock, to within the round trip.
func clockBehind(ctx context.Context, a env.Auth, n env.Node) (time.Duration, error) {
	c := env.AdminClient(a, n.Upstream)
	defer c.Close()
	before := time.Now()
	t, err := c.Time(ctx).Result()
	if err != nil {
		return 0, fmt.Errorf("read %s's clock: %w", n.ID, err)
	}
	after := time.Now()
	mid := before.Add(after.Sub(before) / 2)
	return mid.Sub(t), nil
}

// Evidence implements nemesis.Witness: the failover's, and the promoted
// node's clock as read. The fault bit when a replica was promoted and its
// clock was behind by at least half the skew asked for.
func (f *skewedFailover) Evidence() nemesis.Evidence {
	ev := f.Failover.Evidence()
	if !ev.Bit {
		return ev
	}
	if f.read != nil {
		return nemesis.Evidence{Text: ev.Text + "; " + f.read.Error()}
	}
	text := fmt.Sprintf("%s, whose clock read %v behind", ev.Text, f.behind.Round(time.Millisecond))
	return nemesis.Evidence{Text: text, Bit: f.behind >= SkewBehind/2}
}

// evidenceFrom adds to the evidence what the skew did to the fences: the
// grants whose fence was below one granted before them (the promoted
// node's clock-based fences under the old master's), and how long after
// the first of them the last came. A fenced resource refuses the new
// holders' ops for that long (docs/DESIGN.md: the stall lasts at most the
// skew minus the failover time).
func (f *skewedFailover) evidenceFrom(ev nemesis.Evidence, ops []history.Op) nemesis.Evidence {
	n, first, last, rejected := fencesBack(ops)
	if n == 0 {
		return nemesis.Evidence{Text: ev.Text + "; no fence went back", Bit: ev.Bit}
	}
	text := fmt.Sprintf("%s; %d grants got a fence below an earlier grant's, for %v; %d fenced ops refused",
		ev.Text, n, time.Duration(last-first).Round(time.Millisecond), rejected)
	return nemesis.Evidence{Text: text, Bit: ev.Bit}
}

// fencesBack counts, per key, the ok acquires (in call order) whose token is
// below the highest token an acquire returned before their call, the span
// from the first such call to the last one's, and the resource ops refused
// for a stale token.
func fencesBack(ops []history.Op) (n int, first, last int64, rejected int) {
	type grant struct {
		call, ret int64
		token     uint64
	}
	byKey := map[string][]grant{}
	for _, op := range ops {
		switch {
		case op.Kind == history.Acquire && op.Result == history.OK && op.Completed && op.HasToken:
			byKey[op.Key] = append(byKey[op.Key], grant{op.Call, op.Return, op.Token})
		case (op.Kind == history.Write || op.Kind == history.Read) && op.Result == history.Rejected:
			rejected++
		}
	}
	for _, byCall := range byKey {
		// Ops come in call order; a second order by return lets one pass
		// keep the highest token returned before each call.
		byRet := slices.Clone(byCall)
		slices.SortFunc(byRet, func(a, b grant) int { return cmp.Compare(a.ret, b.ret) })
		slices.SortStableFunc(byCall, func(a, b grant) int { return cmp.Compare(a.call, b.call) })
		var high uint64
		j := 0
		for _, g := range byCall {
			for ; j < len(byRet) && byRet[j].ret < g.call; j++ {
				high = max(high, byRet[j].token)
			}
			if g.token < high {
				if n == 0 {
					first = g.call
				}
				first, last = min(first, g.call), max(last, g.call)
				n++
			}
		}
	}
	return n, first, last, rejected
}
