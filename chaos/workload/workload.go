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
// (history.Op.Lease) on every op about it.
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
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/gate"
	"github.com/lockproof/lockproof/fencing"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/internal/proc"
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

// Mix is the share of each choice a client makes per critical section,
// each a probability in [0, 1] drawn from the client's seeded stream.
type Mix struct {
	// Blocking: acquires that wait (locker.Waiter) instead of one attempt.
	Blocking float64
	// Cancel: blocking acquires given a deadline of half the TTL instead of
	// the op timeout, so that they are canceled while they wait in line.
	Cancel float64
	// Reenter: sections that take a nested hold (locker.Reentrant) and
	// release it before the read; two in three ask for a TTL a fifth of
	// the lease's (at least 10ms), one in three for twice it. The outer
	// hold then works on for up to half the TTL.
	Reenter float64
	// Renew: sections that renew the lease explicitly after the acquire.
	Renew float64
	// LongWork: sections without a nested hold that work up to half the
	// TTL before the read (a lease must stay valid that long).
	LongWork float64
	// RushRelease: releases, outer and nested, sent with an already
	// canceled context (half) or a 5ms deadline (half); a release that
	// did not surely happen is sent again with the op timeout, as a
	// careful caller retries.
	RushRelease float64
	// Owner: sections that acquire as the client's own owner
	// (locker.Owned: one owner per client, kept across its holds), with
	// a blocking or a one-shot acquire as the other shares say. When such
	// a holder finds its lease gone at its check before the write, it
	// acquires again as the same owner before it releases the lost lease,
	// as code that defers a release and retries does: the lost lease's
	// release must not free the newer hold.
	Owner float64
	// Leave: sections after whose acquire the client leaves for good,
	// holding: it closes its Locker (watchdogs stop, leases stay until
	// they expire) and stops. Default 0: a fault that waits for a client
	// to hold or wait in line needs the clients to stay.
	// CloseWaiting: sections after whose acquire the client shuts down
	// for good while another of its goroutines waits in line behind its
	// hold (a blocking acquire of its own, half of them without the
	// watchdog when the lock can, locker.Unwatched): it closes its
	// Locker, releases its hold, waits for the waiter and stops
	// (Workload.shutDown). The release hands the lock on, to the waiter
	// when it is first in line: after Close, which a lock that promises
	// it must refuse (the calls property). Drawn from the side stream
	// (only by a lock with a blocking acquire); default 0, as Leave.
	CloseWaiting float64
	Leave        float64
	// Context: holds whose holder, as code that runs its work in the
	// lease's context does, watches and checks the lease's Context
	// (locker.Contexter) instead of Lost: told of a loss when it is
	// canceled (the loss notice), and writing only while it is live. A
	// lock that closes Lost but leaves Context live then shows.
	Context float64
	// Twice: of the blocking acquires as the client's owner, those
	// beside which the owner waits a second time at once, on the same key
	// from another goroutine, as two goroutines of one service sharing an
	// owner id do. Each wait has its own place in line (a lock whose
	// places are per owner lets a place left behind jump the line later),
	// and the second, once granted, works briefly and releases, whatever
	// the first does meanwhile (a lock whose hand-offs are per owner lets
	// it take the one given at the first wait's place, and the first
	// falls behind the next client).
	Twice float64
	// Inspect: of the sections of a lock that tells who holds a key
	// (locker.Inspector), those that ask it, before the acquire and again
	// while holding (and, as the client's owner, its hold count), as
	// operators and code checking isHeldByThread do; the lease property
	// holds the answers to the history.
	Inspect float64
	// Concurrent: of the releases in a section (a nested hold's and the
	// lease's), those beside which a second call on the same lease runs
	// at once from another goroutine, as two paths of one program do (a
	// deferred release and an error path; a renewal loop and the code
	// that is done): half a second Release, half a Renew. At most one
	// Release ends the hold; the other must say it did not (a lock whose
	// second release ends another hold of the owner, a nested lease's
	// outer one, frees the key under a valid lease: the lease and claims
	// properties).
	Concurrent float64
	// TTL: of the sections of a lock whose leases ask its server how long
	// they are still valid (locker.ServerClaimer: package lock's TTLLeft,
	// bsm/redislock's TTL), those that ask, as code checking its lock
	// does: the lease once acquired, a nested hold while held and again
	// after its release (with its outer lease), and the lease after its
	// release; an ask after a release is made only when the release
	// succeeded. Each answer is recorded (a ttl op) and judged as a claim
	// (the claims property): a released lease said to be valid is a false
	// claim. Drawn from the side stream; default 0, so that the saved
	// seeds replay as they were.
	TTL float64
	// Retry: of the blocking acquires not as the client's owner, of a
	// lock that can retry one-shot attempts (locker.Retrier), those that
	// do so instead of waiting in line, chosen by the section's number
	// in quarters (no draw: 0.25, the default, is one in four, as before
	// the share existed; 1 is every one). The shipped lock's adapter
	// gives every other such call a strategy that gives up as package
	// lock's example does.
	Retry float64

	_ struct{}
}

// DefaultMix is the mix `go test ./chaos` and `lockproof run` use.
func DefaultMix() Mix {
	return Mix{Blocking: 0.5, Cancel: 0.2, Reenter: 0.4, Renew: 0.2, LongWork: 0.15, RushRelease: 0.1, Owner: 0.3, Context: 0.3, Twice: 0.2, Inspect: 0.2,
		Concurrent: 0.15, Retry: 0.25}
}

// share is one choice of a Mix by its name (the CLI's --mix).
type share struct {
	name string
	p    *float64
}

func (m *Mix) shares() []share {
	return []share{{"blocking", &m.Blocking}, {"cancel", &m.Cancel}, {"reenter", &m.Reenter}, {"renew", &m.Renew},
		{"long-work", &m.LongWork}, {"rush-release", &m.RushRelease}, {"owner", &m.Owner}, {"leave", &m.Leave}, {"close-waiting", &m.CloseWaiting}, {"context", &m.Context},
		{"twice", &m.Twice}, {"inspect", &m.Inspect}, {"concurrent", &m.Concurrent}, {"ttl", &m.TTL}, {"retry", &m.Retry}}
}

func (m *Mix) validate() error {
	for _, sh := range m.shares() {
		if !(*sh.p >= 0 && *sh.p <= 1) {
			return fmt.Errorf("%w: mix %s = %v: must be in [0, 1]", ErrConfig, sh.name, *sh.p)
		}
	}
	return nil
}

// String is the mix as ParseMix reads it: "blocking=0.5,cancel=0.2,...".
func (m Mix) String() string {
	var parts []string
	for _, sh := range m.shares() {
		parts = append(parts, sh.name+"="+strconv.FormatFloat(*sh.p, 'g', -1, 64))
	}
	return strings.Join(parts, ",")
}

// ParseMix reads "name=share,..." (the names of Mix.String) over
// DefaultMix: the choices not named keep their default share.
func ParseMix(s string) (Mix, error) {
	m := DefaultMix()
	if strings.TrimSpace(s) == "" {
		return m, nil
	}
	for _, part := range strings.Split(s, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		var target *float64
		for _, sh := range m.shares() {
			if sh.name == name {
				target = sh.p
			}
		}
		if !ok || target == nil {
			return m, fmt.Errorf("%w: mix %q: want name=share with name one of %s", ErrConfig, part, m.String())
		}
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			return m, fmt.Errorf("%w: mix %s=%q: not a number", ErrConfig, name, val)
		}
		*target = v
	}
	return m, m.validate()
}

// Client is one workload client: its own proxies, gate, clock, Redis
// clients, lock and resource.
type Client struct {
	Name  string
	Key   string
	Links *env.Links
	Gate  *gate.Gate
	Clock *gate.Clock

	lockRDB  redis.UniversalClient
	resRDB   *redis.Client
	redlock  []*redis.Client
	locker   locker.Locker
	fenced   fencing.Resource // for leases with a fencing token
	unfenced fencing.Resource // for leases without one
	rng      *rand.Rand
	// side is a second stream, for the choices added after seeds were
	// saved (Mix.Concurrent): drawing them from rng would shift every
	// later draw of a saved seed, and the finding it was saved for.
	side    *rand.Rand
	holding atomic.Bool
	working atomic.Bool                // between its read and its lease check (Working)
	held    chan struct{}              // signalled (non-blocking) when the client holds with its write ahead
	waiting atomic.Bool                // a blocking acquire is in line (see FirstQueued)
	invoked atomic.Pointer[history.Op] // the lock op in flight, as invoked
	// onQueued, when set (a child process), is told when the client starts
	// and stops waiting in line, with the blocking acquire as invoked.
	onQueued func(op *history.Op, waiting bool)
	// onHolding, when set (a child process), is told when the client
	// starts and stops holding with its write ahead (Holding).
	onHolding func(holding bool)
	stopped   atomic.Bool
	rec       atomic.Pointer[history.Recorder] // set by Run: where background renewals are recorded
	holds     uint64                           // the last hold number given (history.Op.Lease)
	watchers  sync.WaitGroup                   // loss-notice watchers (watchLoss)
	gone      chan struct{}                    // closed when the client leaves for good (Mix.Leave)
	// ctxTimeouts: the client's go-redis clients honour ctx deadlines (CtxTimeouts).
	ctxTimeouts bool
}

// Working reports whether the client holds its lock and works on what it
// read, before its lease check (a key lost now leaves a holder that only
// its lock's loss notice can warn).
func (c *Client) Working() bool { return c.working.Load() }

// Locker is the client's lock (an operator's fault may use it: a force
// unlock goes through the lock's own API).
func (c *Client) Locker() locker.Locker { return c.locker }

// setHolding marks the client holding with its write ahead, or not, and
// tells whoever waits for it (WaitHolding, the parent of a child process).
func (c *Client) setHolding(h bool) {
	if c.holding.Swap(h) == h {
		return
	}
	if h {
		select {
		case c.held <- struct{}{}:
		default:
		}
	}
	if c.onHolding != nil {
		c.onHolding(h)
	}
}

// Holding reports whether the client holds its lock with its write ahead
// (between its lease check and its write's command).
func (c *Client) Holding() bool { return c.holding.Load() }

// CanWait reports whether the client's lock has a blocking acquire
// (locker.Waiter): only then can it be caught waiting in line.
func (c *Client) CanWait() bool {
	_, ok := c.locker.(locker.Waiter)
	return ok
}

// FirstQueued waits until one of cs waits in line in a blocking acquire
// (one that has not returned after queuedAfter: its first attempt found the
// lock taken) and returns it, bounded by ctx: a crash that strikes then
// leaves a dead waiter in the lock's queue.
func FirstQueued(ctx context.Context, cs []*Client) (*Client, error) {
	return firstOf(ctx, cs, "queue", func(c *Client) bool { return c.waiting.Load() })
}

// FirstHolding waits until one of cs holds its lock with its write ahead
// (Holding) and returns it, bounded by ctx.
func FirstHolding(ctx context.Context, cs []*Client) (*Client, error) {
	return firstOf(ctx, cs, "hold", (*Client).Holding)
}

// firstOf waits until one of cs that has not crashed is as it says (what
// it waits for, to do) and returns it, bounded by ctx.
func firstOf(ctx context.Context, cs []*Client, to string, is func(*Client) bool) (*Client, error) {
	var found *Client
	err := poll(ctx, func() bool {
		for _, c := range cs {
			if is(c) && !c.Gate.Crashed() {
				found = c
				return true
			}
		}
		return false
	})
	if err != nil {
		return nil, fmt.Errorf("wait for one of %d clients to %s: %w", len(cs), to, err)
	}
	return found, nil
}

// CtxTimeouts reports whether the client's go-redis clients honour ctx
// deadlines (ContextTimeoutEnabled); every other client's do not, and only
// their read timeouts bound a call that does not honour its own ctx.
func (c *Client) CtxTimeouts() bool { return c.ctxTimeouts }

// poll checks ready every 2ms until it holds (nil) or ctx is done (its
// error): for flags that other goroutines set without a signal.
func poll(ctx context.Context, ready func() bool) error {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for !ready() {
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// queuedAfter is how long a blocking acquire runs before the client counts
// as waiting in line: its first attempt (one round trip) is over by then.
const queuedAfter = 20 * time.Millisecond

// Stopped reports whether the client's worker ended (crashed, or done).
func (c *Client) Stopped() bool { return c.stopped.Load() }

// WaitHolding waits until the client holds its lock with its resource write
// still ahead (between its lease check and its write), bounded by ctx: a pause or
// crash that strikes then leaves a holder whose late write must be refused.
func (c *Client) WaitHolding(ctx context.Context) error {
	for {
		if c.Holding() {
			return nil
		}
		select {
		case <-c.held:
		case <-ctx.Done():
			return fmt.Errorf("wait for %s to hold %q: %w", c.Name, c.Key, ctx.Err())
		}
	}
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

// inProcessPool is the connection pool of a client of in-process nodes
// (route.InProcess).
const inProcessPool = 4096

// route says how one client reaches the topology.
type route struct {
	// InProcess: the nodes are in-process (NewOn, the simulation): the
	// clients' connection pools are sized never to make a command wait
	// for a connection (inProcessPool).
	InProcess  bool                                                              `json:"-"`
	Dial       func(ctx context.Context, network, addr string) (net.Conn, error) `json:"-"`
	MasterName string
	Sentinels  []string
	// Master is the lock's Redis when there is no Sentinel (MasterName
	// ""): a node reached directly (NewOn).
	Master string
	// Cluster are the seeds of a Redis Cluster (the nodes' announced
	// addresses, which Dial maps to the client's proxies): the lock's
	// Redis is then a cluster client.
	Cluster []string `json:",omitempty"`
	// Store and StoreAddrs are a consensus store's kind and its members'
	// addresses (which Dial maps to the client's proxies): the lock's
	// deployment is then that store (locker.Deps.Store), not Redis.
	Store      string   `json:",omitempty"`
	StoreAddrs []string `json:",omitempty"`
	Fenced     string   // address of the client's proxy to the fenced node
	Redlock    []string // addresses of the client's proxies to the Redlock nodes
	// Auth is how the client logs in (the topology's): passed to a child
	// process in its spec, never printed (env.Secret).
	Auth env.Auth `json:",omitzero"`
	// Servers maps the Fenced and Redlock proxies' addresses to the
	// servers' own, for TLS: a certificate names the server, not the
	// proxy in front of it.
	Servers map[string]string `json:",omitempty"`
}

// server is the address of the server that the connection to addr
// reaches (Servers), for TLS's server name.
func (r route) server(addr string) string {
	if s, ok := r.Servers[addr]; ok {
		return s
	}
	return addr
}

// routeOf returns the route of the client that owns l.
func routeOf(topo env.Topology, l *env.Links) (route, error) {
	r := route{Dial: l.Dial, MasterName: topo.MasterName, Sentinels: topo.Sentinels, Cluster: topo.ClusterAddrs(),
		Store: topo.StoreKind, StoreAddrs: topo.StoreAddrs(), Auth: topo.Auth, Servers: map[string]string{}}
	if r.MasterName == "" && len(r.Cluster) == 0 && len(topo.Data) > 0 {
		// A lone master without Sentinels (a bring-your-own one): its
		// address, which l.Dial maps to the client's proxy.
		r.Master = topo.Data[0].Addr
	}
	var err error
	if r.Fenced, err = l.Addr(topo.Fenced.ID); err != nil {
		return r, err
	}
	r.Servers[r.Fenced] = topo.Fenced.Upstream
	for _, n := range topo.Redlock {
		a, err := l.Addr(n.ID)
		if err != nil {
			return r, err
		}
		r.Redlock = append(r.Redlock, a)
		r.Servers[a] = n.Upstream
	}
	return r, nil
}

func (w *Workload) newClient(ctx context.Context, e env.Env, topo env.Topology, name, key string, idx uint64) (*Client, error) {
	l, err := env.NewLinks(ctx, e, w.cfg.KeyPrefix+name)
	if err != nil {
		return nil, err
	}
	rt, err := routeOf(topo, l)
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	c, err := w.build(name, key, idx, rt)
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	c.Links = l
	return c, nil
}

// build makes a client that reaches Redis along rt.
func (w *Workload) build(name, key string, idx uint64, rt route) (*Client, error) {
	var err error
	c := &Client{Name: name, Key: key, Gate: gate.New(), Clock: &gate.Clock{},
		rng: rand.New(rand.NewPCG(w.cfg.Seed, idx)), side: rand.New(rand.NewPCG(w.cfg.Seed, idx^sideStream)), held: make(chan struct{}, 1), gone: make(chan struct{})}
	to := w.cfg.OpTimeout
	// go-redis keeps the timers of commands that wait for a pooled
	// connection in a process-wide sync.Pool: in the simulation a timer
	// made in one run's synctest bubble was reused in the next run's,
	// and the process died ("select on synctest channel from outside
	// bubble") once the lock's cleanups had every connection busy. A pool
	// that never runs dry never takes that path.
	pool := 0 // go-redis's default
	if rt.InProcess {
		pool = inProcessPool
	}
	// Every other client's go-redis ignores ctx deadlines (its read
	// timeout alone bounds a call), as many users' clients do: a lock, or
	// a resource, must then honour ctx itself.
	ctxTimeouts := idx%2 == 0
	c.ctxTimeouts = ctxTimeouts
	// Every link dials through its proxy with the deployment's TLS: a
	// go-redis client given a Dialer applies no TLSConfig of its own.
	lockDial := rt.Auth.Dialer(rt.Dial, nil)
	a := rt.Auth
	switch {
	case rt.Store != "":
		// The lock's deployment is a consensus store: the lock opens its
		// own client of it (Deps.Store), dialling through the client's
		// proxies and its gate.
	case len(rt.Cluster) > 0:
		// go-redis's defaults for redirections (MOVED and ASK are
		// followed, up to 3 times), as a user's cluster client has them:
		// it resends a command whose connection failed, so a script's
		// outcome is unknown to the lock then (package locker's rule).
		c.lockRDB = redis.NewClusterClient(a.LoginCluster(&redis.ClusterOptions{
			Addrs: rt.Cluster, Dialer: lockDial,
			DialTimeout: to, ReadTimeout: to, WriteTimeout: to, PoolTimeout: to, PoolSize: pool,
			MaxRetries: -1, ContextTimeoutEnabled: ctxTimeouts, Protocol: 2,
		}))
	case rt.MasterName != "":
		c.lockRDB = redis.NewFailoverClient(a.LoginFailover(&redis.FailoverOptions{
			MasterName: rt.MasterName, SentinelAddrs: rt.Sentinels, Dialer: lockDial,
			DialTimeout: to, ReadTimeout: to, WriteTimeout: to, PoolTimeout: to, PoolSize: pool,
			MaxRetries: -1, ContextTimeoutEnabled: ctxTimeouts, Protocol: 2,
		}))
	default:
		c.lockRDB = redis.NewClient(a.Login(&redis.Options{Addr: rt.Master, Dialer: lockDial,
			DialTimeout: to, ReadTimeout: to, WriteTimeout: to, PoolTimeout: to, PoolSize: pool,
			MaxRetries: -1, ContextTimeoutEnabled: ctxTimeouts, Protocol: 2}))
	}
	if c.lockRDB != nil {
		c.lockRDB.AddHook(c.Gate.Hook())
	}
	// The resource's go-redis, when it ignores ctx deadlines, reads for
	// three op timeouts (go-redis's default is 3s): a resource that does
	// not honour ctx itself then returns late, which the calls property
	// sees (package fencing's review defect 9).
	resRead := to
	if !ctxTimeouts {
		resRead = 3 * to
	}
	var resDial func(ctx context.Context, network, addr string) (net.Conn, error) // rt.Fenced is the client's own proxy
	if rt.MasterName == "" && len(rt.Cluster) == 0 {
		resDial = rt.Dial // in-process nodes (NewOn)
	}
	resDial = a.Dialer(resDial, rt.server)
	c.resRDB = redis.NewClient(a.Login(&redis.Options{Addr: rt.Fenced, Dialer: resDial, DialTimeout: to, ReadTimeout: resRead, WriteTimeout: to,
		PoolTimeout: to, PoolSize: pool, MaxRetries: -1, ContextTimeoutEnabled: ctxTimeouts, Protocol: 2}))
	c.resRDB.AddHook(c.Gate.Hook())
	deps := w.cfg.Deps
	if c.lockRDB != nil {
		deps.Redis = c.lockRDB
	}
	if rt.Store != "" {
		// The store's own login and TLS (Auth's Store fields), not the
		// Redis servers': a BYO store's credentials reach its traffic.
		stls, err := a.StoreTLSConfig()
		if err != nil {
			c.close()
			return nil, fmt.Errorf("client %s: %w: store TLS: %w", name, ErrConfig, err)
		}
		deps.Store = locker.Store{Kind: rt.Store, Endpoints: rt.StoreAddrs, Dial: c.Gate.Dialer(gate.DialFunc(rt.Dial)),
			Username: a.StoreUsername, Password: string(a.StorePassword), TLS: stls}
	}
	for _, addr := range rt.Redlock {
		r := redis.NewClient(a.Login(&redis.Options{Addr: addr, Dialer: resDial, DialTimeout: to, ReadTimeout: to, WriteTimeout: to,
			PoolTimeout: to, PoolSize: pool, MaxRetries: -1, ContextTimeoutEnabled: ctxTimeouts, Protocol: 2}))
		r.AddHook(c.Gate.Hook())
		c.redlock = append(c.redlock, r)
		deps.Redlock = append(deps.Redlock, r)
	}
	deps.Clock = c.Clock.Now
	deps.Client = name
	deps.Observer = renewObserver{c}
	if w.cfg.Replayable {
		deps.Rand = rand.NewPCG(w.cfg.Seed, 0x10c4<<32|idx)
	}
	if deps.Logger == nil {
		deps.Logger = w.cfg.Logger
	}
	if c.locker, err = w.cfg.Locks.Open(w.cfg.Lock, deps); err != nil {
		c.close()
		return nil, fmt.Errorf("client %s: %w", name, err)
	}
	if p, ok := c.locker.(locker.Process); ok {
		c.Gate.Follow(processFollower{p})
	}
	if c.fenced, c.unfenced, err = w.resources(c.resRDB); err != nil {
		c.close()
		return nil, fmt.Errorf("client %s: %w", name, err)
	}
	return c, nil
}

// processFollower makes a lock's own process (locker.Process) follow its
// client's gate: whatever pauses the client freezes the process with
// SIGSTOP, a resume thaws it, a crash kills it. The workload's own part of
// the client (its lease check and resource writes) stops at the gate as
// for any lock, so the whole client stops, its lock's runtime included.
type processFollower struct{ p locker.Process }

func (f processFollower) signal(send func(int) error) {
	if pid := f.p.Pid(); pid != 0 {
		_ = send(pid) // a process that has exited needs nothing
	}
}

func (f processFollower) Paused()  { f.signal(proc.StopGroup) }
func (f processFollower) Resumed() { f.signal(proc.ContGroup) }
func (f processFollower) Crashed() { f.signal(proc.KillGroup) }

// resourcePrefix is put before every resource key the workload writes.
const resourcePrefix = "res:"

// resources builds a client's resources on rdb: the lock's own
// (locker.Entry.Resources), or else package fencing's.
func (w *Workload) resources(rdb redis.UniversalClient) (fenced, unfenced fencing.Resource, err error) {
	if e, ok := w.cfg.Locks.Lookup(w.cfg.Lock); ok && e.Resources != nil {
		return e.Resources(rdb, resourcePrefix)
	}
	if fenced, err = fencing.NewRedis(rdb, fencing.RedisOptions{Prefix: resourcePrefix}); err != nil {
		return nil, nil, err
	}
	if unfenced, err = fencing.NewUnfencedRedis(rdb, fencing.RedisOptions{Prefix: resourcePrefix}); err != nil {
		return nil, nil, err
	}
	return fenced, unfenced, nil
}

func (c *Client) close() error {
	var errs []error
	if c.locker != nil {
		errs = append(errs, c.locker.Close())
	}
	if c.lockRDB != nil {
		errs = append(errs, c.lockRDB.Close())
	}
	if c.resRDB != nil {
		errs = append(errs, c.resRDB.Close())
	}
	for _, r := range c.redlock {
		errs = append(errs, r.Close())
	}
	if c.Links != nil {
		errs = append(errs, c.Links.Close())
	}
	return errors.Join(errs...)
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

// Run runs every client until ctx is done, recording into rec. It returns
// when all workers have stopped (a crashed client stops at once, leaving its
// operation in flight). Operations in flight when ctx ends complete on their
// own deadlines and are recorded.
func (w *Workload) Run(ctx context.Context, rec *history.Recorder) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(w.Clients)+len(w.Procs))
	for _, p := range w.Procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.run(ctx, rec); err != nil {
				errs <- fmt.Errorf("process client %s: %w", p.Name, err)
			}
		}()
	}
	sampling := w.footprinting()
	var sampler sync.WaitGroup
	sctx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	if sampling {
		sampler.Go(func() { w.sampleFootprints(sctx, rec) })
	}
	if !w.cfg.Replayable {
		// Real time: the stalls of this process are its clients' pauses
		// that nobody injected (watchStalls); the child processes watch
		// their own.
		names := make([]string, len(w.Clients))
		for i, c := range w.Clients {
			names[i] = c.Name
		}
		defer watchStalls(ctx, rec, names)()
	}
	for _, c := range w.Clients {
		c.rec.Store(rec)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.stopped.Store(true)
			if err := w.worker(ctx, rec, c); err != nil {
				errs <- fmt.Errorf("client %s: %w", c.Name, err)
			}
		}()
	}
	wg.Wait()
	for _, c := range w.Clients {
		c.watchers.Wait()
	}
	stopSampling()
	sampler.Wait()
	if sampling {
		w.settleFootprints(rec)
	}
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// errStop ends a worker without error (its client crashed).
var errStop = errors.New("client stopped")

func (w *Workload) worker(ctx context.Context, rec *history.Recorder, c *Client) error {
	seq := 0
	for ctx.Err() == nil {
		if err := sleepRand(ctx, c.rng, w.cfg.Think); err != nil {
			return nil
		}
		if err := c.Gate.Wait(ctx); err != nil {
			return nil // crashed
		}
		seq++
		err := w.section(ctx, rec, c, seq)
		if errors.Is(err, errStop) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// recording is c's recording wrapper over rec.
func (c *Client) recording(rec *history.Recorder) recording {
	return recording{rec: rec, gate: c.Gate, invoked: &c.invoked}
}

// inspect asks the lock who holds the key and records it (an inspect op)
// and, as owner when owner is set, how many holds that owner has (a holds
// op).
func (c *Client) inspect(ctx context.Context, rec *history.Recorder, insp locker.Inspector, owner string, timeout time.Duration) error {
	var in locker.Inspection
	op := history.Op{Client: c.Name, Kind: history.Inspect, Key: c.Key}
	if _, err := c.recording(rec).lockEdit(ctx, op, ctxNormal, timeout, func(ctx context.Context) (err error) {
		in, err = insp.Inspect(ctx, c.Key)
		return err
	}, func(o *history.Op, res history.Result) {
		if res != history.OK || !in.Held {
			return
		}
		o.Held, o.Holder = true, in.Holder
		if in.HasFence {
			o.Token, o.HasToken = in.Fence, true
		}
		if in.HasHolds {
			o.HoldCount, o.HasHolds = max(in.Holds, 0), true
		}
	}); err != nil || owner == "" {
		return err
	}
	var n int64
	op = history.Op{Client: c.Name, Kind: history.Holds, Key: c.Key}
	_, err := c.recording(rec).lockEdit(ctx, op, ctxNormal, timeout, func(ctx context.Context) (err error) {
		n, err = insp.HoldsOf(ctx, c.Key, owner)
		return err
	}, func(o *history.Op, res history.Result) {
		if res == history.OK {
			o.HoldCount, o.HasHolds = max(n, 0), true
		}
	})
	return err
}

// chance draws one choice of share p from c's stream.
func (c *Client) chance(p float64) bool { return p > 0 && c.rng.Float64() < p }

// beside draws the second call made beside a release (Mix.Concurrent):
// besideNone, besideRelease or besideRenew, from the side stream.
func (c *Client) beside(m *Mix) int {
	if !(m.Concurrent > 0 && c.side.Float64() < m.Concurrent) {
		return besideNone
	}
	return besideRelease + c.side.IntN(2)
}

// sideStream marks a client's side stream apart from its main one.
const sideStream = 1 << 40

// waitTwice starts a second blocking acquire as the client's owner, on its
// key, in a goroutine of its own (Mix.Twice), recorded with a hold number
// of its own, which releases what it got after a brief section; join
// waits for it. The goroutine draws nothing from the client's stream, so
// the seed's draws stay the main flow's.
func (c *Client) waitTwice(ctx context.Context, rec *history.Recorder, owned locker.Owned, ttl, opTimeout, timeout time.Duration) (join func() error) {
	op := history.Op{Client: c.Name, Kind: history.Acquire, Key: c.Key, TTLMillis: ttl.Milliseconds(), Wait: true, Lease: c.nextHold()}
	var inLine func()
	var inLineAt atomic.Int64
	if _, ok := c.locker.(locker.InLine); ok {
		inLine = func() { inLineAt.Store(max(rec.Now(), 1)) }
	}
	var lease locker.Lease
	done := make(chan error, 1)
	go func() {
		// A moment after the first wait, of its own (by the hold number:
		// no draw): two goroutines acting at one virtual instant run in
		// an order Go does not fix, and a seed would not replay.
		_ = sleepFor(ctx, time.Duration(op.Lease%89+1)*time.Microsecond)
		// Not c.recording: its in-flight op is the main flow's.
		res, err := recording{rec: rec, gate: c.Gate}.lockEdit(ctx, op, ctxNormal, timeout, func(ctx context.Context) error {
			var err error
			lease, err = owned.AcquireAs(ctx, c.Key, ttl, c.owner(), true, inLine)
			return err
		}, c.learnt(rec, &inLineAt, &lease))
		if err == nil && res == history.OK {
			// Its loss notice is watched from the grant on, as the first
			// hold's is: the checker holds every live hold to the lock's
			// loss bound (a seed whose key was lost under this hold once
			// found it unwatched, its notice never recorded).
			h := held{lease: lease, id: op.Lease}
			h.released = c.watchLoss(ctx, rec, h)
			// A brief section of its own, then its release, whatever the
			// first wait does meanwhile, as a goroutine of its own does:
			// a lock that lets this wait pick up the hand-off given at
			// the first wait's place, the first still on its way to it,
			// hands the lock on to the next client when this one
			// releases, past the first wait (tla/LockLine.tla, anycall).
			_ = sleepFor(ctx, time.Duration(op.Lease%7)*time.Millisecond)
			err = c.release(ctx, rec, h, false, opTimeout)
		}
		done <- err
	}()
	return func() error { return <-done }
}

// learnt records on an acquire's op what the call learnt: when it was
// surely in line (inLineAt, 0: not said), and for a grant its token and
// the validity its lock claims.
func (c *Client) learnt(rec *history.Recorder, inLineAt *atomic.Int64, lease *locker.Lease) func(o *history.Op, res history.Result) {
	return func(o *history.Op, res history.Result) {
		if t := inLineAt.Load(); t != 0 {
			o.InLine, o.HasInLine = min(max(t, o.Call), o.Return), true
		}
		if res == history.OK {
			o.Token, o.HasToken = (*lease).Fence()
			c.claim(rec, o, *lease)
		}
	}
}

// leave is a client going away while it holds: it closes its lock
// (closeLocker), and then one of its goroutines that did not
// hear of the shutdown makes one more attempt on the closed lock, as code
// racing a shutdown does (a blocking one, when the lock has it). A lock
// that promises it refuses that attempt
// (locker.CallContract.CloseRefuses; package lock's review defect 10: the
// old lock granted it, without the watchdog asked for). A lease the
// attempt got anyway is released.
func (w *Workload) leave(ctx context.Context, rec *history.Recorder, c *Client) error {
	cfg := w.cfg
	if err := w.closeLocker(ctx, rec, c, "leave"); err != nil {
		return err
	}
	// It waits, when the lock can: the lease the client left with is still
	// held, and a single attempt would be refused for that alone.
	var l locker.Lease
	acq := history.Op{Client: c.Name, Kind: history.Acquire, Key: c.Key, TTLMillis: cfg.TTL.Milliseconds(), Lease: c.nextHold()}
	try, timeout := func(ctx context.Context) (locker.Lease, error) { return c.locker.TryAcquire(ctx, c.Key, cfg.TTL) }, cfg.OpTimeout
	if waiter, ok := c.locker.(locker.Waiter); ok {
		acq.Wait, timeout = true, max(cfg.OpTimeout, cfg.WaitTimeout)
		try = func(ctx context.Context) (locker.Lease, error) { return waiter.Acquire(ctx, c.Key, cfg.TTL) }
	}
	res, err := c.recording(rec).lock(ctx, acq, ctxNormal, timeout, func(ctx context.Context) error {
		var err error
		l, err = try(ctx)
		return err
	}, func(o *history.Op) {
		o.Token, o.HasToken = l.Fence()
		c.claim(rec, o, l)
	})
	if err != nil || res != history.OK {
		return err
	}
	return c.release(ctx, rec, held{lease: l, id: acq.Lease}, false, cfg.OpTimeout)
}

// closeLocker closes c's lock, recording it (a close op, with its
// deadline when the lock's Close takes a ctx, locker.ContextCloser: then
// as a shutdown loop does, with short deadlines until one Close returns
// nil); why names the caller in the log of a close that failed. A crash
// meanwhile stops the worker (errStop).
func (w *Workload) closeLocker(ctx context.Context, rec *history.Recorder, c *Client, why string) error {
	cfg := w.cfg
	op := history.Op{Client: c.Name, Kind: history.Close, Key: c.Key}
	closer, hasCtx := c.locker.(locker.ContextCloser)
	p := rec.Invoke(op)
	var err error
	if hasCtx {
		// A service's shutdown loop: Close with a short deadline, again
		// until it returns nil, within the op's timeout, as a lock that
		// says "calling Close again waits again" allows (package lock's
		// round-three defect 2: a second Close while lost-reply cleanups
		// were starting panicked, "WaitGroup is reused").
		err = call(ctx, ctxNormal, cfg.OpTimeout, func(octx context.Context) error {
			for {
				err := call(octx, ctxTiny, 0, closer.CloseContext)
				if err == nil || octx.Err() != nil {
					return err
				}
			}
		})
	} else {
		err = c.locker.Close()
	}
	if c.Gate.Crashed() {
		return c.recording(rec).crashed(p)
	}
	res := history.OK
	if err != nil {
		// A close that failed may have stopped part of what it runs.
		res = history.Unknown
		cfg.Logger.Warn("close on "+why, "client", c.Name, "err", err)
	}
	return p.Complete(res, func(o *history.Op) {
		if hasCtx {
			setDeadline(o, ctxNormal, cfg.OpTimeout)
		}
	})
}

// again is what a holder acquiring as its own owner (Mix.Owner) does when
// its check found the lease gone: it acquires again as the same owner
// (one attempt), then releases the lost lease, as code whose release was
// deferred does, and, holding anew, works and releases the new hold. The
// lost lease's release must fail and leave the new hold alone (package
// lock's review defect 4: it freed it).
func (w *Workload) again(ctx context.Context, rec *history.Recorder, c *Client, owned locker.Owned, lost held) error {
	cfg := w.cfg
	var nl locker.Lease
	op := history.Op{Client: c.Name, Kind: history.Acquire, Key: c.Key, TTLMillis: cfg.TTL.Milliseconds(), Lease: c.nextHold()}
	start := c.Clock.Now()
	res, err := c.recording(rec).lock(ctx, op, ctxNormal, cfg.OpTimeout, func(ctx context.Context) error {
		var err error
		nl, err = owned.AcquireAs(ctx, c.Key, cfg.TTL, c.owner(), false, nil)
		return err
	}, func(o *history.Op) {
		o.Token, o.HasToken = nl.Fence()
		c.claim(rec, o, nl)
	})
	if err != nil {
		return err
	}
	if err := c.release(ctx, rec, lost, false, cfg.OpTimeout); err != nil {
		return err
	}
	if res != history.OK {
		return nil
	}
	h := held{lease: nl, id: op.Lease, believed: c.reckon(nl, start)}
	h.released = c.watchLoss(ctx, rec, h)
	_ = sleepRand(ctx, c.rng, cfg.Hold)
	if err := c.Gate.Wait(ctx); err != nil {
		return errStop
	}
	return c.release(ctx, rec, h, false, cfg.OpTimeout)
}

// owner is the client's own owner for locker.Owned: one per client, the
// same for each of its holds.
func (c *Client) owner() string { return c.Name + "-owner" }

// held is one hold the client has: the lease, its number in the history
// (history.Op.Lease), and how long the client itself reckons it valid
// when the lock states nothing (locker.Claimer): the start of the acquire
// or renewal that last succeeded plus the lease's TTL, on c's clock.
type held struct {
	lease locker.Lease
	id    uint64
	// mode and permits are a Moded lock's hold's (the history's mode and
	// permits, which every op about the hold carries: stamp).
	mode     history.Mode
	permits  int64
	believed time.Time
	// released tells the loss-notice watcher that the hold is being
	// released (watchLoss); nil: nothing watches.
	released func()
	// watched is the lease's Context when the holder watches and checks
	// it, not Lost (Mix.Context); nil: it watches Lost.
	watched context.Context
}

// stamp sets the hold's mode and permits on o, an op about it.
func (h held) stamp(o history.Op) history.Op {
	o.Mode, o.Permits = h.mode, h.permits
	return o
}

// watched draws whether the holder of lease l watches its Context
// (Mix.Context), and returns it then: only a lease that has one draws.
func (c *Client) watched(l locker.Lease, mix *Mix) context.Context {
	if x, ok := l.(locker.Contexter); ok && c.chance(mix.Context) {
		return x.Context()
	}
	return nil
}

// nextHold numbers the client's next hold.
func (c *Client) nextHold() uint64 {
	c.holds++
	return c.holds
}

// reckon is how long a user reckons a lease valid that a successful call
// started at start gave: start + TTL (never, for a lease without expiry).
func (c *Client) reckon(l locker.Lease, start time.Time) time.Time {
	if l.TTL() <= 0 {
		return time.Time{}
	}
	return start.Add(l.TTL())
}

// check is what a user without fencing does right before a write: the
// lease is valid when its loss notice has not fired and it stays valid
// for margin more (the time the write still needs before it is sent):
// by the validity the lock claims (locker.Claimer), or, when it claims
// nothing, by the client's own reckoning. claimed is the lock's claim,
// zero when it states none.
func (c *Client) check(h held, margin time.Duration) (valid bool, claimed time.Time) {
	if h.watched != nil {
		if h.watched.Err() != nil {
			return false, time.Time{}
		}
	} else {
		select {
		case <-h.lease.Lost():
			return false, time.Time{}
		default:
		}
	}
	until := c.Clock.Now().Add(margin)
	if cl, ok := h.lease.(locker.Claimer); ok {
		claimed = cl.ValidUntil()
		return !claimed.IsZero() && until.Before(claimed), claimed
	}
	return h.believed.IsZero() || until.Before(h.believed), time.Time{}
}

// onHistory converts an instant of c's clock to the history's clock.
func (c *Client) onHistory(rec *history.Recorder, t time.Time) int64 {
	v := rec.Now() + int64(t.Sub(c.Clock.Now()))
	return min(max(v, 0), history.MaxTime-1)
}

// claim records on o the validity l claims now (locker.Claimer), when it
// claims one.
func (c *Client) claim(rec *history.Recorder, o *history.Op, l locker.Lease) {
	cl, ok := l.(locker.Claimer)
	if !ok {
		return
	}
	if t := cl.ValidUntil(); !t.IsZero() {
		claimUntil(o, c.onHistory(rec, t))
	}
}

// claimUntil records on o that the lock claimed its lease valid until t
// (history clock): the one place a claim is written, whether the lease
// said it (claim) or its server did (askTTL).
func claimUntil(o *history.Op, t int64) {
	o.ValidUntil, o.HasValid = min(max(t, 0), history.MaxTime-1), true
}

// askTTL asks the lock's server how long h's lease is still valid
// (locker.ServerClaimer), as code checking its lock does, and records the
// answer (a ttl op): its call plus the time left, a claim the claims
// property holds the lock to; a fail when the server says the lease is
// not held. A lease that cannot ask is not asked.
func (c *Client) askTTL(ctx context.Context, rec *history.Recorder, h held, timeout time.Duration) error {
	sc, ok := h.lease.(locker.ServerClaimer)
	if !ok {
		return nil
	}
	token, fenced := h.lease.Fence()
	op := h.stamp(history.Op{Client: c.Name, Kind: history.TTL, Key: c.Key, Token: token, HasToken: fenced, Lease: h.id})
	var left time.Duration
	_, err := c.recording(rec).lock(ctx, op, ctxNormal, timeout, func(ctx context.Context) (err error) {
		left, err = sc.TTLLeft(ctx)
		return err
	}, func(o *history.Op) {
		if left > 0 {
			// From the call: the server counted the time left at some
			// instant of the op, no earlier.
			claimUntil(o, o.Call+int64(left))
		}
	})
	return err
}

// watchLoss records h's loss notice (a lost op) when Lease.Lost fires,
// at the instant the client would see it: a paused client sees it when
// it wakes, a crashed one never. It watches until the run ends, and for
// two TTLs after the hold's release (a notice then is false: the
// false-notice rule). Run waits for the watchers.
func (c *Client) watchLoss(ctx context.Context, rec *history.Recorder, h held) (released func()) {
	lost := h.lease.Lost()
	stop := make(chan struct{})
	var once sync.Once
	var releasing atomic.Bool
	released = func() {
		releasing.Store(true)
		once.Do(func() { time.AfterFunc(2*max(h.lease.TTL(), time.Second), func() { close(stop) }) })
	}
	if h.watched != nil {
		// The lease's context ends with the hold, lost or released: a
		// cancellation once the release began is no loss notice.
		lost = h.watched.Done()
	}
	if lost == nil {
		return released
	}
	c.watchers.Add(1)
	go func() {
		defer c.watchers.Done()
		select {
		case <-lost:
		case <-stop:
			return
		case <-c.gone:
			return
		case <-ctx.Done():
			return
		}
		if c.Gate.Wait(ctx) != nil || ctx.Err() != nil {
			return // crashed, or the run is over
		}
		if h.watched != nil && releasing.Load() {
			return
		}
		select {
		case <-c.gone:
			return // it left: Close ended the context
		default:
		}
		t := rec.Now()
		token, fenced := h.lease.Fence()
		_ = rec.Record(h.stamp(history.Op{Client: c.Name, Kind: history.Lost, Key: c.Key, Call: t, Return: t, Completed: true,
			Result: history.OK, Token: token, HasToken: fenced, Lease: h.id}))
	}()
	return released
}

// release releases l. A rushed release is sent with an already canceled
// context or a 5ms deadline; when it did not surely happen (fail or
// unknown), it is sent once more with the op timeout, as a careful caller
// retries a release until it is done.
func (c *Client) release(ctx context.Context, rec *history.Recorder, h held, rush bool, timeout time.Duration) error {
	_, err := c.releaseBeside(ctx, rec, h, rush, 0, timeout)
	return err
}

// Second calls beside a release (Mix.Concurrent).
const (
	besideNone    = iota
	besideRelease // a second Release
	besideRenew   // a Renew
)

// releaseBeside is release with a second call on the same lease at once
// (beside: besideRelease or besideRenew), from a goroutine that draws
// nothing from the client's stream and is joined before it returns. res
// is the result of the release's last call (the one beside aside).
func (c *Client) releaseBeside(ctx context.Context, rec *history.Recorder, h held, rush bool, beside int, timeout time.Duration) (res history.Result, err error) {
	if beside == besideNone {
		return c.releaseOne(ctx, rec, h, rush, timeout)
	}
	l := h.lease
	token, fenced := l.Fence()
	op := h.stamp(history.Op{Client: c.Name, Kind: history.Release, Key: c.Key, Token: token, HasToken: fenced, Lease: h.id})
	do := func(ctx context.Context) error { return l.Release(ctx) }
	if beside == besideRenew {
		op = h.stamp(history.Op{Client: c.Name, Kind: history.Renew, Key: c.Key, TTLMillis: l.TTL().Milliseconds(), Token: token, HasToken: fenced, Lease: h.id})
		do = func(ctx context.Context) error { return l.Renew(ctx, l.TTL()) }
	}
	// Its own recording without the op in flight (the main call's).
	r := recording{rec: rec, gate: c.Gate}
	second := make(chan error, 1)
	go func() {
		_, err := r.lockEdit(ctx, op, ctxNormal, timeout, do, func(o *history.Op, res history.Result) {
			if o.Kind == history.Renew && res == history.OK {
				c.claim(rec, o, l)
			}
		})
		second <- err
	}()
	res, err = c.releaseOne(ctx, rec, h, rush, timeout)
	return res, errors.Join(err, <-second)
}

// releaseOne is release alone; res is its last call's result.
func (c *Client) releaseOne(ctx context.Context, rec *history.Recorder, h held, rush bool, timeout time.Duration) (history.Result, error) {
	l := h.lease
	if h.released != nil {
		// Before the release: it ends a watched context (Mix.Context).
		h.released()
	}
	token, fenced := l.Fence()
	op := h.stamp(history.Op{Client: c.Name, Kind: history.Release, Key: c.Key, Token: token, HasToken: fenced, Lease: h.id})
	do := func(ctx context.Context) error { return l.Release(ctx) }
	// After a release that did not surely happen, what the lock still
	// claims (nothing, for a lock that keeps its word: the claims property).
	still := func(o *history.Op, res history.Result) {
		if res == history.Unknown {
			c.claim(rec, o, l)
		}
	}
	if rush {
		mode := ctxCanceled
		if c.rng.IntN(2) == 0 {
			mode = ctxTiny
		}
		res, err := c.recording(rec).lockEdit(ctx, op, mode, timeout, do, still)
		if err != nil || res == history.OK {
			return res, err
		}
		// A careful caller retries after a backoff (up to a fifth of the
		// TTL), in which a release that did happen hands the key on while
		// the lock may still claim it; or at once (half, from the side
		// stream), while the first request and the lock's own clean-up of
		// it may still be on their way (the fourth review's defect 2: the
		// old lock's second Release undid the nested hold before its id
		// was buried, and the first, landing late, ended the outer hold).
		backoff := time.Duration(c.rng.Int64N(int64(max(l.TTL()/5, 20*time.Millisecond)) + 1))
		if c.side.IntN(2) == 0 {
			_ = sleepFor(ctx, backoff)
		}
	}
	return c.recording(rec).lockEdit(ctx, op, ctxNormal, timeout, do, still)
}

// renewObserver records the renewals c's lock makes in the background (a
// watchdog's) as renew ops; without them a later release would look like one
// after the lease surely expired.
type renewObserver struct{ c *Client }

// Renewing implements locker.Observer. Nothing is recorded before Run, nor
// after the client crashed (the gate refuses the renewal before sending it).
func (o renewObserver) Renewing(key string, ttl time.Duration, token uint64, hasToken bool) func(error) {
	rec := o.c.rec.Load()
	if rec == nil || o.c.Gate.Crashed() {
		return nil
	}
	p := rec.Invoke(history.Op{Client: o.c.Name, Kind: history.Renew, Key: key, TTLMillis: ttl.Milliseconds(),
		Token: token, HasToken: hasToken})
	return func(err error) {
		if o.c.Gate.Crashed() {
			_ = o.c.recording(rec).crashed(p)
			return
		}
		res, err := lockResult(err)
		if err != nil { // ErrInvalid: nothing was sent
			res = history.Fail
		}
		_ = p.Complete(res, nil) // invalid-op and write errors are kept in rec.Err; after Close it stays pending
	}
}

func sleepRand(ctx context.Context, rng *rand.Rand, max time.Duration) error {
	if max <= 0 {
		return ctx.Err()
	}
	return sleepFor(ctx, time.Duration(rng.Int64N(int64(max)+1)))
}

// sleepFor waits d, or until ctx is done (its error).
func sleepFor(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	return env.Sleep(ctx, d)
}
