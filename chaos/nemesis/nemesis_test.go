package nemesis_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/gate"
	"github.com/lockproof/lockproof/chaos/internal/chaostest"
	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/internal/redistest"
)

// fencedClient talks to the fenced node through the client's own proxy.
func fencedClient(t *testing.T, e env.Env, l *env.Links) *redis.Client {
	t.Helper()
	addr, err := l.Addr("fenced")
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(e.Topology().Auth.Options(&redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: 3 * time.Second,
		WriteTimeout: time.Second, MaxRetries: -1, ContextTimeoutEnabled: true}))
	t.Cleanup(func() { _ = c.Close() })
	return c
}

type rec struct {
	mu        sync.Mutex
	names     []string
	evidences []string
	open      int
	closed    int
}

func (r *rec) FaultWindow(name string) func(string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.names = append(r.names, name)
	r.open++
	return func(ev string) {
		r.mu.Lock()
		r.closed++
		r.evidences = append(r.evidences, ev)
		r.mu.Unlock()
	}
}

func pingWithin(c *redis.Client, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return c.Ping(ctx).Err()
}

func TestNetworkFaults(t *testing.T) {
	e := chaostest.StartProcess(t, env.Spec{Replicas: -1, Sentinels: 1})
	a, b := chaostest.Links(t, e, "a"), chaostest.Links(t, e, "b")
	ca, cb := fencedClient(t, e, a), fencedClient(t, e, b)
	ctx := context.Background()
	for _, c := range []*redis.Client{ca, cb} {
		if err := pingWithin(c, 2*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	pa, err := nemesis.NodeProxies("fenced", a)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("partition", func(t *testing.T) {
		f := nemesis.Partition("partition a", pa)
		if err := f.Start(ctx); err != nil {
			t.Fatal(err)
		}
		errA := pingWithin(ca, 500*time.Millisecond)
		errB := pingWithin(cb, 2*time.Second)
		if err := f.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if errA == nil {
			t.Error("PING through a partitioned proxy succeeded")
		}
		if errB != nil {
			t.Errorf("a partition of client a stopped client b: %v", errB)
		}
		if err := pingWithin(ca, 2*time.Second); err != nil {
			t.Errorf("PING after the partition healed: %v", err)
		}
	})
	t.Run("latency", func(t *testing.T) {
		f := nemesis.Latency("latency a", pa, 600*time.Millisecond, 10*time.Millisecond)
		if err := f.Start(ctx); err != nil {
			t.Fatal(err)
		}
		errShort := pingWithin(ca, 300*time.Millisecond) // less than one way
		errLong := pingWithin(ca, 20*time.Second)        // plenty (the read timeout is 3s)
		if err := f.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if errShort == nil {
			t.Error("PING beat 0.6s latency each way within 0.3s")
		}
		if errLong != nil {
			t.Errorf("a slow link lost the PING: %v", errLong)
		}
	})
	t.Run("reset", func(t *testing.T) {
		f := nemesis.Reset("reset a", pa)
		if err := f.Start(ctx); err != nil {
			t.Fatal(err)
		}
		errA := pingWithin(ca, 2*time.Second)
		if err := f.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if errA == nil || errors.Is(errA, context.DeadlineExceeded) {
			t.Errorf("PING through reset_peer: %v; want a connection error", errA)
		}
	})
	t.Run("bandwidth", func(t *testing.T) {
		f := nemesis.Bandwidth("bandwidth a", pa, 1)
		if err := f.Start(ctx); err != nil {
			t.Fatal(err)
		}
		big := strings.Repeat("x", 64<<10)
		errA := ca.Set(ctx, "big", big, 0).Err() // 64 KiB at 1 KB/s: far beyond the 3s read timeout
		if err := f.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if errA == nil {
			t.Error("64 KiB passed a 1 KB/s link within the 3s timeout")
		}
	})
	t.Run("apply-records", func(t *testing.T) {
		r := &rec{}
		f := nemesis.Partition("partition a,b", nemesis.ClientProxies(a, b))
		done := make(chan error, 1)
		cctx, cancel := context.WithCancel(ctx)
		go func() { done <- nemesis.Apply(cctx, r, f, time.Hour) }()
		deadline := time.Now().Add(10 * time.Second)
		for pingWithin(cb, 300*time.Millisecond) == nil {
			if time.Now().After(deadline) {
				t.Fatal("group partition did not cut client b")
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if len(r.names) != 1 || r.names[0] != "partition a,b" || r.closed != 1 {
			t.Fatalf("recorded %v (closed %d); want one closed window", r.names, r.closed)
		}
		if err := pingWithin(cb, 2*time.Second); err != nil {
			t.Errorf("PING after Apply healed: %v", err)
		}
	})
}

func TestPauseServer(t *testing.T) {
	e := chaostest.StartProcess(t, env.Spec{Replicas: -1, Sentinels: 1})
	l := chaostest.Links(t, e, "a")
	c := fencedClient(t, e, l)
	f := &nemesis.PauseServer{Env: e, NodeID: "fenced"}
	ctx := context.Background()
	if err := f.Start(ctx); err != nil {
		t.Fatal(err)
	}
	err := pingWithin(c, 500*time.Millisecond)
	if serr := f.Stop(ctx); serr != nil {
		t.Fatal(serr)
	}
	if err == nil {
		t.Fatal("a paused server answered")
	}
	if err := pingWithin(c, 3*time.Second); err != nil {
		t.Fatalf("after resume: %v", err)
	}
}

func TestPauseAndCrashClient(t *testing.T) {
	e := chaostest.StartProcess(t, env.Spec{Replicas: -1, Sentinels: 1})
	l := chaostest.Links(t, e, "a")
	c := fencedClient(t, e, l)
	g := gate.New()
	c.AddHook(g.Hook())
	ctx := context.Background()
	p := &nemesis.PauseClient{Client: "a", Gate: g}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Set(ctx, "k", "v", 0).Err() }()
	for g.Held() == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("SET after the pause: %v", err)
	}
	cr := &nemesis.CrashClient{Client: "a", Gate: g}
	if err := cr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx).Err(); !errors.Is(err, gate.ErrCrashed) {
		t.Fatalf("PING of a crashed client: %v", err)
	}
}

func TestClockSkew(t *testing.T) {
	var c gate.Clock
	f := &nemesis.ClockSkew{Client: "a", Clock: &c, Offset: time.Hour}
	if err := f.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := time.Until(c.Now()); d < 59*time.Minute {
		t.Fatalf("skewed clock is %v ahead; want about 1h", d)
	}
	_ = f.Stop(context.Background())
	if d := time.Until(c.Now()); d > time.Minute {
		t.Fatalf("clock still %v ahead after Stop", d)
	}
}

func TestFailoverModes(t *testing.T) {
	for _, mode := range []nemesis.FailoverMode{nemesis.FailoverPartition, nemesis.FailoverKill} {
		t.Run(string(mode), func(t *testing.T) {
			e := chaostest.StartProcess(t, env.Spec{DownAfter: time.Second})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			f := &nemesis.Failover{Env: e, Mode: mode, ReplLatency: 50 * time.Millisecond, ReplLag: 100 * time.Millisecond}
			if err := f.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if f.Old().ID != "data-0" || f.Promoted().ID == "" || f.Promoted().ID == "data-0" {
				t.Fatalf("failover from %q to %q; want data-0 to a replica", f.Old().ID, f.Promoted().ID)
			}
			m, err := env.Master(ctx, e.Topology())
			if err != nil || m.ID != f.Promoted().ID {
				t.Fatalf("sentinels report master %v, %v; want %s", m.ID, err, f.Promoted().ID)
			}
			if err := f.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			if err := f.Check(ctx); err != nil {
				t.Fatalf("Check after one failover: %v", err)
			}
			if mode != nemesis.FailoverPartition {
				return
			}
			// A second failover (as a too-quick Sentinel makes one): Check
			// says the run saw another master.
			if _, err := env.WaitConverged(ctx, e.Topology()); err != nil {
				t.Fatal(err)
			}
			if err := env.Failover(ctx, e.Topology()); err != nil {
				t.Fatal(err)
			}
			if _, err := env.WaitMaster(ctx, e.Topology(), f.Promoted().ID); err != nil {
				t.Fatal(err)
			}
			if err := f.Check(ctx); !errors.Is(err, nemesis.ErrFailedOverAgain) {
				t.Fatalf("Check after a second failover: %v; want ErrFailedOverAgain", err)
			}
		})
	}
}

// TestPubSubReset: the fault drops a go-redis subscription at a moment
// when Redis refuses SUBSCRIBE, and go-redis never subscribes again: the
// subscriber hears nothing after the heal unless it subscribes anew
// (which a fresh subscriber can: the heal gives SUBSCRIBE back). Commands
// pass throughout. This is the behaviour the fault relies on.
func TestPubSubReset(t *testing.T) {
	p := redistest.Start(t)
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: p.Addr})
	t.Cleanup(func() { _ = c.Close() })
	ps := c.Subscribe(ctx, "ch")
	t.Cleanup(func() { _ = ps.Close() })
	if _, err := ps.Receive(ctx); err != nil { // the confirmation
		t.Fatal(err)
	}
	f := &nemesis.PubSubReset{Node: p.Addr, Every: 200 * time.Millisecond, Refuse: 100 * time.Millisecond}
	r := &rec{}
	if err := nemesis.Apply(ctx, r, f, 500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if ev := f.Evidence(); !ev.Bit || !strings.Contains(ev.Text, "1 pub/sub connections before") {
		t.Errorf("evidence %+v: want a dropped connection of the 1 there was", ev)
	}
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Errorf("a command after the fault: %v", err)
	}
	if n, err := c.Publish(ctx, "ch", "hello").Result(); err != nil || n != 0 {
		t.Errorf("PUBLISH reached %d subscribers (%v): go-redis subscribed again; the fault strands nobody", n, err)
	}
	fresh := c.Subscribe(ctx, "ch")
	t.Cleanup(func() { _ = fresh.Close() })
	if _, err := fresh.Receive(ctx); err != nil {
		t.Fatalf("a fresh SUBSCRIBE after the heal: %v", err)
	}
	if n, err := c.Publish(ctx, "ch", "hello").Result(); err != nil || n != 1 {
		t.Errorf("PUBLISH after a fresh SUBSCRIBE reached %d subscribers (%v), want 1", n, err)
	}
	if len(r.evidences) != 1 || r.evidences[0] == "" {
		t.Errorf("recorded windows %v", r.evidences)
	}
}

// TestForceUnlockTriesTheNextHolder: a force unlock that finds the lock
// free (its holder released between the look and the unlock) unlocks the
// next holder Again finds, and the evidence names that one; without Again
// it says it did not bite. The unlock itself is the lock's: here a DEL.
func TestForceUnlockTriesTheNextHolder(t *testing.T) {
	p := redistest.Start(t)
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: p.Addr})
	t.Cleanup(func() { _ = c.Close() })
	unlock := func(ctx context.Context, kl *nemesis.KeyLoss) (bool, error) {
		n, err := c.Del(ctx, kl.Key).Result()
		return n > 0, err
	}
	first := &nemesis.KeyLoss{Client: "c0", Key: "k", Nodes: []string{p.Addr}}
	// c0 released before the unlock: the key is free. c1 takes it next.
	again := func(context.Context) (*nemesis.KeyLoss, error) {
		if err := c.Set(ctx, "k", "c1", 0).Err(); err != nil {
			return nil, err
		}
		return &nemesis.KeyLoss{Client: "c1", Key: "k", Nodes: []string{p.Addr}}, nil
	}
	f := &nemesis.ForceUnlock{Lock: first, Unlock: unlock, Again: again}
	if err := f.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if ev := f.Evidence(); !ev.Bit || !strings.Contains(ev.Text, "while c1 held it: held true") {
		t.Errorf("evidence %+v: want the next holder, c1, force-unlocked", ev)
	}
	if n, _ := c.Exists(ctx, "k").Result(); n != 0 {
		t.Errorf("the next holder's key is still there")
	}
	once := &nemesis.ForceUnlock{Lock: &nemesis.KeyLoss{Client: "c0", Key: "k", Nodes: []string{p.Addr}}, Unlock: unlock}
	if err := once.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if ev := once.Evidence(); ev.Bit {
		t.Errorf("evidence %+v: a free lock and no Again: want no bite", ev)
	}
	gone := &nemesis.ForceUnlock{Lock: &nemesis.KeyLoss{Client: "c0", Key: "k", Nodes: []string{p.Addr}}, Unlock: unlock,
		Again: func(ctx context.Context) (*nemesis.KeyLoss, error) { return nil, context.DeadlineExceeded }}
	if err := gone.Start(ctx); err != nil || gone.Evidence().Bit {
		t.Errorf("no next holder before the time ran out: %v, %+v; want no error and no bite", err, gone.Evidence())
	}
}
