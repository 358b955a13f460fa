package main

import (
	"github.com/redis/go-redis/v9"

	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/internal/keeprun"
	"github.com/lockproof/lockproof/internal/redisproc"
	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/runner"
)

// TestRunOnBYOCluster: lockproof run --topology cluster --provider byo on
// a Redis Cluster it did not start (processes started here, known to the
// run by one seed in a --byo-config file, behind a Toxiproxy of the
// test's own). The lock runs, the operator's failover strikes and bites,
// and summary.json says the topology. A deployment of the other topology
// is refused before anything runs.
func TestRunOnBYOCluster(t *testing.T) {
	redistest.Require(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The deployment asks a password (issue 47 item 7), which the run
	// takes from LOCKPROOF_REDIS_PASSWORD, not from its config file, and
	// writes nowhere.
	const password = "team-password-0b5e"
	t.Setenv("LOCKPROOF_REDIS_PASSWORD", password)
	c, err := redisproc.StartCluster(ctx, redisproc.ClusterConfig{Replicas: 1, NodeTimeout: time.Second, Password: password})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	fenced, toxi := fencedAndToxiproxy(t, ctx, password)
	dir := t.TempDir()
	config := func(name string, cfg env.BYOConfig) string {
		cfg.ToxiproxyURL, cfg.Fenced = toxi.URL, fenced.Addr
		b, err := json.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	clusterCfg := config("cluster.json", env.BYOConfig{Cluster: []string{c.Announced[0]}})
	sentinelCfg := config("sentinel.json", env.BYOConfig{Data: []string{c.Announced[0]}})

	code, _, stderr := runRunArgs(t, "--topology", "cluster", "--provider", "byo", "--byo-config", sentinelCfg,
		"--locks", "fenced", "--faults", "none", "--out", filepath.Join(dir, "refused"))
	if code != exitBadInput || !strings.Contains(stderr, "sentinel one") {
		t.Errorf("a sentinel deployment for --topology cluster: exit %d, %q; want %d saying so", code, stderr, exitBadInput)
	}

	// The user's own data (issue 47 items 5 and 6): a key whose name holds
	// a scenario's key name, which key-loss's SCAN once matched and deleted.
	user := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), Password: password})
	defer func() { _ = user.Close() }()
	userKeys := []string{"user:fenced-key-loss-1-k0", "user:{fenced-none-1-k0}"}
	for _, k := range userKeys {
		if err := user.Set(ctx, k, "mine", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(keeprun.Dir(t), "run") // it must not exist: a refused run makes none
	// A failover changes the user's deployment: refused unless --yes
	// (issue 47 item 4), before anything runs or is written.
	byoRun := []string{"--topology", "cluster", "--provider", "byo", "--byo-config", clusterCfg,
		"--locks", "fenced", "--faults", "none,key-loss,failover", "--seeds", "1", "--out", out, "--no-report"}
	code, _, stderr = runRunArgs(t, byoRun...)
	if _, err := os.Stat(out); code != exitBadInput || !strings.Contains(stderr, "--yes") || !strings.Contains(stderr, "CLUSTER FAILOVER") || err == nil {
		t.Errorf("failover on byo without --yes: exit %d, %q, out made: %v; want %d asking for --yes, nothing made", code, stderr, err == nil, exitBadInput)
	}
	// --plan says what each fault sends which node, and runs nothing.
	code, stdout, stderr := runRunArgs(t, append(byoRun, "--plan", "--yes")...)
	if _, err := os.Stat(out); code != exitOK || err == nil || !strings.Contains(stdout, "CLUSTER FAILOVER, once per scenario") ||
		!strings.Contains(stdout, "cluster seeds: "+c.Announced[0]) || !strings.Contains(stdout, "3 scenarios") ||
		!strings.Contains(stdout, "keys named lockproof-<run>-") || !strings.Contains(stdout, "login: user default with a password (not shown)") {
		t.Errorf("--plan: exit %d, out made: %v, stdout:\n%s\nstderr: %s", code, err == nil, stdout, stderr)
	}
	code, stdout, stderr = runRunArgs(t, append(byoRun, "--yes")...)
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	if code != exitOK {
		t.Fatalf("exit %d; want %d", code, exitOK)
	}
	sum, err := runner.ReadSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	if contract.TopologyOf(sum.Topology) != contract.TopologyCluster || len(sum.Scenarios) != 3 {
		t.Fatalf("summary: topology %q, %d scenarios; want cluster, 3", sum.Topology, len(sum.Scenarios))
	}
	if !strings.Contains(stderr, "warning: the database at") {
		t.Errorf("a deployment holding the user's keys was not warned of:\n%s", stderr)
	}
	// The checks get a context of their own: the setup's bounded the
	// servers' start, and a run on a loaded machine (three scenarios, a
	// failover among them) can outlast it (CI: "context deadline
	// exceeded" on every check after a run that passed).
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, k := range userKeys {
		if v, err := user.Get(ctx, k).Result(); v != "mine" {
			t.Errorf("the user's key %s: %q, %v; want it untouched", k, v, err)
		}
	}
	// The run's keys were its own (lockproof-<run>-<scenario>-) and are
	// gone, from the replicas too once the DELs reached them.
	for _, s := range sum.Scenarios {
		ops, err := history.ReadFile(filepath.Join(out, s.History))
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range ops {
			if o.Key != "" && !strings.HasPrefix(o.Key, "lockproof-") {
				t.Errorf("%s: key %q; want the run's own prefix", s.ID(), o.Key)
				break
			}
		}
	}
	for _, a := range append(c.Addrs(), fenced.Addr) {
		rc := redis.NewClient(&redis.Options{Addr: a, Password: password})
		var ks []string
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if ks, _, err = rc.Scan(ctx, 0, "*lockproof-*", 100000).Result(); err != nil || len(ks) == 0 || time.Now().After(deadline) {
				break
			}
		}
		_ = rc.Close()
		if err != nil || len(ks) > 0 {
			t.Errorf("%s keeps the run's keys %v (%v)", a, ks, err)
		}
	}
	// The password is written nowhere: not in the output, not in any
	// file of the run.
	if strings.Contains(stdout+stderr, password) {
		t.Error("the run printed the password")
	}
	err = filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err == nil && strings.HasSuffix(p, ".gz") {
			var zr *gzip.Reader
			if zr, err = gzip.NewReader(bytes.NewReader(b)); err == nil {
				b, err = io.ReadAll(zr)
			}
		}
		if err == nil && strings.Contains(string(b), password) {
			t.Errorf("%s holds the password", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRunBYOUnreachableExits4 (issues 62.8, 63.2): a bring-your-own run
// whose Toxiproxy does not answer is refused as an environment that lacks
// what the run needs: exit 4, the refusal naming the Toxiproxy, and no
// panic (BYOEnv.Close on the nil environment a failed open returned).
func TestRunBYOUnreachableExits4(t *testing.T) {
	dir := t.TempDir()
	closed := "127.0.0.1:1" // nothing listens on port 1
	b, err := json.Marshal(env.BYOConfig{ToxiproxyURL: "http://" + closed, Data: []string{closed}, Fenced: closed})
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "byo.json")
	if err := os.WriteFile(cfg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var code int
	var stderr string
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("lockproof run --provider byo with Toxiproxy unreachable panicked: %v", r)
			}
		}()
		code, _, stderr = runRunArgs(t, "--provider", "byo", "--byo-config", cfg, "--locks", "lua", "--faults", "none",
			"--seeds", "1", "--out", filepath.Join(dir, "run"))
	}()
	if code != exitEnvironment || !strings.Contains(stderr, "toxiproxy") {
		t.Errorf("exit %d, %q; want %d naming the toxiproxy", code, stderr, exitEnvironment)
	}
}

// fencedAndToxiproxy starts what every BYO deployment of a test needs
// beside its own servers: the fenced resources' Redis (asking password,
// when set) and a Toxiproxy server, both stopped when t ends.
func fencedAndToxiproxy(t *testing.T, ctx context.Context, password string) (*redisproc.Process, *env.ToxiServer) {
	t.Helper()
	fenced, err := redisproc.Start(ctx, redisproc.Config{Password: password})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fenced.Stop() })
	toxi, err := env.StartToxiproxy(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = toxi.Close(context.Background()) })
	return fenced, toxi
}
