package docker_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	tcnetwork "github.com/testcontainers/testcontainers-go/network"

	"github.com/lockproof/lockproof/chaos/docker"
	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/internal/chaostest"
	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/internal/toxitest"
)

// New is an env.Constructor.
var _ env.Constructor = docker.New

// shared is the one topology all tests of this binary use (started in
// TestMain); skipReason is set when Docker cannot run here outside CI.
var (
	shared     *docker.Env
	skipReason string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	toxitest.Build()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if reason := unavailable(ctx); reason != "" {
		if redistest.InCI() {
			fmt.Fprintf(os.Stderr, "CI=true but %s\n", reason)
			return 1
		}
		skipReason = reason
		return m.Run()
	}
	if n, err := docker.PruneStale(ctx); err != nil || n > 0 {
		fmt.Fprintf(os.Stderr, "pruned %d containers and networks of dead test runs (%v)\n", n, err)
	}
	start := time.Now()
	e, err := docker.Start(ctx, env.Spec{DownAfter: time.Second, FailoverTimeout: 3 * time.Second}, docker.Options{Image: os.Getenv(docker.ImageEnvVar), Logger: testLogger()})
	if err != nil {
		fmt.Fprintf(os.Stderr, "start shared docker environment: %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "docker environment %s up in %v (image %s built=%v in %v)\n",
		e.ID, time.Since(start).Round(time.Millisecond), e.Image().Ref, e.Image().Built, e.Image().Took.Round(time.Millisecond))
	shared = e
	code := m.Run()

	cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
	defer ccancel()
	if err := e.Close(cctx); err != nil {
		fmt.Fprintf(os.Stderr, "close shared docker environment: %v\n", err)
		code = 1
	}
	if cs, ns, err := docker.Leftovers(cctx, e.ID); err != nil || len(cs)+len(ns) > 0 {
		fmt.Fprintf(os.Stderr, "after Close: containers %v, networks %v remain (%v)\n", cs, ns, err)
		code = 1
	}
	return code
}

// unavailable says why the Docker environment cannot run here, or "".
func unavailable(ctx context.Context) string {
	if !docker.Available(ctx) {
		return "Docker engine unreachable"
	}
	if os.Getenv(docker.ImageEnvVar) == "" {
		if _, err := exec.LookPath("redis-server"); err != nil {
			return "no redis-server on the host to build the Redis image from (or set " + docker.ImageEnvVar + ")"
		}
	}
	return ""
}

func testLogger() *slog.Logger {
	level := slog.LevelWarn
	if testing.Verbose() {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// sharedEnv returns the shared environment or skips (outside CI) when Docker is missing.
func sharedEnv(t *testing.T) *docker.Env {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
	return shared
}

// eventually retries f every 100ms until it succeeds or ctx ends.
func eventually(ctx context.Context, t *testing.T, what string, f func() error) {
	t.Helper()
	for {
		err := f()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v (last: %v)", what, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func TestImageBuiltOnceThenReused(t *testing.T) {
	e := sharedEnv(t)
	if os.Getenv(docker.ImageEnvVar) != "" {
		t.Skipf("%s is set: the local image is not used", docker.ImageEnvVar)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	img, err := docker.BuildRedisImage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if img.Built {
		t.Errorf("second BuildRedisImage built %s again; want it reused", img.Ref)
	}
	if img.Ref != e.Image().Ref || !strings.HasPrefix(img.Ref, docker.RedisRepo+":") {
		t.Errorf("image %q; the environment runs %q", img.Ref, e.Image().Ref)
	}
}

func TestTopologyAndSentinelMaster(t *testing.T) {
	e := sharedEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topo := e.Topology()
	if e.Kind() != env.Docker || len(topo.Data) != 3 || len(topo.Sentinels) != 3 || topo.Fenced.ID != "fenced" {
		t.Fatalf("kind %s, topology %+v; want docker, 3 data nodes, 3 sentinels, a fenced node", e.Kind(), topo)
	}
	for _, n := range topo.Nodes() {
		host, _, err := net.SplitHostPort(n.Upstream)
		if err != nil || host != "127.0.0.1" {
			t.Errorf("%s: upstream %q; want a published port on 127.0.0.1", n.ID, n.Upstream)
		}
		if n.Role == env.RoleData && (n.ReplProxy == "" || !strings.HasPrefix(n.Addr, e.Gateway()+":")) {
			t.Errorf("%s: addr %q, replication proxy %q; want a proxy on the gateway %s", n.ID, n.Addr, n.ReplProxy, e.Gateway())
		}
		if _, err := e.ContainerID(n.ID); err != nil {
			t.Error(err)
		}
	}
	chaostest.AsksPassword(t, e)
	m, err := env.Master(ctx, topo)
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != "data-0" {
		t.Errorf("sentinels report master %s; want data-0", m.ID)
	}
	// The replicas Sentinel knows are the announced replication proxies.
	rs, err := env.Replicas(ctx, topo.Auth, topo.Sentinels[0], topo.MasterName)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range topo.Data[1:] {
		if _, ok := rs[n.Addr]; !ok {
			t.Errorf("sentinel replicas %v lack %s at %s", rs, n.ID, n.Addr)
		}
	}
}

func TestWriteMasterReadReplica(t *testing.T) {
	e := sharedEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l := chaostest.Links(t, e, "rw")
	c := chaostest.FailoverClient(t, e, l, 2*time.Second)
	if err := c.Set(ctx, "rw-key", "hello", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, "WAIT", 2, 5000).Err(); err != nil {
		t.Fatal(err)
	}
	m, err := env.Master(ctx, e.Topology())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range e.Topology().Data {
		if n.ID == m.ID {
			continue
		}
		addr, err := l.Addr(n.ID) // this client's proxy to the replica
		if err != nil {
			t.Fatal(err)
		}
		r := redis.NewClient(&redis.Options{Addr: addr, Password: string(e.Topology().Auth.Password), ReadTimeout: 2 * time.Second})
		got, err := r.Get(ctx, "rw-key").Result()
		role, _ := r.Info(ctx, "replication").Result()
		_ = r.Close()
		if err != nil || got != "hello" {
			t.Errorf("replica %s: GET = %q, %v; want hello", n.ID, got, err)
		}
		if !strings.Contains(role, "role:slave") {
			t.Errorf("%s is not a replica: %s", n.ID, role)
		}
	}
	// The write went through this client's proxy to the master: disabling it cuts the client off.
	p, err := l.Proxy(m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Disable(); err != nil {
		t.Fatal(err)
	}
	err = c.Set(ctx, "rw-key", "cut", 0).Err()
	if err2 := p.Enable(); err2 != nil {
		t.Fatal(err2)
	}
	if err == nil {
		t.Fatal("SET succeeded with the client's proxy to the master disabled")
	}
}

func TestPauseMasterTimesOutThenRecovers(t *testing.T) {
	e := sharedEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topo := e.Topology()
	m, err := env.Master(ctx, topo)
	if err != nil {
		t.Fatal(err)
	}
	l := chaostest.Links(t, e, "pause")
	addr, err := l.Addr(m.ID)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: addr, Password: string(topo.Auth.Password), DialTimeout: time.Second,
		ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond, MaxRetries: -1})
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.Pause(ctx, m.ID); err != nil {
		t.Fatal(err)
	}
	err = c.Ping(ctx).Err()
	if rerr := e.Resume(ctx, m.ID); rerr != nil {
		t.Fatal(rerr)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("PING to the paused master: %v; want a timeout", err)
	}
	eventually(ctx, t, "PING after resume", func() error { return c.Ping(ctx).Err() })
}

func TestKillMasterFailsOver(t *testing.T) {
	e := sharedEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topo := e.Topology()
	old, err := env.Master(ctx, topo)
	if err != nil {
		t.Fatal(err)
	}
	l := chaostest.Links(t, e, "fo")
	c := chaostest.FailoverClient(t, e, l, time.Second)
	if err := c.Set(ctx, "before", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, "WAIT", 2, 5000).Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.Kill(ctx, old.ID); err != nil {
		t.Fatal(err)
	}
	nm, err := env.WaitMaster(ctx, topo, old.ID)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("master %s killed; sentinels promoted %s at %s", old.ID, nm.ID, nm.Addr)
	var got string
	eventually(ctx, t, "client follows the failover", func() error {
		var err error
		if got, err = c.Get(ctx, "before").Result(); err != nil {
			return err
		}
		return c.Set(ctx, "after", "2", 0).Err()
	})
	if got != "1" {
		t.Fatalf("replicated key = %q; want 1", got)
	}
	// The killed node comes back empty and Sentinel makes it a replica of the new master.
	if err := e.Restart(ctx, old.ID); err != nil {
		t.Fatal(err)
	}
	admin := redis.NewClient(&redis.Options{Addr: old.Upstream, Password: string(topo.Auth.Password), ReadTimeout: time.Second})
	defer admin.Close()
	// Ask the Sentinels who is master once they settled, rather than assume
	// the first new master still is: on a busy machine Sentinel may fail over
	// again (down-after is short here).
	cur, err := env.WaitConverged(ctx, topo)
	if err != nil {
		t.Fatal(err)
	}
	nm = cur
	_, nport, _ := net.SplitHostPort(nm.Addr)
	eventually(ctx, t, "restarted node becomes a replica of the new master", func() error {
		if cur.ID == old.ID {
			return nil // promoted again after it resynced: it is the master they agree on
		}
		info, err := admin.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "role:slave") || !strings.Contains(info, "master_port:"+nport) ||
			!strings.Contains(info, "master_link_status:up") {
			return fmt.Errorf("replication info: %s", info)
		}
		return nil
	})
	if got, err := admin.Get(ctx, "after").Result(); err != nil || got != "2" {
		t.Errorf("restarted %s: GET after = %q, %v; want 2 (resynced from %s)", old.ID, got, err, nm.ID)
	}
}

func TestCloseRemovesEverything(t *testing.T) {
	sharedEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e, err := docker.Start(ctx, env.Spec{Replicas: -1, Sentinels: 1, Redlock: 3}, docker.Options{Image: os.Getenv(docker.ImageEnvVar), Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) }) // no-op after the Close below
	if n := len(e.Topology().Redlock); n != 3 {
		t.Errorf("%d redlock nodes; want 3", n)
	}
	cs, ns, err := docker.Leftovers(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 6 || len(ns) != 1 { // data-0, fenced, 3 redlock, 1 sentinel
		t.Errorf("running: %d containers, %d networks; want 6 and 1", len(cs), len(ns))
	}
	// A paused node can be killed; restarted, it is empty (its data lived in a tmpfs).
	rl, err := e.Topology().Node("redlock-1")
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: rl.Upstream, Password: string(e.Topology().Auth.Password), ReadTimeout: 2 * time.Second})
	defer c.Close()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.Pause(ctx, "redlock-1"); err != nil {
		t.Fatal(err)
	}
	if err := e.Kill(ctx, "redlock-1"); err != nil {
		t.Fatal(err)
	}
	if err := e.Restart(ctx, "redlock-1"); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Errorf("restarted redlock-1: EXISTS k = %d, %v; want 0 (empty)", n, err)
	}
	if err := e.Pause(ctx, "redlock-2"); err != nil { // a paused container must go too
		t.Fatal(err)
	}
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if cs, ns, err = docker.Leftovers(ctx, e.ID); err != nil || len(cs)+len(ns) != 0 {
		t.Errorf("after Close: containers %v, networks %v remain (%v)", cs, ns, err)
	}
	if n := e.ProxyCount(); n != 0 {
		t.Errorf("%d proxies remain after Close", n)
	}
	if err := e.Pause(ctx, "fenced"); !errors.Is(err, docker.ErrClosed) {
		t.Errorf("Pause after Close: %v; want ErrClosed", err)
	}
}

func TestRedisImageFallsBackToLocalBuild(t *testing.T) {
	e := sharedEnv(t)
	if os.Getenv(docker.ImageEnvVar) != "" {
		t.Skipf("%s is set: the local image is not used", docker.ImageEnvVar)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// A present image is used as named.
	img, err := docker.RedisImage(ctx, e.Image().Ref, testLogger())
	if err != nil || img.Ref != e.Image().Ref || img.Built {
		t.Fatalf("RedisImage(%s) = %+v, %v; want it as is", e.Image().Ref, img, err)
	}
	// An image that can be neither found nor pulled gives way to the local
	// one. (Its registry is a closed port on loopback: no traffic leaves.)
	img, err = docker.RedisImage(ctx, "127.0.0.1:1/lockproof/no-such-image:0", testLogger())
	if err != nil {
		t.Fatal(err)
	}
	if img.Ref != e.Image().Ref {
		t.Errorf("fallback image %q; want the local %q", img.Ref, e.Image().Ref)
	}
}

// containerSet lists all containers labelled by any Docker environment.
func containerSet(ctx context.Context, t *testing.T) map[string]bool {
	t.Helper()
	cs, _, err := docker.Leftovers(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	for _, c := range cs {
		set[c] = true
	}
	return set
}

func TestFailedStartLeavesNothing(t *testing.T) {
	sharedEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before := containerSet(ctx, t)
	// The start runs out of time part-way (after some containers started).
	sctx, scancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer scancel()
	e, err := docker.Start(sctx, env.Spec{}, docker.Options{Image: os.Getenv(docker.ImageEnvVar), Logger: testLogger()})
	if err == nil { // a very fast machine: Close cleans up instead
		t.Log("the topology started within 1.5s")
		if err := e.Close(ctx); err != nil {
			t.Fatal(err)
		}
	} else {
		t.Logf("start failed as intended: %v", err)
	}
	for c := range containerSet(ctx, t) {
		if !before[c] {
			t.Errorf("container %.12s left behind by the failed start", c)
		}
	}
}

func TestPruneStaleRemovesDeadOwnersNetworks(t *testing.T) {
	sharedEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A process that has ended stands for a test binary killed mid-run.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	id := fmt.Sprintf("stale%d", cmd.Process.Pid)
	nw, err := tcnetwork.New(ctx, tcnetwork.WithLabels(map[string]string{
		docker.LabelEnv: id, docker.LabelOwner: fmt.Sprintf("%s/%d", host, cmd.Process.Pid),
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nw.Remove(context.Background()) })
	if _, ns, err := docker.Leftovers(ctx, id); err != nil || len(ns) != 1 {
		t.Fatalf("stale network not listed: %v, %v", ns, err)
	}
	if _, err := docker.PruneStale(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ns, err := docker.Leftovers(ctx, id); err != nil || len(ns) != 0 {
		t.Fatalf("after PruneStale: networks %v remain (%v)", ns, err)
	}
	// The running shared environment belongs to this live process: kept.
	if cs, _, err := docker.Leftovers(ctx, shared.ID); err != nil || len(cs) == 0 {
		t.Fatalf("PruneStale removed the live environment's containers (%v, %v)", cs, err)
	}
}

// BenchmarkStartClose measures starting the default topology (3 data nodes,
// 3 Sentinels, a fenced node; the image exists) and removing it again.
func BenchmarkStartClose(b *testing.B) {
	if skipReason != "" {
		b.Skip(skipReason)
	}
	ctx := context.Background()
	for b.Loop() {
		e, err := docker.Start(ctx, env.Spec{}, docker.Options{Image: os.Getenv(docker.ImageEnvVar), Logger: testLogger()})
		if err != nil {
			b.Fatal(err)
		}
		if err := e.Close(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuildRedisImageCached measures finding the local image by the
// hash of its inputs (reading redis-server and its libraries).
func BenchmarkBuildRedisImageCached(b *testing.B) {
	if skipReason != "" {
		b.Skip(skipReason)
	}
	ctx := context.Background()
	for b.Loop() {
		if _, err := docker.BuildRedisImage(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDockerCluster starts a Redis Cluster of containers and checks it as
// every environment's cluster is checked (chaostest.CheckCluster): every
// link through the proxies on the host, both the data port's and the
// cluster bus's announced on the network's gateway, a cut master's write
// lost to a takeover, refusing proxies, a restarted node that keeps its
// identity. Close then leaves nothing behind.
func TestDockerCluster(t *testing.T) {
	sharedEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e, err := docker.Start(ctx, env.Spec{Cluster: &env.ClusterSpec{NodeTimeout: time.Second}}, docker.Options{Image: os.Getenv(docker.ImageEnvVar), Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = e.Close(context.Background())
		}
	})
	topo := e.Topology()
	for _, n := range topo.Cluster {
		if !strings.HasPrefix(n.Addr, e.Gateway()+":") || n.BusProxy == "" {
			t.Errorf("%s: addr %q, bus proxy %q; want both proxies on the gateway %s", n.ID, n.Addr, n.BusProxy, e.Gateway())
		}
		if _, err := e.ContainerID(n.ID); err != nil {
			t.Error(err)
		}
	}
	chaostest.AsksPassword(t, e)
	t.Run("check", func(t *testing.T) { chaostest.CheckCluster(t, e) })
	closed = true
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if cs, ns, err := docker.Leftovers(ctx, e.ID); err != nil || len(cs)+len(ns) > 0 {
		t.Errorf("after Close: containers %v, networks %v remain (%v)", cs, ns, err)
	}
	if n := e.ProxyCount(); n != 0 {
		t.Errorf("%d proxies remain after Close", n)
	}
}
