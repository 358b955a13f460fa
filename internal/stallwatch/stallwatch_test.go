package stallwatch

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestLateTickIsAStall: a tick that fires a threshold late or more is
// recorded as a stall from when it was due to when it fired; ticks on
// time are not recorded.
func TestLateTickIsAStall(t *testing.T) {
	var skew atomic.Int64 // the fake clock's lead over the real one
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var got [][2]time.Time
	done := make(chan struct{})
	go func() {
		defer close(done)
		watch(ctx, 5*time.Millisecond, 50*time.Millisecond, now, func(s, e time.Time) {
			mu.Lock()
			got = append(got, [2]time.Time{s, e})
			mu.Unlock()
		})
	}()
	time.Sleep(40 * time.Millisecond)
	skew.Store(int64(200 * time.Millisecond)) // the next tick is 200ms late
	time.Sleep(40 * time.Millisecond)
	cancel()
	<-done
	// (A loaded machine may add stalls of its own: look for this one.)
	found := false
	for _, w := range got {
		if d := w[1].Sub(w[0]); d >= 150*time.Millisecond && d < time.Second {
			found = true
		}
	}
	if !found {
		t.Errorf("stalls %v, want one of about 200ms", got)
	}
}

// TestWatchSeesAFrozenProcess: the process frozen whole (SIGSTOP, then
// SIGCONT 300ms later from a child) shows as one stall of about that long.
func TestWatchSeesAFrozenProcess(t *testing.T) {
	freeze := freezer(t)
	if freeze == nil {
		return // a child process ran it (freezer)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stalls := make(chan time.Duration, 16)
	go Watch(ctx, Every, Threshold, func(s, e time.Time) { stalls <- e.Sub(s) })
	time.Sleep(50 * time.Millisecond)
	freeze(300 * time.Millisecond)
	// (A loaded machine may add stalls of its own: look for this one.)
	deadline := time.After(5 * time.Second)
	var seen []time.Duration
	for {
		select {
		case d := <-stalls:
			if d >= 250*time.Millisecond {
				return
			}
			seen = append(seen, d)
		case <-deadline:
			t.Fatalf("stalls %v, none of about 300ms", seen)
		}
	}
}
