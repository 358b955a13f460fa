package redsync_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/examples/redsync"
	"github.com/lockproof/lockproof/internal/redisproc"
	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/zoo"
)

func deps(t *testing.T, ps []*redisproc.Process) specimen.Deps {
	t.Helper()
	var cs []redis.UniversalClient
	for _, p := range ps {
		c := redis.NewClient(&redis.Options{Addr: p.Addr, MaxRetries: -1, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		cs = append(cs, c)
	}
	return specimen.Deps{Redlock: cs}
}

func tctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestRedsyncLocker(t *testing.T) {
	ps := []*redisproc.Process{redistest.Start(t), redistest.Start(t), redistest.Start(t)}
	a, err := redsync.New(deps(t, ps))
	if err != nil {
		t.Fatal(err)
	}
	b, err := redsync.New(deps(t, ps))
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 10 * time.Second
	la, err := a.TryAcquire(tctx(t), "k", ttl)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	if _, err := b.TryAcquire(tctx(t), "k", ttl); !errors.Is(err, specimen.ErrNotAcquired) {
		t.Fatalf("second acquire: %v, want ErrNotAcquired", err)
	}
	if err := la.Renew(tctx(t), ttl); err != nil {
		t.Fatalf("renew: %v", err)
	}
	if err := la.Release(tctx(t)); err != nil {
		t.Fatalf("release: %v", err)
	}
	if err := la.Release(tctx(t)); !errors.Is(err, specimen.ErrNotHeld) {
		t.Fatalf("second release: %v, want ErrNotHeld", err)
	}
	lb, err := b.TryAcquire(tctx(t), "k", ttl)
	if err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
	// One instance down: a majority still decides.
	if err := ps[0].Kill(); err != nil {
		t.Fatal(err)
	}
	if err := lb.Release(tctx(t)); err != nil {
		t.Fatalf("release with one instance down: %v", err)
	}
	if _, err := redsync.New(specimen.Deps{}); !errors.Is(err, specimen.ErrInvalid) {
		t.Fatalf("New without clients: %v, want ErrInvalid", err)
	}
}
