package checker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

func TestPromptness(t *testing.T) {
	h40 := Options{Handoff: 40 * time.Millisecond}
	cases := []struct {
		name    string
		ops     []history.Op
		opts    Options
		verdict contract.Verdict
		lines   []int
	}{
		{"the head granted within the bound", lined(
			acq("h", 0, 1, ok, ttl(1000)),
			acq("x", 10, 305, ok, ttl(1000), waits(), inLine(12)),
			rel("h", 290, 291, ok),
			rel("x", 400, 401, ok),
		), h40, contract.OK, nil},
		{"the head granted before the release returned", lined(
			acq("h", 0, 1, ok, ttl(1000)),
			acq("x", 10, 290.5, ok, ttl(1000), waits(), inLine(12)),
			rel("h", 290, 291, ok),
		), h40, contract.OK, nil},
		{"the head granted at its own poll, late", lined(
			acq("h", 0, 1, ok, ttl(1000)),
			acq("x", 10, 400, ok, ttl(1000), waits(), inLine(12)),
			rel("h", 290, 291, ok),
			rel("x", 500, 501, ok),
		), h40, contract.Violated, []int{2, 3}},
		{"a later waiter granted late names the head and the grant", lined(
			acq("h", 0, 1, ok, ttl(1000)),
			acq("x", 10, 900, ok, ttl(1000), waits(), inLine(12)),
			acq("y", 20, 400, ok, ttl(1000), waits(), inLine(22)),
			rel("h", 290, 291, ok),
			rel("y", 800, 801, ok),
		), h40, contract.Violated, []int{2, 3, 4}},
		{"nobody granted while the history goes on", lined(
			acq("h", 0, 1, ok, ttl(1000)),
			acq("x", 10, 2000, fail, ttl(1000), waits(), inLine(12), due(2000)),
			rel("h", 290, 291, ok),
		), h40, contract.Violated, []int{2, 3}},
		{"a fault window open between the release and the grant: not judged", lined(
			acq("h", 0, 1, ok, ttl(1000)),
			acq("x", 10, 400, ok, ttl(1000), waits(), inLine(12)),
			fault("partition x", 295, 380),
			rel("h", 290, 291, ok),
		), h40, contract.NA, nil},
		{"a window of a fault that keeps Redis serving excuses nothing", lined(
			acq("h", 0, 1, ok, ttl(1000)),
			acq("x", 10, 400, ok, ttl(1000), waits(), inLine(12)),
			fault("pubsub-reset", 295, 296),
			rel("h", 290, 291, ok),
		), h40, contract.Violated, []int{2, 4}},
		{"the head gave up around the hand-off: not judged", lined(
			acq("h", 0, 1, ok, ttl(1000)),
			acq("x", 10, 300, fail, ttl(1000), waits(), inLine(12), due(299)),
			acq("y", 20, 400, ok, ttl(1000), waits(), inLine(22)),
			rel("h", 290, 291, ok),
		), h40, contract.NA, nil},
		{"a waiter that died in line may be the head: not judged", lined(
			acq("h", 0, 1, ok, ttl(1000)),
			acq("d", 5, 0, unknown, ttl(1000), waits(), inLine(6), noReturn()),
			acq("x", 10, 400, ok, ttl(1000), waits(), inLine(12)),
			rel("h", 290, 291, ok),
		), h40, contract.NA, nil},
		{"a nested release leaves the lock held: not judged", lined(
			acq("h", 0, 1, ok, ttl(1000), tok(1)),
			acq("x", 10, 600, ok, ttl(1000), waits(), inLine(12), tok(2)),
			acq("h", 50, 51, ok, ttl(1000), tok(1)),
			rel("h", 290, 291, ok, tok(1)),
			rel("h", 580, 581, ok, tok(1)),
		), h40, contract.OK, nil},
		{"a release of unknown outcome: not judged", lined(
			acq("h", 0, 1, ok, ttl(1000)),
			acq("x", 10, 1200, ok, ttl(1000), waits(), inLine(12)),
			rel("h", 290, 291, unknown),
		), h40, contract.NA, nil},
		{"a lease that expired, not released: no hand-off promised", lined(
			acq("h", 0, 1, ok, ttl(100)),
			acq("x", 10, 200, ok, ttl(1000), waits(), inLine(12)),
			rel("x", 300, 301, ok),
		), h40, contract.NA, nil},
		{"the releaser's own acquire is no hand-off", lined(
			acq("h", 0, 1, ok, ttl(1000)),
			acq("x", 10, 700, ok, ttl(1000), waits(), inLine(12)),
			rel("h", 290, 291, ok),
			acq("h", 292, 293, ok, ttl(1000)),
			rel("h", 600, 601, ok),
		), h40, contract.Violated, []int{2, 3}},
		{"the releaser waiting again behind the head", lined(
			acq("h", 0, 1, ok, ttl(1000)),
			acq("x", 10, 300, ok, ttl(1000), waits(), inLine(12)),
			rel("h", 290, 291, ok),
			acq("h", 292, 700, ok, ttl(1000), waits(), inLine(293)),
			rel("x", 690, 691, ok),
		), h40, contract.OK, nil},
		{"a waiter not yet surely in line is owed nothing", lined(
			acq("h", 0, 1, ok, ttl(1000)),
			acq("x", 10, 400, ok, ttl(1000), waits(), inLine(295)),
			rel("h", 290, 291, ok),
		), h40, contract.NA, nil},
		{"a waiter of unknown outcome may hold: not judged", lined(
			acq("h", 0, 1, ok, ttl(1000)),
			acq("x", 10, 300, unknown, ttl(1000), waits(), inLine(12)),
			rel("h", 280, 281, ok),
		), h40, contract.NA, nil},
		{"a lock that states no bound", lined(
			acq("h", 0, 1, ok, ttl(1000)),
			acq("x", 10, 400, ok, ttl(1000), waits(), inLine(12)),
			rel("h", 290, 291, ok),
		), Options{}, contract.NA, nil},
	}
	var props []claimCase
	for _, tc := range cases {
		props = append(props, claimCase{name: tc.name, ops: tc.ops, opts: tc.opts, verdict: tc.verdict,
			rule: ruleIf(tc.lines, RuleHandoffLate), lines: tc.lines, prop: contract.PropPromptness})
	}
	runPropCases(t, props)
}

// TestPromptnessExplains: a late hand-off names the release, the head of
// the line and the delay.
func TestPromptnessExplains(t *testing.T) {
	r, err := Check(context.Background(), lined(
		acq("h", 0, 1, ok, ttl(1000)),
		acq("x", 10, 400, ok, ttl(1000), waits(), inLine(12)),
		rel("h", 290, 291, ok),
	), Options{Handoff: 40 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	p := r.Of(contract.PropPromptness)
	if p.Verdict != contract.Violated || len(p.Violations) != 1 {
		t.Fatalf("promptness %s, want one violation: %+v", p.Verdict, p)
	}
	why := p.Violations[0].Explanation
	for _, want := range []string{`release by "h" (line 3`, `acquire by "x" (line 2`, "109ms after the release", "within 40ms"} {
		if !strings.Contains(why, want) {
			t.Errorf("explanation %q lacks %q", why, want)
		}
	}
	if r.Options.HandoffMs != 40 {
		t.Errorf("options record handoff_ms %d, want 40", r.Options.HandoffMs)
	}
	if _, err := Check(context.Background(), lined(acq("h", 0, 1, ok)), Options{Handoff: -time.Millisecond}); err == nil {
		t.Error("a negative hand-off bound was accepted")
	}
}
