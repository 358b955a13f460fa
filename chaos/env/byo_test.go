package env_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/internal/chaostest"
)

// TestBYO uses a process environment as the "existing" deployment and a
// separate Toxiproxy server as the team's Toxiproxy.
func TestBYO(t *testing.T) {
	existing := chaostest.StartProcess(t, env.Spec{Replicas: 1, Sentinels: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	toxi := chaostest.Toxiproxy(t)
	topo := existing.Topology()
	cfg, err := env.BYOFromEnviron(func(k string) string {
		return map[string]string{
			"LOCKPROOF_TOXIPROXY_URL": toxi.URL,
			"LOCKPROOF_MASTER_NAME":   topo.MasterName,
			"LOCKPROOF_SENTINELS":     topo.Sentinels[0],
			"LOCKPROOF_FENCED":        topo.Fenced.Upstream,
			// The process environment's servers and Sentinels ask a
			// password (issue 47 item 12): a deployment's login.
			"LOCKPROOF_REDIS_PASSWORD":    string(topo.Auth.Password),
			"LOCKPROOF_SENTINEL_PASSWORD": string(topo.Auth.SentinelPassword),
		}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	if topo.Auth.Password == "" || cfg.Password != topo.Auth.Password || cfg.SentinelPassword != topo.Auth.SentinelPassword {
		t.Fatalf("the login variables were not read, or the environment has no password: %s", cfg.Auth.Describe())
	}
	// Without the Sentinels' password the deployment does not open.
	nopw := *cfg
	nopw.SentinelPassword = ""
	if _, err := env.Open(ctx, env.Options{Kind: env.BYO, BYO: &nopw}); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("opened without the Sentinels' password: %v; want NOAUTH", err)
	}
	e, err := env.Open(ctx, env.Options{Kind: env.BYO, BYO: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	bt := e.Topology()
	if len(bt.Data) != 2 || bt.Data[0].Addr != topo.Data[0].Addr || bt.Fenced.Addr != topo.Fenced.Upstream {
		t.Fatalf("byo topology %+v; want the master %s and one replica discovered through Sentinel", bt, topo.Data[0].Addr)
	}
	if err := e.Pause(ctx, "data-0"); !errors.Is(err, env.ErrUnsupported) {
		t.Fatalf("Pause on byo: %v; want ErrUnsupported", err)
	}
	l := chaostest.Links(t, e, "byo1")
	c := chaostest.FailoverClient(t, e, l, time.Second)
	if err := c.Set(ctx, "byo", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if toxi.ProxyCount() != len(bt.Nodes()) {
		t.Fatalf("the team's toxiproxy holds %d proxies; want %d (one per node for the client)", toxi.ProxyCount(), len(bt.Nodes()))
	}
	// A partition of the client's own proxy to the master cuts it.
	p, err := l.Proxy("data-0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.AddToxic("cut", "timeout", "downstream", 1, map[string]any{"timeout": 0}); err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(ctx, 500*time.Millisecond)
	err = c.Get(sctx, "byo").Err()
	scancel()
	if err == nil {
		t.Fatal("GET through a cut byo proxy succeeded")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := toxi.ProxyCount(); n != 0 {
		t.Fatalf("%d proxies left on the team's toxiproxy after Links.Close", n)
	}
}

func TestChoose(t *testing.T) {
	ctx := context.Background()
	if _, err := env.Choose(ctx, env.Options{Kind: "nope"}); err == nil {
		t.Fatal("Choose accepted kind nope")
	}
	if _, err := env.Choose(ctx, env.Options{Kind: env.Docker}); !errors.Is(err, env.ErrUnavailable) {
		t.Fatalf("docker without a constructor: %v; want ErrUnavailable", err)
	}
	// The package reads no environment variable: LOCKPROOF_ENV is the
	// CLI's and the tests' to read and pass.
	t.Setenv(env.EnvVar, "nope")
	if k, err := env.Choose(ctx, env.Options{Kind: env.BYO}); err != nil || k != env.BYO {
		t.Fatalf("Kind byo: %v, %v", k, err)
	}
	if _, err := env.Open(ctx, env.Options{Kind: env.BYO}); !errors.Is(err, env.ErrUnavailable) {
		t.Fatalf("byo without config: %v; want ErrUnavailable", err)
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := env.Choose(ctx, env.Options{}); !errors.Is(err, env.ErrUnavailable) {
		t.Fatalf("no redis, no docker: %v; want ErrUnavailable", err)
	}
	docker := func(ctx context.Context, s env.Spec) (env.Env, error) { return nil, errors.New("unused") }
	if k, err := env.Choose(ctx, env.Options{Docker: docker, DockerCheck: func(context.Context) error { return nil }}); err != nil || k != env.Docker {
		t.Fatalf("no redis, docker reachable: %v, %v; want docker", k, err)
	}
}

// TestBYOCluster uses a process environment's Redis Cluster as the
// "existing" deployment, known by one seed: its nodes are discovered
// (masters by slot, then their replicas), a client reaches every shard
// through its own proxies on the team's Toxiproxy, and a cut of those
// proxies cuts it. The servers are not lockproof's to kill.
func TestBYOCluster(t *testing.T) {
	existing := chaostest.StartProcess(t, env.Spec{Cluster: &env.ClusterSpec{NodeTimeout: time.Second}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	toxi := chaostest.Toxiproxy(t)
	topo := existing.Topology()
	vars := map[string]string{
		"LOCKPROOF_TOXIPROXY_URL":  toxi.URL,
		"LOCKPROOF_CLUSTER":        topo.Cluster[4].Addr, // a replica's: any node knows them all
		"LOCKPROOF_FENCED":         topo.Fenced.Upstream,
		"LOCKPROOF_REDIS_PASSWORD": string(topo.Auth.Password),
	}
	cfg, err := env.BYOFromEnviron(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Open(ctx, env.Options{Kind: env.BYO, BYO: cfg}); !errors.Is(err, env.ErrWrongTopology) {
		t.Fatalf("a cluster deployment opened for the sentinel topology: %v; want ErrWrongTopology", err)
	}
	e, err := env.Open(ctx, env.Options{Kind: env.BYO, BYO: cfg, Spec: env.Spec{Cluster: &env.ClusterSpec{}}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	bt := e.Topology()
	if bt.Name() != "cluster" || len(bt.Cluster) != len(topo.Cluster) || bt.MasterName != "" || bt.NodeTimeout != time.Second {
		t.Fatalf("byo topology %+v; want the %d nodes of the cluster, its node timeout 1s", bt, len(topo.Cluster))
	}
	// The same nodes in the same order: masters by their first slot,
	// then shard by shard their replicas.
	for i, n := range bt.Cluster {
		if n.Addr != topo.Cluster[i].Addr || n.Upstream != n.Addr || n.Shard != topo.Cluster[i].Shard || n.ReplProxy != "" || n.BusProxy != "" {
			t.Errorf("discovered %+v; want %s at %s (shard %d), not proxied", n, topo.Cluster[i].ID, topo.Cluster[i].Addr, topo.Cluster[i].Shard)
		}
	}
	v, err := env.WaitClusterAgreed(ctx, bt)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range bt.Cluster[3:] {
		if m := v.ReplicaOf[n.ID]; m != bt.Cluster[n.Shard].ID {
			t.Errorf("%s (shard %d) replicates %s", n.ID, n.Shard, m)
		}
	}
	if err := e.Kill(ctx, "cluster-0"); !errors.Is(err, env.ErrUnsupported) {
		t.Fatalf("Kill on byo: %v; want ErrUnsupported", err)
	}
	l := chaostest.Links(t, e, "byo1")
	c := chaostest.ClusterClient(t, e, l, time.Second)
	for _, k := range []string{"a", "b", "c", "d", "e", "f"} {
		if err := c.Set(ctx, k, "1", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if toxi.ProxyCount() != len(bt.Nodes()) {
		t.Fatalf("the team's toxiproxy holds %d proxies; want %d (one per node for the client)", toxi.ProxyCount(), len(bt.Nodes()))
	}
	for _, p := range l.Proxies() {
		if _, err := p.AddToxic("cut", "timeout", "downstream", 1, map[string]any{"timeout": 0}); err != nil {
			t.Fatal(err)
		}
	}
	sctx, scancel := context.WithTimeout(ctx, 500*time.Millisecond)
	err = c.Get(sctx, "a").Err()
	scancel()
	if err == nil {
		t.Fatal("GET through cut byo proxies succeeded")
	}
}

// TestBYOClusterConfig: a deployment is a cluster or a Sentinel one, and
// a bad seed is named by its field.
func TestBYOClusterConfig(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		cfg  env.BYOConfig
		want string
	}{
		{env.BYOConfig{Cluster: []string{"a:1"}, Sentinels: []string{"b:2"}}, "not both"},
		{env.BYOConfig{Cluster: []string{"nohost"}}, "Cluster[0]"},
	} {
		c.cfg.ToxiproxyURL, c.cfg.Fenced = "http://127.0.0.1:1", "127.0.0.1:2"
		if _, err := env.NewBYO(ctx, c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewBYO(%+v): %v; want an error saying %q", c.cfg, err, c.want)
		}
	}
}

// TestToxiproxyURLNeverPrinted: a password in the Toxiproxy URL never
// reaches an error (summary.json, reports and junit.xml carry them) nor
// the plan (issue 47 item 8).
func TestToxiproxyURLNeverPrinted(t *testing.T) {
	ctx := context.Background()
	for _, raw := range []string{"http://lp:s3cret@127.0.0.1:1", "http://lp:s3cret@[::1", "lp:s3cret@host:1"} {
		_, err := env.NewBYO(ctx, env.BYOConfig{ToxiproxyURL: raw, Fenced: "127.0.0.1:1", Data: []string{"127.0.0.1:1"}})
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("env.NewBYO(%q): %v; want an error without the password", raw, err)
		}
		if r := env.RedactURL(raw); strings.Contains(r, "s3cret") {
			t.Errorf("env.RedactURL(%q) = %q", raw, r)
		}
	}
	if r := env.RedactURL("http://127.0.0.1:8474"); r != "http://127.0.0.1:8474" {
		t.Errorf("RedactURL of a URL without a password = %q, want it as is", r)
	}
}

// TestOpenBYOFailedIsNil (issue 62.8): an environment that could not be
// opened is a nil Env, not a nil *BYOEnv in an interface (whose Close
// panicked in the runner), and the preflight says the Toxiproxy does not
// answer, before anything runs.
func TestOpenBYOFailedIsNil(t *testing.T) {
	closed := "127.0.0.1:1"
	cfg := &env.BYOConfig{ToxiproxyURL: "http://" + closed, Data: []string{closed}, Fenced: closed}
	e, err := env.Open(context.Background(), env.Options{Kind: env.BYO, BYO: cfg})
	if err == nil || e != nil {
		t.Fatalf("Open of a deployment whose Toxiproxy does not answer: %#v, %v; want a nil Env and an error", e, err)
	}
	if _, err := env.Preflight(context.Background(), env.Options{Kind: env.BYO, BYO: cfg}); !errors.Is(err, env.ErrUnavailable) || !strings.Contains(err.Error(), "toxiproxy http://"+closed) {
		t.Errorf("Preflight: %v; want env.ErrUnavailable naming the toxiproxy", err)
	}
}
