// Package workload runs lockproof's chaos workload: clients that take a lock
// and do a read-modify-write of a resource under it, every operation recorded
// into a history.
//
// Each client works on one key (Config.Clients clients per key over
// Config.Keys keys) and is one owner of the lock. One critical section is:
//
//	acquire (one-shot, or blocking and maybe canceled while it waits)
//	→ renew? → nested hold (shorter or longer TTL) and its release?
//	→ long work? → read resource → work → check the lease (valid long
//	enough for the write) → (fault point) → write resource with token and
//	prev (skipped when the check found the lease gone) → release (maybe
//	with a canceled or expiring context, then again after a pause)
//
// What the lock tells its holder is recorded too: the validity it claims
// (locker.Claimer) after each ok acquire and renew and after a release
// that left the lease claimed, the instant its loss notice (Lease.Lost)
// fired, on each write that the check before it was made, and (Mix.TTL)
// what the lock's server says of a lease's time left, while held and
// after its release (ttl ops). Each hold has a number of its own
// (history.Op.Hold) on every op about it.
//
// What each section does is drawn from the client's seeded stream in the
// shares of Config.Mix, Jepsen's generator in small: the same seed gives the
// same choices. A choice the lock lacks (no locker.Waiter, no
// locker.Reentrant lease, an unsupported renew) is skipped, so the history
// never shows an operation the lock does not have. All randomness comes
// from Config.Seed, one stream per client, so a run replays from its seed
// up to the timing of the real systems involved.
package workload

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/gate"
	"github.com/lockproof/lockproof/fencing"
	"github.com/lockproof/lockproof/locker"
)

// ErrConfig wraps every error about a bad Config.
var ErrConfig = errors.New("bad workload config")

// Config is the shape of a workload.
type Config struct {
	// Lock is the name of the lock in Locks; required.
	Lock string
	// Locks is the registry Lock is looked up in; required (zoo.Builtin()
	// for lockproof's own locks: the workload imports no registry). A
	// child-process client (Processes) looks its lock up in the registry
	// its program passes to MaybeChild.
	Locks *locker.Registry
	// Mix is the operation mix; nil means DefaultMix().
	Mix *Mix
	// Keys is the number of lock keys (K); default 1.
	Keys int
	// Clients per key (N); default 3.
	Clients int
	// KeyPrefix is put before every key name (keys are KeyPrefix+"k0", ...).
	KeyPrefix string
	// TTL is the lease length asked for; default 500ms.
	TTL time.Duration
	// Hold bounds the random time a holder works between its read and its
	// write; default 20ms.
	Hold time.Duration
	// Think bounds the random time a client waits between two attempts; default 10ms.
	Think time.Duration
	// OpTimeout is the deadline of every operation; default 1s. A timed-out
	// operation is recorded as unknown.
	OpTimeout time.Duration
	// WaitTimeout is the deadline of a blocking acquire when it is longer
	// than OpTimeout (a waiter must wait past the lock's promised bound for
	// the waiter-liveness rule to see a broken promise); default 0.
	WaitTimeout time.Duration
	// Seed seeds all randomness.
	Seed uint64
	// Processes adds that many clients of the first key, each run as a child
	// process (Workload.Procs), which a fault can freeze whole with SIGSTOP.
	// The program must call MaybeChild first thing in main (or TestMain).
	// Child clients use the lock's default options.
	Processes int
	// Deps are the base of every client's locker.Deps (Redis, Redlock,
	// Clock, Observer and Rand are the client's own).
	Deps locker.Deps
	// Replayable gives each client's lock a source of randomness of its
	// own, seeded from Seed and the client (locker.Deps.Rand), so that a
	// lock that draws from it makes the same choices in every run of a
	// seed: a simulation's (package sim). Off, locks draw as they do in
	// production.
	Replayable bool
	// FootprintEvery is how often each key's footprint is sampled during
	// the run, when the lock states a bound (locker.Entry.Footprint) and
	// measures it (locker.Footprinter); it is sampled once more after
	// every client stopped and closed its lock. 0 means
	// DefaultFootprintEvery; negative samples nothing.
	FootprintEvery time.Duration
	// Logger receives progress; nil discards.
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	if c.Lock == "" {
		return c, fmt.Errorf("%w: Lock is required", ErrConfig)
	}
	if c.Locks == nil {
		return c, fmt.Errorf("%w: Locks (the registry Lock is in) is required", ErrConfig)
	}
	if c.Keys == 0 {
		c.Keys = 1
	}
	if c.Clients == 0 {
		c.Clients = 3
	}
	if c.TTL == 0 {
		c.TTL = 500 * time.Millisecond
	}
	if c.Hold == 0 {
		c.Hold = 20 * time.Millisecond
	}
	if c.Think == 0 {
		c.Think = 10 * time.Millisecond
	}
	if c.OpTimeout == 0 {
		c.OpTimeout = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Mix == nil {
		m := DefaultMix()
		c.Mix = &m
	}
	if err := c.Mix.validate(); err != nil {
		return c, err
	}
	switch {
	case c.Keys < 0:
		return c, fmt.Errorf("%w: Keys = %d: must be > 0", ErrConfig, c.Keys)
	case c.Clients < 0:
		return c, fmt.Errorf("%w: Clients = %d: must be > 0", ErrConfig, c.Clients)
	case c.TTL < time.Millisecond:
		return c, fmt.Errorf("%w: TTL = %v: must be at least 1ms", ErrConfig, c.TTL)
	case c.Hold < 0 || c.Think < 0 || c.OpTimeout < 0 || c.WaitTimeout < 0:
		return c, fmt.Errorf("%w: Hold, Think, OpTimeout and WaitTimeout must be >= 0", ErrConfig)
	}
	return c, nil
}

// FencedReader is a resource whose reads carry the reader's token: a read
// with a stale token is refused (fencing.ErrStaleToken) and an accepted one
// raises the resource's fence to its token, so that a holder whose lease
// passed to another cannot write after the new holder read. The workload
// reads through it when the resource has it and the lease has a token.
type FencedReader interface {
	ReadFenced(ctx context.Context, key string, token uint64, owner string) (fencing.Value, error)
}

// Workload is a set of clients on one environment.
type Workload struct {
	cfg     Config
	Clients []*Client
	// Procs are the clients run as child processes (Config.Processes).
	Procs []*Proc
}

// New makes the clients of cfg on e: per client its own proxies (env.Links),
// a gate on every Redis command it sends, a lock opened through
// Config.Locks, and a resource on the fenced node: fenced for leases with a
// fencing token, unfenced for leases without. Close releases them.
func New(ctx context.Context, e env.Env, cfg Config) (*Workload, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	w := &Workload{cfg: cfg}
	topo := e.Topology()
	if topo.StoreKind != "" && cfg.Processes > 0 {
		// A child process reaches Redis along a route it is given; a
		// lock on a consensus store opens its own client in-process.
		return nil, fmt.Errorf("%w: Processes: the clients of a lock on the %s store run in-process", ErrConfig, topo.StoreKind)
	}
	for k := 0; k < cfg.Keys; k++ {
		for i := 0; i < cfg.Clients; i++ {
			name := fmt.Sprintf("c%d-%d", k, i)
			c, err := w.newClient(ctx, e, topo, name, fmt.Sprintf("%sk%d", cfg.KeyPrefix, k), uint64(k*cfg.Clients+i))
			if err != nil {
				_ = w.Close()
				return nil, err
			}
			w.Clients = append(w.Clients, c)
		}
	}
	for i := 0; i < cfg.Processes; i++ {
		p, err := w.newProc(ctx, e, topo, fmt.Sprintf("p%d", i), cfg.KeyPrefix+"k0", uint64(cfg.Keys*cfg.Clients+i))
		if err != nil {
			_ = w.Close()
			return nil, err
		}
		w.Procs = append(w.Procs, p)
	}
	return w, nil
}

// NewOn makes the clients of cfg on nodes reached through the dialer
// dialFor gives each client (by name), without proxies or Sentinel:
// master holds the locks, fenced the resources, and redlock are the
// independent masters of a lock that needs them (locker.Needs.Redlock;
// addresses the dialers understand). It is the workload of a
// simulation, whose nodes are in-process and whose network is its own
// (a dialer per client lets it cut and draw per client). Processes are
// not supported. Close releases the clients.
func NewOn(cfg Config, dialFor func(client string) func(ctx context.Context, network, addr string) (net.Conn, error), master, fenced string, redlock ...string) (*Workload, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.Processes > 0 {
		return nil, fmt.Errorf("%w: Processes: a workload on in-process nodes runs no child process", ErrConfig)
	}
	w := &Workload{cfg: cfg}
	for k := 0; k < cfg.Keys; k++ {
		for i := 0; i < cfg.Clients; i++ {
			name := fmt.Sprintf("c%d-%d", k, i)
			rt := route{Dial: dialFor(name), Master: master, Fenced: fenced, Redlock: redlock, InProcess: true}
			c, err := w.build(name, fmt.Sprintf("%sk%d", cfg.KeyPrefix, k), uint64(k*cfg.Clients+i), rt)
			if err != nil {
				_ = w.Close()
				return nil, err
			}
			w.Clients = append(w.Clients, c)
		}
	}
	return w, nil
}

// Close closes every client and deletes their proxies. A crashed client's
// gate stays crashed; paused gates are resumed first so nothing stays held.
func (w *Workload) Close() error {
	var errs []error
	for _, p := range w.Procs {
		if err := p.close(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, c := range w.Clients {
		c.Gate.Resume()
		if err := c.close(); err != nil && !errors.Is(err, gate.ErrCrashed) && !errors.Is(err, redis.ErrClosed) {
			errs = append(errs, fmt.Errorf("close client %s: %w", c.Name, err))
		}
	}
	return errors.Join(errs...)
}
