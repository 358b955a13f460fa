package nemesis_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/chaos/gate"
	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/contract"
)

// A pause bit when its gate held a call of the client; one that held
// nothing did not. A crash bit when the gate crashed, and an armed crash
// that never struck did not. Apply writes the evidence into the window.
func TestClientFaultEvidence(t *testing.T) {
	ctx := context.Background()
	idle := &nemesis.PauseClient{Client: "a", Gate: gate.New()}
	r := &rec{}
	if err := nemesis.Apply(ctx, r, idle, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if ev := idle.Evidence(); ev.Bit {
		t.Errorf("a pause that held nothing bit: %+v", ev)
	}
	if len(r.evidences) != 1 || !strings.Contains(r.evidences[0], "0 of its calls held") {
		t.Errorf("window evidence %q", r.evidences)
	}

	g := gate.New()
	busy := &nemesis.PauseClient{Client: "b", Gate: g}
	done := make(chan error, 1)
	go func() {
		time.Sleep(20 * time.Millisecond)
		done <- g.Wait(ctx) // held until the pause ends
	}()
	if err := nemesis.Apply(ctx, &rec{}, busy, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if ev := busy.Evidence(); !ev.Bit || !strings.Contains(ev.Text, "1 of its calls held") {
		t.Errorf("a pause that held a call: %+v", ev)
	}

	armed := &nemesis.CrashClient{Client: "c", Gate: gate.New(), Point: contract.Point{After: "evalsha"}}
	_ = armed.Start(ctx)
	if ev := armed.Evidence(); ev.Bit {
		t.Errorf("an armed crash that never struck bit: %+v", ev)
	}
	crash := &nemesis.CrashClient{Client: "d", Gate: gate.New()}
	_ = crash.Start(ctx)
	if ev := crash.Evidence(); !ev.Bit {
		t.Errorf("a crash: %+v", ev)
	}
}
