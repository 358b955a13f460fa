package main

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/internal/alone"
	"github.com/lockproof/lockproof/internal/etcdproc"
	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/internal/tlstest"
	"github.com/lockproof/lockproof/internal/zkproc"
	"github.com/lockproof/lockproof/runner"
)

// TestRunOnBYOStoresWithLogins (issue 62, item 6): lockproof run
// --provider byo on an etcd that asks a login (its authentication on)
// and speaks TLS only, with client certificates,
// and a ZooKeeper that asks one (digest auth enforced, its root's ACL
// admitting one identity), both started here as a user's would be: the
// store's login, from LOCKPROOF_STORE_PASSWORD, reaches the locks'
// traffic, and the runs pass; --plan names every member, the store's
// login (never its password) and the requests a run sends the store;
// the ZooKeeper nodes the run created admit its identity alone; the
// password is written nowhere.
func TestRunOnBYOStoresWithLogins(t *testing.T) {
	if err := errors.Join(env.StoreMissing("etcd"), env.StoreMissing("zookeeper")); err != nil {
		if redistest.InCI() {
			t.Fatalf("CI=true but %v", err)
		}
		t.Skip(err)
	}
	alone.Take(t) // a JVM, an etcd and a workload: not beside tests that need the cores
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const password = "store-password-7c1d"
	t.Setenv("LOCKPROOF_STORE_PASSWORD", password)

	// etcd speaks TLS only, and asks clients for a certificate.
	dir := t.TempDir()
	ca, sc, sk, cc, ck := tlstest.Files(t, dir)
	etcd, err := etcdproc.StartCluster(ctx, etcdproc.ClusterConfig{Members: 1, ElectionTimeout: 500 * time.Millisecond,
		ClientTLS: &etcdproc.ClientTLS{CertFile: sc, KeyFile: sk, CAFile: ca, Client: tlstest.ClientConfig(t, ca, cc, ck)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = etcd.Stop() })
	if err := etcd.EnableAuth(ctx, 0, password); err != nil {
		t.Fatal(err)
	}
	zk, err := zkproc.StartCluster(ctx, zkproc.ClusterConfig{Servers: 1, EnforceAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = zk.Stop() })
	zkAddr := zk.Servers[0].ClientAddr
	if err := zkproc.LockRoot(ctx, zkAddr, "team", password); err != nil {
		t.Fatal(err)
	}
	fenced, toxi := fencedAndToxiproxy(t, ctx, "")

	for _, tc := range []struct {
		topology, lock string
		cfg            env.BYOConfig
		member, login  string
		ops            []string
	}{
		{"etcd", "etcd-fenced", env.BYOConfig{Etcd: []string{etcd.Members[0].ClientAddr},
			Auth: env.Auth{StoreUsername: "root", StoreTLS: &env.TLS{CAFile: ca, CertFile: cc, KeyFile: ck}}},
			"etcd members: " + etcd.Members[0].ClientAddr, "login (etcd): user root with a password (not shown); TLS, servers checked against " + ca + ", client certificate " + cc,
			[]string{"LeaseGrant", "LeaseKeepAlive", "LeaseRevoke", "Txn", "Range", "Watch", "DeleteRange", "as user root"}},
		{"zookeeper", "zk-fenced", env.BYOConfig{ZooKeeper: []string{zkAddr}, Auth: env.Auth{StoreUsername: "team"}},
			"zookeeper servers: " + zkAddr, "login (zookeeper): user team with a password (not shown); no TLS",
			[]string{"/lockproof/<lock key>", "ephemeral sequential", "getChildren", "exists", "getData with a watch", "delete", "closeSession", "admits the login's digest identity alone", "as user team"}},
	} {
		t.Run(tc.topology, func(t *testing.T) {
			tc.cfg.ToxiproxyURL, tc.cfg.Fenced = toxi.URL, fenced.Addr
			b, err := json.Marshal(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			cfgFile := filepath.Join(dir, tc.topology+".json")
			if err := os.WriteFile(cfgFile, b, 0o600); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, tc.topology)
			args := []string{"--topology", tc.topology, "--provider", "byo", "--byo-config", cfgFile,
				"--locks", tc.lock, "--faults", "none", "--seeds", "1", "--duration", "2s", "--out", out, "--no-report"}
			code, stdout, stderr := runRunArgs(t, append(args, "--plan")...)
			if code != exitOK {
				t.Fatalf("--plan: exit %d\n%s\n%s", code, stdout, stderr)
			}
			var missing []string
			for _, want := range append([]string{tc.member, tc.login, "fenced resources: " + fenced.Addr}, tc.ops...) {
				if !strings.Contains(stdout, want) {
					missing = append(missing, want)
				}
			}
			if len(missing) > 0 {
				t.Errorf("--plan does not say %q:\n%s", missing, stdout)
			}
			code, stdout, stderr = runRunArgs(t, args...)
			if code != exitOK {
				t.Fatalf("run: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			// The locks held: a run whose every acquire was refused
			// would pass its checks with nothing held.
			sum, err := runner.ReadSummary(out)
			if err != nil || len(sum.Scenarios) != 1 {
				t.Fatalf("summary: %v, %v", sum, err)
			}
			ops, err := history.ReadFile(filepath.Join(out, sum.Scenarios[0].History))
			if err != nil {
				t.Fatal(err)
			}
			held := 0
			for _, o := range ops {
				if o.Kind == history.Acquire && o.Result == history.OK {
					held++
				}
			}
			if held == 0 {
				t.Errorf("no acquire held the lock in %d ops", len(ops))
			}
			for name, text := range map[string]string{"--plan and run's stdout": stdout, "stderr": stderr} {
				if strings.Contains(text, password) {
					t.Errorf("%s holds the password", name)
				}
			}
			_ = filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), password) {
					t.Errorf("%s holds the password", p)
				}
				return nil
			})
			if tc.topology == "zookeeper" {
				// The run's container node (reaped a minute after it
				// empties) admits the run's identity, and no other.
				if _, err := zkproc.Children(ctx, zkAddr, "team", password, "/lockproof"); err != nil {
					t.Errorf("/lockproof as the run's identity: %v", err)
				}
				if kids, err := zkproc.Children(ctx, zkAddr, "intruder", "guess", "/lockproof"); !errors.Is(err, zkproc.ErrRefused) {
					t.Errorf("/lockproof as another identity: %v, %v; want ErrRefused", kids, err)
				}
			}
		})
	}
}
