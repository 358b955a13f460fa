// Package workload runs lockproof's chaos workload: clients that take a lock
// and do a read-modify-write of a resource under it, every operation recorded
// into a history.
//
// Each client works on one key (Config.Clients clients per key over
// Config.Keys keys). One critical section is:
//
//	acquire → read resource → (fault point) → write resource with token and prev → release
//
// All randomness (think and hold times) comes from Config.Seed, one stream
// per client, so a run replays from its seed up to the timing of the real
// systems involved.
package workload

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/gate"
	"github.com/lockproof/lockproof/chaos/nemesis"
	"github.com/lockproof/lockproof/fencing"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/lock/specimen"
)

// ErrConfig wraps every error about a bad Config.
var ErrConfig = errors.New("bad workload config")

// Config is the shape of a workload.
type Config struct {
	// Lock is the specimen.Open name of the lock; default "fenced".
	Lock string
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
	// Seed seeds all randomness.
	Seed uint64
	// Processes adds that many clients of the first key, each run as a child
	// process (Workload.Procs), which a fault can freeze whole with SIGSTOP.
	// The program must call MaybeChild first thing in main (or TestMain).
	// Child clients use the lock's default options.
	Processes int
	// Fenced are the options of the production lock (when Lock is "fenced").
	Fenced specimen.Deps
	// Logger receives progress; nil discards.
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	if c.Lock == "" {
		c.Lock = "fenced"
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
	switch {
	case c.Keys < 0:
		return c, fmt.Errorf("%w: Keys = %d: must be > 0", ErrConfig, c.Keys)
	case c.Clients < 0:
		return c, fmt.Errorf("%w: Clients = %d: must be > 0", ErrConfig, c.Clients)
	case c.TTL < time.Millisecond:
		return c, fmt.Errorf("%w: TTL = %v: must be at least 1ms", ErrConfig, c.TTL)
	case c.Hold < 0 || c.Think < 0 || c.OpTimeout < 0:
		return c, fmt.Errorf("%w: Hold, Think and OpTimeout must be >= 0", ErrConfig)
	}
	return c, nil
}

// Client is one workload client: its own proxies, gate, clock, Redis
// clients, lock and resource.
type Client struct {
	Name  string
	Key   string
	Links *env.Links
	Gate  *gate.Gate
	Clock *nemesis.Clock

	lockRDB  *redis.Client
	resRDB   *redis.Client
	redlock  []*redis.Client
	locker   specimen.Locker
	fenced   fencing.Resource // for leases with a fencing token
	unfenced fencing.Resource // for leases without one
	rng      *rand.Rand
	holding  atomic.Bool
	held     chan struct{} // signalled (non-blocking) when the client holds with its write ahead
	stopped  atomic.Bool
	rec      atomic.Pointer[history.Recorder] // set by Run: where background renewals are recorded
}

// Holding reports whether the client holds its lock with its write ahead
// (between its read and its write's command).
func (c *Client) Holding() bool { return c.holding.Load() }

// Stopped reports whether the client's worker ended (crashed, or done).
func (c *Client) Stopped() bool { return c.stopped.Load() }

// WaitHolding waits until the client holds its lock with its resource write
// still ahead (between its read and its write), bounded by ctx: a pause or
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
// specimen.Open, and a resource on the fenced node: fenced for leases with a
// fencing token, unfenced for leases without. Close releases them.
func New(ctx context.Context, e env.Env, cfg Config) (*Workload, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	w := &Workload{cfg: cfg}
	topo := e.Topology()
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

// route says how one client reaches the topology.
type route struct {
	Dial       func(ctx context.Context, network, addr string) (net.Conn, error) `json:"-"`
	MasterName string
	Sentinels  []string
	Fenced     string   // address of the client's proxy to the fenced node
	Redlock    []string // addresses of the client's proxies to the Redlock nodes
}

// routeOf returns the route of the client that owns l.
func routeOf(topo env.Topology, l *env.Links) (route, error) {
	r := route{Dial: l.Dial, MasterName: topo.MasterName, Sentinels: topo.Sentinels}
	var err error
	if r.Fenced, err = l.Addr(topo.Fenced.ID); err != nil {
		return r, err
	}
	for _, n := range topo.Redlock {
		a, err := l.Addr(n.ID)
		if err != nil {
			return r, err
		}
		r.Redlock = append(r.Redlock, a)
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
	c := &Client{Name: name, Key: key, Gate: gate.New(), Clock: &nemesis.Clock{},
		rng: rand.New(rand.NewPCG(w.cfg.Seed, idx)), held: make(chan struct{}, 1)}
	to := w.cfg.OpTimeout
	c.lockRDB = redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: rt.MasterName, SentinelAddrs: rt.Sentinels, Dialer: rt.Dial,
		DialTimeout: to, ReadTimeout: to, WriteTimeout: to, PoolTimeout: to,
		MaxRetries: -1, ContextTimeoutEnabled: true, Protocol: 2,
	})
	c.lockRDB.AddHook(c.Gate.Hook())
	c.resRDB = redis.NewClient(&redis.Options{Addr: rt.Fenced, DialTimeout: to, ReadTimeout: to, WriteTimeout: to,
		PoolTimeout: to, MaxRetries: -1, ContextTimeoutEnabled: true, Protocol: 2})
	c.resRDB.AddHook(c.Gate.Hook())
	deps := w.cfg.Fenced
	deps.Redis = c.lockRDB
	for _, addr := range rt.Redlock {
		r := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: to, ReadTimeout: to, WriteTimeout: to,
			PoolTimeout: to, MaxRetries: -1, ContextTimeoutEnabled: true, Protocol: 2})
		r.AddHook(c.Gate.Hook())
		c.redlock = append(c.redlock, r)
		deps.Redlock = append(deps.Redlock, r)
	}
	deps.Clock = c.Clock.Now
	deps.Observer = renewObserver{c}
	if deps.Logger == nil {
		deps.Logger = w.cfg.Logger
	}
	if c.locker, err = specimen.Open(w.cfg.Lock, deps); err != nil {
		c.close()
		return nil, fmt.Errorf("client %s: %w", name, err)
	}
	if c.fenced, err = fencing.NewRedis(c.resRDB, fencing.RedisOptions{Prefix: "res:"}); err != nil {
		c.close()
		return nil, fmt.Errorf("client %s: %w", name, err)
	}
	if c.unfenced, err = fencing.NewUnfencedRedis(c.resRDB, fencing.RedisOptions{Prefix: "res:"}); err != nil {
		c.close()
		return nil, fmt.Errorf("client %s: %w", name, err)
	}
	return c, nil
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

// section is one critical section: acquire, read, fault point, write, release.
func (w *Workload) section(ctx context.Context, rec *history.Recorder, c *Client, seq int) error {
	cfg := w.cfg
	p := rec.Invoke(history.Op{Client: c.Name, Kind: history.Acquire, Key: c.Key, TTLMillis: cfg.TTL.Milliseconds()})
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.OpTimeout)
	lease, err := c.locker.TryAcquire(actx, c.Key, cfg.TTL)
	cancel()
	if c.Gate.Crashed() {
		return c.crashed(p)
	}
	res, err := lockResult(err)
	if err != nil {
		return fmt.Errorf("acquire %q: %w", c.Key, err)
	}
	if res != history.OK {
		return p.Complete(res, nil)
	}
	token, fenced := lease.Fence()
	resource := c.unfenced
	if fenced {
		resource = c.fenced
	}
	if err := p.Complete(history.OK, func(o *history.Op) { o.Token, o.HasToken = token, fenced }); err != nil {
		return err
	}
	defer c.holding.Store(false)

	// Read the resource under the lease.
	p = rec.Invoke(history.Op{Client: c.Name, Kind: history.Read, Key: c.Key, Token: token, HasToken: fenced})
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.OpTimeout)
	var v fencing.Value
	if fr, ok := resource.(FencedReader); ok && fenced {
		v, err = fr.ReadFenced(rctx, c.Key, token, c.Name)
	} else {
		v, err = resource.Read(rctx, c.Key)
	}
	cancel()
	if c.Gate.Crashed() {
		return c.crashed(p)
	}
	readOK := err == nil
	if readOK {
		err = p.Complete(history.OK, func(o *history.Op) { o.Value = v.Value })
	} else {
		err = p.Complete(resourceResult(err), nil)
	}
	if err != nil {
		return err
	}

	if readOK {
		// Holding, with the write ahead: a fault that waits for the client
		// to hold strikes here. (Signalled from the acquire on, a pause could
		// land after the write, and the woken client would only release: no
		// late write, nothing for the fence to refuse.)
		c.holding.Store(true)
		select {
		case c.held <- struct{}{}:
		default:
		}
		// Work, then the fault point: a paused client stops here, between its read and its write.
		_ = sleepRand(ctx, c.rng, cfg.Hold)
		if err := c.Gate.Wait(ctx); err != nil {
			return errStop
		}
		// A pause that strikes from now on holds the write's command at the gate.
		c.holding.Store(false)
		val := fmt.Sprintf("%s-%d", c.Name, seq)
		p = rec.Invoke(history.Op{Client: c.Name, Kind: history.Write, Key: c.Key, Token: token, HasToken: fenced,
			Value: val, Prev: v.Value, HasPrev: true})
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.OpTimeout)
		err = resource.Write(wctx, c.Key, fencing.Write{Token: token, NoToken: !fenced, Owner: c.Name, Value: val})
		cancel()
		if c.Gate.Crashed() {
			return c.crashed(p)
		}
		if errors.Is(err, fencing.ErrInvalid) {
			return fmt.Errorf("write %q: %w", c.Key, err)
		}
		if err := p.Complete(resourceResult(err), nil); err != nil {
			return err
		}
	}

	if err := c.Gate.Wait(ctx); err != nil {
		return errStop
	}
	p = rec.Invoke(history.Op{Client: c.Name, Kind: history.Release, Key: c.Key, Token: token, HasToken: fenced})
	rctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), cfg.OpTimeout)
	err = lease.Release(rctx)
	cancel()
	if c.Gate.Crashed() {
		return c.crashed(p)
	}
	res, err = lockResult(err)
	if err != nil {
		return fmt.Errorf("release %q: %w", c.Key, err)
	}
	return p.Complete(res, nil)
}

// renewObserver records the renewals c's lock makes in the background (a
// watchdog's) as renew ops; without them a later release would look like one
// after the lease surely expired.
type renewObserver struct{ c *Client }

// Renewing implements specimen.Observer. Nothing is recorded before Run, nor
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
			_ = o.c.crashed(p)
			return
		}
		res, err := lockResult(err)
		if err != nil { // ErrInvalid: nothing was sent
			res = history.Fail
		}
		_ = p.Complete(res, nil) // invalid-op and write errors are kept in rec.Err; after Close it stays pending
	}
}

// crashed ends a worker whose client crashed during op p. A client that
// crashed right after a reply (Gate.CrashAfter) had p take effect, or not,
// before that moment: p completes as unknown now. Otherwise p never returns
// (a command may still be in flight) and the recorder writes it pending.
func (c *Client) crashed(p *history.Pending) error {
	if c.Gate.CrashedAfterReply() {
		if err := p.Complete(history.Unknown, nil); err != nil {
			return err
		}
	}
	return errStop
}

// lockResult maps a specimen error to a history result; an error back means
// a bug (bad input).
func lockResult(err error) (history.Result, error) {
	switch {
	case err == nil:
		return history.OK, nil
	case errors.Is(err, specimen.ErrInvalid):
		return "", err
	case errors.Is(err, specimen.ErrUnknownOutcome):
		return history.Unknown, nil
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		// A deadline that struck mid-command: the command may have run.
		return history.Unknown, nil
	default:
		// ErrNotAcquired, ErrNotHeld, and errors that surely had no effect.
		return history.Fail, nil
	}
}

// resourceResult maps a fencing error to a history result. Resource ops
// have no "fail": an error that surely had no effect is recorded as unknown
// (the weaker claim).
func resourceResult(err error) history.Result {
	switch {
	case err == nil:
		return history.OK
	case errors.Is(err, fencing.ErrStaleToken):
		return history.Rejected
	default:
		return history.Unknown
	}
}

func sleepRand(ctx context.Context, rng *rand.Rand, max time.Duration) error {
	if max <= 0 {
		return ctx.Err()
	}
	d := time.Duration(rng.Int64N(int64(max) + 1))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
