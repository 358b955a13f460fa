package gate_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/chaos/gate"
)

// CrashBefore crashes the client before the armed command is sent: the
// commands before it took effect, the armed one never reaches Redis.
// (Added by the matrix engineer for setnx-expire: a crash after a SETNX
// that succeeded, before its EXPIRE.)
func TestCrashBeforeCommand(t *testing.T) {
	gated, plain, g := clients(t)
	ctx := context.Background()
	g.CrashBefore("PEXPIRE")
	if ok, err := gated.SetNX(ctx, "z", "1", 0).Result(); err != nil || !ok {
		t.Fatalf("SETNX before the armed command: %v, %v", ok, err)
	}
	if err := gated.PExpire(ctx, "z", 1000).Err(); !errors.Is(err, gate.ErrCrashed) {
		t.Fatalf("PEXPIRE: %v; want ErrCrashed", err)
	}
	if !g.Crashed() || !g.CrashedAfterReply() {
		t.Errorf("Crashed %v, CrashedAfterReply %v; want both true (nothing in flight)", g.Crashed(), g.CrashedAfterReply())
	}
	if ttl, err := plain.PTTL(ctx, "z").Result(); err != nil || ttl != -1 {
		t.Fatalf("PTTL z = %v, %v; want -1 (the PEXPIRE was never sent)", ttl, err)
	}
	if err := gated.Get(ctx, "z").Err(); !errors.Is(err, gate.ErrCrashed) {
		t.Fatalf("GET after crash: %v", err)
	}
	pipe := gated.Pipeline()
	pipe.Get(ctx, "z")
	if _, err := pipe.Exec(ctx); !errors.Is(err, gate.ErrCrashed) && err != redis.Nil {
		t.Fatalf("pipeline after crash: %v", err)
	}
}
