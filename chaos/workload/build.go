package workload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"

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
		deps.Store = locker.Store{Kind: rt.Store, Endpoints: rt.StoreAddrs, Dial: c.Gate.Dialer(gate.DialFunc(rt.Dial))}
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
