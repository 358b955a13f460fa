package gate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/chaos/gate"
	"github.com/lockproof/lockproof/internal/redistest"
)

func clients(t *testing.T) (gated, plain *redis.Client, g *gate.Gate) {
	t.Helper()
	p := redistest.Start(t)
	g = gate.New()
	gated = redis.NewClient(&redis.Options{Addr: p.Addr, ReadTimeout: time.Second, MaxRetries: -1})
	gated.AddHook(g.Hook())
	plain = redis.NewClient(&redis.Options{Addr: p.Addr, ReadTimeout: time.Second})
	t.Cleanup(func() { g.Resume(); _ = gated.Close(); _ = plain.Close() })
	return gated, plain, g
}

func waitHeld(t *testing.T, g *gate.Gate, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for g.Held() < n {
		if time.Now().After(deadline) {
			t.Fatalf("gate holds %d callers; want %d", g.Held(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestPauseHoldsCommandsUntilResume(t *testing.T) {
	gated, plain, g := clients(t)
	ctx := context.Background()
	g.Pause()
	done := make(chan error, 1)
	go func() { done <- gated.Set(ctx, "k", "paused", 0).Err() }()
	waitHeld(t, g, 1)
	if v, err := plain.Get(ctx, "k").Result(); err != redis.Nil {
		t.Fatalf("a paused client's SET reached Redis: %q, %v", v, err)
	}
	select {
	case err := <-done:
		t.Fatalf("SET returned while paused: %v", err)
	default:
	}
	g.Resume()
	if err := <-done; err != nil {
		t.Fatalf("SET after resume: %v", err)
	}
	if v, _ := plain.Get(ctx, "k").Result(); v != "paused" {
		t.Fatalf("k = %q; want paused", v)
	}
}

func TestPauseHoldsReply(t *testing.T) {
	gated, plain, g := clients(t)
	ctx := context.Background()
	// A reply that arrives while paused is held: the command took effect, its caller does not know yet.
	g.Pause()
	done := make(chan error, 1)
	go func() { done <- gated.Incr(ctx, "n").Err() }()
	waitHeld(t, g, 1)
	g.Resume()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n, _ := plain.Get(ctx, "n").Int(); n != 1 {
		t.Fatalf("n = %d; want 1", n)
	}
}

func TestCrashFailsEverything(t *testing.T) {
	gated, _, g := clients(t)
	ctx := context.Background()
	g.Pause()
	done := make(chan error, 1)
	go func() { done <- gated.Ping(ctx).Err() }()
	waitHeld(t, g, 1)
	g.Crash()
	if g.CrashedAfterReply() {
		t.Error("CrashedAfterReply is true after a plain Crash")
	}
	if err := <-done; !errors.Is(err, gate.ErrCrashed) {
		t.Fatalf("held PING after crash: %v; want ErrCrashed", err)
	}
	if err := gated.Ping(ctx).Err(); !errors.Is(err, gate.ErrCrashed) {
		t.Fatalf("PING after crash: %v; want ErrCrashed", err)
	}
	if err := g.Wait(ctx); !errors.Is(err, gate.ErrCrashed) {
		t.Fatalf("Wait after crash: %v", err)
	}
}

func TestCrashAfterCommand(t *testing.T) {
	gated, plain, g := clients(t)
	ctx := context.Background()
	g.CrashAfter("SET")
	if err := gated.Get(ctx, "x").Err(); err != redis.Nil {
		t.Fatalf("GET before the armed command: %v", err)
	}
	if err := gated.Set(ctx, "x", "1", 0).Err(); !errors.Is(err, gate.ErrCrashed) {
		t.Fatalf("SET: %v; want ErrCrashed", err)
	}
	if !g.CrashedAfterReply() {
		t.Error("CrashedAfterReply is false after a CrashAfter crash")
	}
	if v, _ := plain.Get(ctx, "x").Result(); v != "1" {
		t.Fatalf("the SET the client crashed after did not take effect: x = %q", v)
	}
	if err := gated.Get(ctx, "x").Err(); !errors.Is(err, gate.ErrCrashed) {
		t.Fatalf("GET after crash: %v", err)
	}
	pipe := gated.Pipeline()
	pipe.Get(ctx, "x")
	if _, err := pipe.Exec(ctx); !errors.Is(err, gate.ErrCrashed) {
		t.Fatalf("pipeline after crash: %v", err)
	}
}

func TestPauseAfterCommand(t *testing.T) {
	gated, plain, g := clients(t)
	ctx := context.Background()
	if g.Armed() {
		t.Fatal("a new gate says it is armed")
	}
	g.PauseAfter("get")
	struck := g.Struck()
	if !g.Armed() {
		t.Fatal("PauseAfter did not arm the gate")
	}
	if err := gated.Set(ctx, "y", "1", 0).Err(); err != nil {
		t.Fatalf("SET before the armed command: %v", err)
	}
	select {
	case <-struck:
		t.Fatal("Struck closed by a command that is not the armed one")
	default:
	}
	done := make(chan error, 1)
	go func() {
		if err := gated.Get(ctx, "y").Err(); err != nil {
			done <- err
			return
		}
		done <- gated.Del(ctx, "y").Err()
	}()
	select { // the fault counts its window from here
	case <-struck:
	case <-time.After(10 * time.Second):
		t.Fatal("Struck not closed after the armed GET's reply")
	}
	waitHeld(t, g, 1)
	if g.Armed() {
		t.Error("the gate still says it is armed after the pause struck")
	}
	// Held between GET and DEL: the key is still there.
	if n, _ := plain.Exists(ctx, "y").Result(); n != 1 {
		t.Fatalf("the DEL after the paused GET ran while paused")
	}
	g.Resume()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n, _ := plain.Exists(ctx, "y").Result(); n != 0 {
		t.Fatalf("the DEL did not run after resume")
	}
}
