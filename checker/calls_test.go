package checker

import (
	"testing"
	"time"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

// due sets an op's deadline (ms).
func due(ms float64) opt {
	return func(o *history.Op) { o.Deadline, o.HasDeadline = int64(ms*float64(msNs)), true }
}

// closeOp is client c closing its lock handle.
func closeOp(c string, call, ret float64, res history.Result, opts ...opt) history.Op {
	return mk(history.Close, c, "k", call, ret, res, opts...)
}

func TestCalls(t *testing.T) {
	slack := Options{CallSlack: 100 * time.Millisecond}
	refuses := Options{CloseRefuses: true}
	both := Options{CallSlack: 100 * time.Millisecond, CloseRefuses: true}
	cases := []claimCase{
		{"no promise: nothing to judge", lined(
			acq("a", 0, 5000, ok, ttl(1000), due(1000)),
		), Options{}, contract.NA, "", nil, contract.PropCalls},
		{"no deadline recorded: nothing to judge", lined(
			acq("a", 0, 5000, ok, ttl(1000)),
		), slack, contract.NA, "", nil, contract.PropCalls},
		{"back by the deadline plus the slack", lined(
			acq("a", 0, 1100, ok, ttl(1000), due(1000)),
			wr("a", 1200, 2250, unknown, "x", due(2200)),
		), slack, contract.OK, "", nil, contract.PropCalls},
		// Review defect 9: a resource write on a go-redis client that
		// ignores ctx deadlines ran to the client's read timeout.
		{"a write back 2s after its deadline", lined(
			acq("a", 0, 1, ok, ttl(1000), due(1000)),
			wr("a", 10, 3010, unknown, "x", due(1010)),
		), slack, contract.Violated, RuleLateReturn, []int{2}, contract.PropCalls},
		// Review defect 7: Close blocked behind a subscription dialing a
		// frozen Redis.
		{"a close back long after its deadline", lined(
			acq("a", 0, 1, ok, ttl(1000)),
			closeOp("a", 10, 1500, ok, due(110)),
		), slack, contract.Violated, RuleLateReturn, []int{2}, contract.PropCalls},
		{"a context already expired at the call: due at the call", lined(
			rel("a", 500, 650, unknown, due(100)),
		), slack, contract.Violated, RuleLateReturn, []int{1}, contract.PropCalls},
		{"a call still running when the history ends past its due", lined(
			acq("a", 0, 0, unknown, ttl(1000), due(100), noReturn()),
			acq("b", 10, 400, fail, ttl(1000)),
		), slack, contract.Violated, RuleLateReturn, []int{1}, contract.PropCalls},
		{"a call still running when the history ends before its due", lined(
			acq("a", 0, 0, unknown, ttl(1000), due(1000), noReturn()),
			acq("b", 10, 400, fail, ttl(1000)),
		), slack, contract.NA, "", nil, contract.PropCalls},
		{"a frozen client returns late through no fault of its lock", lined(
			fault("pause-client c0-1", 5, 2000),
			wr("a", 10, 3010, unknown, "x", due(1010)),
		), slack, contract.NA, "", nil, contract.PropCalls},
		// Windows are closed intervals: one that ends at the op's call
		// overlaps it; one that ended a nanosecond before does not.
		{"a window ending at the call excuses the op", lined(
			fault("pause-client c0-1", 5, 10),
			wr("a", 10, 3010, unknown, "x", due(1010)),
		), slack, contract.NA, "", nil, contract.PropCalls},
		{"a window ending before the call does not", lined(
			fault("pause-client c0-1", 5, 9.999999),
			wr("a", 10, 3010, unknown, "x", due(1010)),
		), slack, contract.Violated, RuleLateReturn, []int{2}, contract.PropCalls},
		{"a frozen Redis excuses nothing", lined(
			fault("pause-server", 5, 2000),
			wr("a", 10, 3010, unknown, "x", due(1010)),
		), slack, contract.Violated, RuleLateReturn, []int{2}, contract.PropCalls},
		// Review defect 10: Acquire after Close succeeded, without the
		// watchdog asked for.
		{"an acquire after the close got the lock", lined(
			acq("a", 0, 1, ok, ttl(1000)),
			closeOp("a", 10, 11, ok),
			acq("a", 12, 13, ok, ttl(1000)),
		), refuses, contract.Violated, RuleClosedGrant, []int{2, 3}, contract.PropCalls},
		{"an acquire after the close refused", lined(
			acq("a", 0, 1, ok, ttl(1000)),
			closeOp("a", 10, 11, ok),
			acq("a", 12, 13, fail, ttl(1000)),
		), refuses, contract.OK, "", nil, contract.PropCalls},
		{"an acquire called before the close returned may be granted", lined(
			closeOp("a", 10, 20, ok),
			acq("a", 15, 30, ok, ttl(1000)),
		), refuses, contract.NA, "", nil, contract.PropCalls},
		// Review defect 8: a wait in line when Close was called, behind
		// its own client's hold (a goroutine of its own, under another
		// token), was served once that hold was released, after Close,
		// and kept the lock it asked for without a watchdog.
		{"a wait in line behind another hold, served after the close", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1)),
			acq("a", 2, 50, ok, ttl(1000), tok(2), hold(2), waits()),
			closeOp("a", 10, 11, ok),
			rel("a", 12, 13, ok, tok(1), hold(1)),
		), refuses, contract.Violated, RuleClosedGrant, []int{1, 2, 3}, contract.PropCalls},
		{"a wait in line behind another client's hold, served after the close", lined(
			acq("b", 0, 1, ok, ttl(1000), tok(1), hold(1)),
			acq("a", 2, 50, ok, ttl(1000), tok(2), hold(1), waits()),
			closeOp("a", 10, 11, ok),
			rel("b", 12, 13, ok, tok(1), hold(1)),
		), refuses, contract.Violated, RuleClosedGrant, []int{1, 2, 3}, contract.PropCalls},
		{"a wait in line behind another hold, refused after the close", lined(
			acq("b", 0, 1, ok, ttl(1000), tok(1), hold(1)),
			acq("a", 2, 50, fail, ttl(1000), hold(1), waits()),
			closeOp("a", 10, 11, ok),
			rel("b", 12, 13, ok, tok(1), hold(1)),
		), refuses, contract.OK, "", nil, contract.PropCalls},
		// The key may have been free before the close returned: the
		// wait may have been granted first.
		{"the hold ahead released before the close returned", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1)),
			acq("a", 2, 50, ok, ttl(1000), tok(2), hold(2), waits()),
			rel("a", 5, 6, ok, tok(1), hold(1)),
			closeOp("a", 10, 11, ok),
		), refuses, contract.NA, "", nil, contract.PropCalls},
		{"the hold ahead surely expired before the close returned", lined(
			acq("a", 0, 1, ok, ttl(5), tok(1), hold(1)),
			acq("a", 2, 50, ok, ttl(1000), tok(2), hold(2), waits()),
			closeOp("a", 10, 11, ok),
		), refuses, contract.NA, "", nil, contract.PropCalls},
		{"a wait that may re-enter its own client's hold", lined(
			acq("a", 0, 1, ok, ttl(1000), tok(1), hold(1)),
			acq("a", 2, 50, ok, ttl(1000), tok(1), hold(2), waits()),
			closeOp("a", 10, 11, ok),
		), refuses, contract.NA, "", nil, contract.PropCalls},
		{"a wait served before the close returned", lined(
			acq("b", 0, 1, ok, ttl(1000), tok(1), hold(1)),
			acq("a", 2, 11, ok, ttl(1000), tok(2), hold(1), waits()),
			closeOp("a", 10, 11, ok),
		), refuses, contract.NA, "", nil, contract.PropCalls},
		{"a close of unknown outcome proves nothing", lined(
			closeOp("a", 10, 11, unknown),
			acq("a", 12, 13, ok, ttl(1000)),
		), refuses, contract.NA, "", nil, contract.PropCalls},
		{"a close is of the client, not of another", lined(
			closeOp("a", 10, 11, ok),
			acq("b", 12, 13, ok, ttl(1000)),
		), refuses, contract.NA, "", nil, contract.PropCalls},
		{"a close on one key closes the client's handle on every key", lined(
			mk(history.Close, "a", "other", 10, 11, ok),
			acq("a", 12, 13, ok, ttl(1000)),
		), refuses, contract.Violated, RuleClosedGrant, []int{1, 2}, contract.PropCalls},
		{"both rules at once", lined(
			closeOp("a", 10, 500, ok, due(110)),
			acq("a", 600, 601, ok, ttl(1000), due(1600)),
		), both, contract.Violated, RuleClosedGrant, []int{1, 2}, contract.PropCalls},
	}
	runPropCases(t, cases)
}

func TestCallsOptionsRecorded(t *testing.T) {
	r, err := Check(t.Context(), lined(acq("a", 0, 1, ok, ttl(1000))), Options{CallSlack: 250 * time.Millisecond, CloseRefuses: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.Options.CallSlackMs != 250 || !r.Options.CloseRefuses {
		t.Errorf("options recorded %+v, want the call slack 250ms and close-refuses", r.Options)
	}
	if _, err := Check(t.Context(), lined(acq("a", 0, 1, ok)), Options{CallSlack: -1}); err == nil {
		t.Error("a negative call slack was accepted")
	}
}
