// Command bench compares lockproof's lock with redsync and redislock on one
// redis-server (and lockproof's read-write lock, 90% reads, and semaphore
// of 4 permits beside them), and with the consensus stores' locks (etcd's
// concurrency.Mutex, go-zookeeper's Lock) each on a 3-member cluster of
// its own: uncontended acquire+release, and N goroutines contending for
// one key with a fixed critical section. It prints a table of throughput and
// the p50/p99 time a caller waits to acquire.
//
// It is a separate module so that users of the lock do not pull the peers'
// dependencies. Run it from this directory:
//
//	go run . [-addr host:port] [-goroutines 16] [-cs 1ms] [-spin] [-duration 3s] [-rounds 3]
//
// Without -addr it starts a redis-server of its own (redis-server on PATH);
// etcd-mutex and zk-lock need etcd and ZooKeeper installed (Debian's
// etcd-server and zookeeper), or -locks without them. A Redis lock's
// server CPU is the one redis-server's; a store's, its 3 members'.
// All implementations share one go-redis client (ContextTimeoutEnabled) and
// use their default options, except redislock's retry (LinearBackoff 10ms).
// Rounds interleave the implementations so that load changes hit all alike.
//
// Reading the table: "wait" is the time spent in Acquire (Lock, Obtain);
// "mean hold" is the measured critical section (time.Sleep(cs) overshoots
// on a loaded host, more so in a process that is otherwise idle), and the
// last column compares throughput with 1/(mean hold + 2 round trips).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/internal/redisproc"
	"github.com/lockproof/lockproof/lock"
)

// handle is one caller's view of a lock implementation.
type handle interface {
	acquire(ctx context.Context) (release func(context.Context) error, err error)
}

// impl makes handles for one implementation (one per goroutine).
type impl struct {
	name      string
	newHandle func(key string) handle
	// pids are its own servers' (a consensus store's members), whose CPU
	// time is its server cost; nil: the shared redis-server's.
	pids func() []int
}

type lockproofHandle struct {
	c   *lock.Client
	key string
}

func (h lockproofHandle) acquire(ctx context.Context) (func(context.Context) error, error) {
	l, err := h.c.Acquire(ctx, h.key)
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

// rwHandle takes package lock's read-write lock: a read hold nine times
// in ten, a write hold the tenth (the read-heavy workload: 90% reads).
type rwHandle struct {
	rw *lock.RWLock
	n  *int // this handle's acquires (a handle is one goroutine's)
}

func (h rwHandle) acquire(ctx context.Context) (func(context.Context) error, error) {
	*h.n++
	take := h.rw.RLock
	if *h.n%10 == 0 {
		take = h.rw.Lock
	}
	l, err := take(ctx)
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

// semHandle takes one permit of package lock's semaphore.
type semHandle struct{ s *lock.Semaphore }

func (h semHandle) acquire(ctx context.Context) (func(context.Context) error, error) {
	l, err := h.s.Acquire(ctx, 1)
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

type redsyncHandle struct{ m *redsync.Mutex }

func (h redsyncHandle) acquire(ctx context.Context) (func(context.Context) error, error) {
	if err := h.m.LockContext(ctx); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		ok, err := h.m.UnlockContext(ctx)
		if err == nil && !ok {
			err = errors.New("redsync: unlock failed")
		}
		return err
	}, nil
}

type redislockHandle struct {
	c   *redislock.Client
	key string
	ttl time.Duration
}

func (h redislockHandle) acquire(ctx context.Context) (func(context.Context) error, error) {
	l, err := h.c.Obtain(ctx, h.key, h.ttl, &redislock.Options{RetryStrategy: redislock.LinearBackoff(10 * time.Millisecond)})
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

// result is one row of the table.
type result struct {
	impl, workload string
	ops, fails     int
	elapsed        time.Duration
	waits          []time.Duration
	held           time.Duration // total time spent in the critical section
	server         serverCost    // what the runs cost the server (uncontended runs)
}

// serverCost is what Redis spent on a run: CPU time of the redis-server
// process (user + system, from /proc: networking included, as a client
// pays it) and the commands it executed (INFO commandstats calls, those
// run inside Lua scripts included; INFO itself excluded).
type serverCost struct {
	cpu      time.Duration
	commands int64
	known    bool
	// noCommands: the servers are a consensus store's, whose requests
	// are not counted.
	noCommands bool
}

// sampleOf is serverSample for im: its own servers' CPU time when it has
// them (a consensus store), else the redis-server's and its commands.
func sampleOf(ctx context.Context, im impl, rdb *redis.Client, pid int) (serverCost, error) {
	if im.pids == nil {
		return serverSample(ctx, rdb, pid)
	}
	cpu, err := cpuOf(im.pids())
	return serverCost{cpu: cpu, known: true, noCommands: true}, err
}

func (c *serverCost) add(o serverCost) {
	c.cpu += o.cpu
	c.commands += o.commands
	c.known = c.known || o.known
	c.noCommands = c.noCommands || o.noCommands
}

// serverSample reads the server's CPU time (pid > 0) and its command count.
func serverSample(ctx context.Context, rdb *redis.Client, pid int) (serverCost, error) {
	var s serverCost
	if pid > 0 {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return s, err
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		if len(f) < 13 {
			return s, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		s.cpu = time.Duration(ut+st) * time.Second / 100 // USER_HZ is 100 on Linux
	}
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") || name == "cmdstat_info" {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		n, _ := strconv.ParseInt(calls, 10, 64)
		s.commands += n
	}
	s.known = true
	return s, nil
}

func (r *result) add(o result) {
	r.impl, r.workload = o.impl, o.workload
	r.ops += o.ops
	r.fails += o.fails
	r.elapsed += o.elapsed
	r.waits = append(r.waits, o.waits...)
	r.held += o.held
	r.server.add(o.server)
}

func (r result) pct(p int) time.Duration {
	if len(r.waits) == 0 {
		return 0
	}
	w := slices.Clone(r.waits)
	slices.Sort(w)
	return w[min(len(w)-1, len(w)*p/100)]
}

// run drives goroutines callers of one implementation for d (or until ops
// acquisitions when ops > 0), each holding the lock for cs.
func run(ctx context.Context, im impl, workload, key string, goroutines int, cs, d time.Duration, ops int, spin bool) result {
	res := result{impl: im.name, workload: workload}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	done := 0
	for g := 0; g < goroutines; g++ {
		h := im.newHandle(key)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				mu.Lock()
				stop := (ops > 0 && done >= ops) || (ops == 0 && time.Now().After(deadline))
				done++
				mu.Unlock()
				if stop {
					return
				}
				actx, cancel := context.WithTimeout(ctx, 30*time.Second)
				t0 := time.Now()
				release, err := h.acquire(actx)
				wait := time.Since(t0)
				cancel()
				mu.Lock()
				res.waits = append(res.waits, wait)
				if err != nil {
					res.fails++
				} else {
					res.ops++
				}
				mu.Unlock()
				if err != nil {
					continue
				}
				t1 := time.Now()
				hold(cs, spin)
				held := time.Since(t1)
				mu.Lock()
				res.held += held
				mu.Unlock()
				if err := release(ctx); err != nil {
					mu.Lock()
					res.fails++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	return res
}

// hold is the critical section: time.Sleep, or a spin on the clock. Sleep
// pays the OS timer wake-up delay, which a loaded host inflates (1ms often
// takes 1.3-1.6ms), more so in a process that is otherwise idle.
func hold(cs time.Duration, spin bool) {
	if cs <= 0 {
		return
	}
	if !spin {
		time.Sleep(cs)
		return
	}
	for end := time.Now().Add(cs); time.Now().Before(end); {
	}
}

func main() {
	if err := mainErr(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func mainErr() error {
	addr := flag.String("addr", "", "redis-server address; empty starts one")
	goroutines := flag.Int("goroutines", 16, "contending goroutines")
	cs := flag.Duration("cs", time.Millisecond, "critical section length")
	duration := flag.Duration("duration", 3*time.Second, "length of each contended run")
	uncontended := flag.Int("uncontended", 3000, "acquire+release pairs in each uncontended run")
	spin := flag.Bool("spin", false, "hold the lock by spinning on the clock instead of time.Sleep (no timer wake-up delay)")
	rounds := flag.Int("rounds", 3, "rounds; each runs every implementation once")
	only := flag.String("locks", "lockproof,lockproof-rw90,lockproof-sem4,redsync,redislock,etcd-mutex,zk-lock", "implementations to run, comma separated (lockproof-rw90: package lock's read-write lock, 90% reads; lockproof-sem4: its semaphore of 4 permits, 1 per hold; etcd-mutex and zk-lock start a 3-member etcd cluster and ZooKeeper ensemble of their own)")
	flag.Parse()
	if *goroutines < 1 || *cs < 0 || *duration <= 0 || *uncontended < 1 || *rounds < 1 {
		return errors.New("-goroutines, -uncontended, -duration and -rounds must be positive, -cs not negative")
	}

	ctx := context.Background()
	pid := 0 // the server's, when this program started it: its CPU time is measured
	if *addr == "" {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		p, err := redisproc.Start(sctx, redisproc.Config{})
		cancel()
		if err != nil {
			return err
		}
		defer p.Stop()
		*addr, pid = p.Addr, p.Pid()
	}
	// One go-redis client for all implementations, honouring context deadlines.
	rdb := redis.NewClient(&redis.Options{Addr: *addr, PoolSize: 4 * *goroutines, ContextTimeoutEnabled: true})
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("ping %s: %w", *addr, err)
	}
	const ttl = 10 * time.Second
	lc, err := lock.New(rdb, lock.Options{TTL: ttl, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	if err != nil {
		return err
	}
	defer lc.Close(context.Background())
	rs := redsync.New(goredis.NewPool(rdb))
	rl := redislock.New(rdb)
	impls := []impl{
		{name: "lockproof", newHandle: func(key string) handle { return lockproofHandle{lc, key} }},
		{name: "lockproof-rw90", newHandle: func(key string) handle { return rwHandle{lc.RWLock(key), new(int)} }},
		{name: "lockproof-sem4", newHandle: func(key string) handle {
			s, err := lc.Semaphore(key, 4)
			if err != nil {
				panic(err) // 4 permits: never refused
			}
			return semHandle{s}
		}},
		{name: "redsync", newHandle: func(key string) handle { return redsyncHandle{rs.NewMutex(key)} }},
		{name: "redislock", newHandle: func(key string) handle { return redislockHandle{rl, key, ttl} }},
	}
	want := strings.Split(*only, ",")
	impls = slices.DeleteFunc(impls, func(im impl) bool { return !slices.Contains(want, im.name) })
	for _, st := range []struct {
		name  string
		start func(context.Context) (*cluster, error)
	}{{"etcd-mutex", startEtcd}, {"zk-lock", startZooKeeper}} {
		if !slices.Contains(want, st.name) {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		c, err := st.start(sctx)
		cancel()
		if err != nil {
			return fmt.Errorf("%s: %w", st.name, err)
		}
		defer c.stop()
		c.impl.pids = c.pids
		impls = append(impls, c.impl)
	}

	lb, _ := os.ReadFile("/proc/loadavg")
	loadBefore := strings.TrimSpace(string(lb))

	// Round trip: median of PINGs.
	var rtts []time.Duration
	for i := 0; i < 200; i++ {
		t0 := time.Now()
		if err := rdb.Ping(ctx).Err(); err != nil {
			return err
		}
		rtts = append(rtts, time.Since(t0))
	}
	slices.Sort(rtts)
	rtt := rtts[len(rtts)/2]

	// Rounds interleave the implementations so that a change of machine load
	// hits them all alike; each row sums its rounds.
	rows := make([]result, 2*len(impls))
	how := "sleep"
	if *spin {
		how = "spin"
	}
	contended := fmt.Sprintf("%d goroutines, cs %v %s", *goroutines, *cs, how)
	for round := 1; round <= *rounds; round++ {
		for i, im := range impls {
			fmt.Fprintf(os.Stderr, "bench: round %d: %s\n", round, im.name)
			before, err := sampleOf(ctx, im, rdb, pid)
			if err != nil {
				return err
			}
			u := run(ctx, im, "uncontended", "bench:u:"+im.name, 1, 0, time.Hour, *uncontended, false)
			after, err := sampleOf(ctx, im, rdb, pid)
			if err != nil {
				return err
			}
			u.server = serverCost{cpu: after.cpu - before.cpu, commands: after.commands - before.commands, known: true, noCommands: after.noCommands}
			rows[2*i].add(u)
			rows[2*i+1].add(run(ctx, im, contended, "bench:c:"+im.name, *goroutines, *cs, *duration, 0, *spin))
		}
	}

	ideal := 1 / (*cs + 2*rtt).Seconds()
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("redis %s, %d rounds, load average before/after: %s / %s\n", *addr, *rounds, loadBefore, strings.TrimSpace(string(load)))
	fmt.Printf("round trip (median PING) %v; contended ideal 1/(cs + 2 RTT) = %.0f ops/s\n\n", rtt.Round(time.Microsecond), ideal)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "lock\tworkload\tops/s\tp50 wait\tp99 wait\tmax wait\tfails\tmean hold\t% of 1/(hold+2 RTT)\tserver CPU/op\tcommands/op\t")
	for _, r := range rows {
		w := slices.Clone(r.waits)
		slices.Sort(w)
		var mx time.Duration
		if len(w) > 0 {
			mx = w[len(w)-1]
		}
		hold, pctIdeal := "-", "-"
		if r.ops > 0 && r.workload != "uncontended" {
			h := r.held / time.Duration(r.ops)
			hold = ms(h)
			pctIdeal = fmt.Sprintf("%.0f%%", 100*float64(r.ops)/r.elapsed.Seconds()*(h+2*rtt).Seconds())
		}
		cpu, cmds := "-", "-"
		if r.server.known && r.ops > 0 {
			if pid > 0 || r.server.noCommands {
				cpu = fmt.Sprintf("%.1fµs", float64(r.server.cpu.Nanoseconds())/1000/float64(r.ops))
			}
			if !r.server.noCommands {
				cmds = fmt.Sprintf("%.1f", float64(r.server.commands)/float64(r.ops))
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%v\t%v\t%v\t%d\t%s\t%s\t%s\t%s\t\n", r.impl, r.workload,
			float64(r.ops)/r.elapsed.Seconds(), ms(r.pct(50)), ms(r.pct(99)), ms(mx), r.fails, hold, pctIdeal, cpu, cmds)
	}
	return tw.Flush()
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3fms", float64(d.Microseconds())/1000) }
