package workload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/gate"
	"github.com/lockproof/lockproof/fencing"
	"github.com/lockproof/lockproof/internal/proc"
	"github.com/lockproof/lockproof/locker"
)

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

// linksOf opens client name's own links to e (its proxies) and its route
// along them; the links are closed when the route fails.
func (w *Workload) linksOf(ctx context.Context, e env.Env, topo env.Topology, name string) (*env.Links, route, error) {
	l, err := env.NewLinks(ctx, e, w.cfg.KeyPrefix+name)
	if err != nil {
		return nil, route{}, err
	}
	rt, err := routeOf(topo, l)
	if err != nil {
		_ = l.Close()
		return nil, route{}, err
	}
	return l, rt, nil
}

func (w *Workload) newClient(ctx context.Context, e env.Env, topo env.Topology, name, key string, idx uint64) (*Client, error) {
	l, rt, err := w.linksOf(ctx, e, topo, name)
	if err != nil {
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
	c.ctxTimeouts = honoursCtxDeadlines(idx)
	w.connect(c, rt)
	deps := w.cfg.Deps
	if c.lockRDB != nil {
		deps.Redis = c.lockRDB
	}
	if rt.Store != "" {
		// The store's own login and TLS (Auth's Store fields), not the
		// Redis servers': a BYO store's credentials reach its traffic.
		stls, err := rt.Auth.StoreTLSConfig()
		if err != nil {
			c.close()
			return nil, fmt.Errorf("client %s: %w: store TLS: %w", name, ErrConfig, err)
		}
		deps.Store = locker.Store{Kind: rt.Store, Endpoints: rt.StoreAddrs, Dial: c.Gate.Dialer(gate.DialFunc(rt.Dial)),
			Username: rt.Auth.StoreUsername, Password: string(rt.Auth.StorePassword), TLS: stls}
	}
	for _, r := range c.redlock {
		deps.Redlock = append(deps.Redlock, r)
	}
	deps.Clock = c.Clock.Now
	deps.Client = name
	deps.Observer = renewObserver{c}
	if w.cfg.Replayable {
		deps.Rand = rand.NewPCG(w.cfg.Seed, lockStream|idx)
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

// lockStream marks the stream a replayable client's lock draws from
// (Config.Replayable) apart from the client's own streams.
const lockStream = 0x10c4 << 32

// connect makes c's go-redis clients along rt, each command through c's
// gate: the lock's, the resource's and the Redlock nodes'.
func (w *Workload) connect(c *Client, rt route) {
	o := redisConn{auth: rt.Auth, timeout: w.cfg.OpTimeout, pool: poolSize(rt), ctxTimeouts: c.ctxTimeouts}
	// Every link dials through its proxy with the deployment's TLS: a
	// go-redis client given a Dialer applies no TLSConfig of its own.
	lockDial := rt.Auth.Dialer(rt.Dial, nil)
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
		c.lockRDB = redis.NewClusterClient(rt.Auth.LoginCluster(o.options(lockDial, o.timeout, rt.Cluster...).Cluster()))
	case rt.MasterName != "":
		fo := o.options(lockDial, o.timeout, rt.Sentinels...).Failover()
		// Failover puts a default Sentinel in an empty list: the route's
		// list stands as it is.
		fo.MasterName, fo.SentinelAddrs = rt.MasterName, rt.Sentinels
		c.lockRDB = redis.NewFailoverClient(rt.Auth.LoginFailover(fo))
	default:
		c.lockRDB = o.client(lockDial, o.timeout, rt.Master)
	}
	if c.lockRDB != nil {
		c.lockRDB.AddHook(c.Gate.Hook())
	}
	var resDial env.DialFunc // rt.Fenced is the client's own proxy
	if rt.MasterName == "" && len(rt.Cluster) == 0 {
		resDial = rt.Dial // in-process nodes (NewOn)
	}
	resDial = rt.Auth.Dialer(resDial, rt.server)
	c.resRDB = o.client(resDial, resourceReadTimeout(o.timeout, c.ctxTimeouts), rt.Fenced)
	c.resRDB.AddHook(c.Gate.Hook())
	for _, addr := range rt.Redlock {
		r := o.client(resDial, o.timeout, addr)
		r.AddHook(c.Gate.Hook())
		c.redlock = append(c.redlock, r)
	}
}

// poolSize is the connection pool of the go-redis clients of a client
// along rt: go-redis's default (0), or inProcessPool for in-process
// nodes. go-redis keeps the timers of commands that wait for a pooled
// connection in a process-wide sync.Pool: in the simulation a timer made
// in one run's synctest bubble was reused in the next run's, and the
// process died ("select on synctest channel from outside bubble") once
// the lock's cleanups had every connection busy. A pool that never runs
// dry never takes that path.
func poolSize(rt route) int {
	if rt.InProcess {
		return inProcessPool
	}
	return 0
}

// resourceReadTimeout is the read timeout of a client's resource
// connection: the op timeout, or, when its go-redis ignores ctx
// deadlines, three op timeouts (go-redis's default is 3s): a resource
// that does not honour ctx itself then returns late, which the calls
// property sees.
func resourceReadTimeout(opTimeout time.Duration, ctxTimeouts bool) time.Duration {
	if !ctxTimeouts {
		return 3 * opTimeout
	}
	return opTimeout
}

// redisConn is what every go-redis client of one workload client shares,
// the lock's, the resource's and the Redlock nodes' alike: its login, its
// op timeout for dialling, writing and waiting for a connection, its
// pool, and whether it honours ctx deadlines.
type redisConn struct {
	auth        env.Auth
	timeout     time.Duration
	pool        int
	ctxTimeouts bool
}

// options are the options of a go-redis client of addrs (a node, a
// cluster's seeds or the Sentinels) dialled with dial and reading for
// read; Simple, Cluster or Failover makes them the options of each kind
// of client, which its login (env.Auth) completes. A command is sent
// once (MaxRetries -1), in RESP2 (Protocol 2).
func (o redisConn) options(dial env.DialFunc, read time.Duration, addrs ...string) *redis.UniversalOptions {
	return &redis.UniversalOptions{Addrs: addrs, Dialer: dial,
		DialTimeout: o.timeout, ReadTimeout: read, WriteTimeout: o.timeout, PoolTimeout: o.timeout, PoolSize: o.pool,
		MaxRetries: -1, ContextTimeoutEnabled: o.ctxTimeouts, Protocol: 2}
}

// client is a go-redis client of the one node at addr (options).
func (o redisConn) client(dial env.DialFunc, read time.Duration, addr string) *redis.Client {
	return redis.NewClient(o.auth.Login(o.options(dial, read, addr).Simple()))
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
