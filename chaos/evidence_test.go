package chaos

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/chaos/gate"
	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/history"
)

const ms = int64(time.Millisecond)

// A network fault bit when an op of a client it cut, overlapping its
// window, failed slowly, never returned or was slowed; ops of other
// clients, or outside the window, are no evidence.
func TestNetworkBite(t *testing.T) {
	applied := nemesis.Evidence{Text: "2 toxics on 2 proxies", Bit: true}
	window := history.Op{Kind: history.Fault, Name: "partition [a]", Call: 100 * ms, Return: 1600 * ms, Completed: true}
	op := func(client string, call, ret int64, completed bool, res history.Result) history.Op {
		return history.Op{Client: client, Kind: history.Acquire, Key: "k", Call: call, Return: ret, Completed: completed, Result: res, TTLMillis: 500}
	}
	for _, tc := range []struct {
		name string
		ops  []history.Op
		bit  bool
	}{
		{"a timed out in the window", []history.Op{window, op("a", 200*ms, 1200*ms, true, history.Unknown)}, true},
		{"a never returned", []history.Op{window, op("a", 1500*ms, 0, false, history.Unknown)}, true},
		{"a slowed", []history.Op{window, op("a", 200*ms, 240*ms, true, history.OK)}, true},
		{"a fast and fine", []history.Op{window, op("a", 200*ms, 200*ms+ms/2, true, history.OK), op("a", 300*ms, 300*ms+ms/2, true, history.Fail)}, false},
		{"a refused, slowly", []history.Op{window, op("a", 200*ms, 230*ms, true, history.Fail)}, true},
		{"only b suffered", []history.Op{window, op("b", 200*ms, 1200*ms, true, history.Unknown)}, false},
		{"a suffered before the window", []history.Op{window, op("a", 10*ms, 90*ms, true, history.Unknown)}, false},
	} {
		got := networkBite(applied, "partition [a]", []string{"a"}, tc.ops)
		if got.Bit != tc.bit || !strings.HasPrefix(got.Text, applied.Text) {
			t.Errorf("%s: %+v; want bit %v", tc.name, got, tc.bit)
		}
	}
	if got := networkBite(applied, "partition [a]", []string{"a"}, nil); got.Bit {
		t.Errorf("no window in the history: %+v; want no bite", got)
	}
}

// A fault that cannot account for itself has no evidence, and a witness's
// own account stands for the faults that are not network ones.
func TestEvidenceOfFaults(t *testing.T) {
	if ev := evidence(mute{}, nil); ev.Bit {
		t.Errorf("a fault without evidence bit: %+v", ev)
	}
	clock := &gate.Clock{}
	skew := &nemesis.ClockSkew{Client: "a", Clock: clock, Offset: time.Second}
	if ev := evidence(skew, nil); ev.Bit {
		t.Errorf("a skew never applied bit: %+v", ev)
	}
	ctx := context.Background()
	_ = skew.Start(ctx)
	clock.Now()
	clock.Now()
	_ = skew.Stop(ctx)
	if ev := evidence(skew, nil); !ev.Bit || !strings.Contains(ev.Text, "read 2 times") {
		t.Errorf("skew applied and read twice: %+v", ev)
	}
}

type mute struct{}

func (mute) Name() string                    { return "mute" }
func (mute) Start(ctx context.Context) error { return nil }
func (mute) Stop(ctx context.Context) error  { return nil }
