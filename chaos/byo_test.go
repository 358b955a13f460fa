package chaos_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/chaos"
	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/internal/chaostest"
	"github.com/lockproof/lockproof/chaos/workload"
	"github.com/lockproof/lockproof/checker"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/internal/redisproc"
	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/internal/tlstest"
	"github.com/lockproof/lockproof/zoo"
)

// TestBYOOverTLSWithAUTH: a bring-your-own deployment that speaks TLS
// only (with client certificates) and asks a password: a lone master,
// which also keeps the fenced resources, reached through a Toxiproxy of
// the team's own (issue 47 item 7). The fenced lock's scenario runs, and
// key-loss finds and deletes a holder's keys through the nemesis's own
// TLS client: every client of the run, the locks', the resources' and
// the harness's, logged in over TLS. The same deployment without the
// TLS settings, or without the password, is refused when opened, and no
// error, history or evidence holds the password.
func TestBYOOverTLSWithAUTH(t *testing.T) {
	t.Parallel()
	redistest.Require(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	ca, sc, sk, cc, ck := tlstest.Files(t, dir)
	tlsPort, err := redisproc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	const password = "pw-of-the-team-7f3a"
	// The plain port is redisproc's own readiness check; the deployment
	// given to the run is the TLS port alone.
	srv, err := redisproc.Start(ctx, redisproc.Config{Password: password, Extra: []string{
		"tls-port " + strconv.Itoa(tlsPort), "tls-cert-file " + sc, "tls-key-file " + sk,
		"tls-ca-cert-file " + ca, "tls-auth-clients yes"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(tlsPort))
	toxi := chaostest.Toxiproxy(t)
	good := env.BYOConfig{ToxiproxyURL: toxi.URL, Data: []string{addr}, Fenced: addr,
		Auth: env.Auth{Password: password, DB: 3, TLS: &env.TLS{CAFile: ca, CertFile: cc, KeyFile: ck}}}

	noTLS := good
	noTLS.TLS = nil
	noPassword := good
	noPassword.Password = ""
	for name, cfg := range map[string]env.BYOConfig{"no TLS": noTLS, "no password": noPassword} {
		e, err := env.Open(ctx, env.Options{Kind: env.BYO, BYO: &cfg})
		if err == nil {
			err = chaos.ClearKeys(ctx, e, "lockproof-probe-")
			_ = e.Close(ctx)
		}
		if err == nil {
			t.Errorf("%s: a deployment that wants TLS and a password answered", name)
		}
	}
	bad := good
	bad.TLS = &env.TLS{CAFile: filepath.Join(dir, "missing.pem")}
	if _, err := env.Open(ctx, env.Options{Kind: env.BYO, BYO: &bad}); err == nil || !strings.Contains(err.Error(), "CAFile") {
		t.Errorf("a CA file that does not exist: %v; want an error naming CAFile", err)
	}

	e, err := env.Open(ctx, env.Options{Kind: env.BYO, BYO: &good})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	for _, fault := range []string{contract.FaultNone, contract.FaultKeyLoss} {
		s := chaos.Scenario{Lock: "fenced", Fault: fault, Seed: 1, Duration: 3 * time.Second,
			KeyPrefix: "lockproof-tls-" + fault + "-", Workload: workload.Config{Locks: zoo.Builtin(), Hold: time.Second}}
		out, err := chaos.Run(ctx, e, s, filepath.Join(dir, fault))
		if err != nil {
			t.Fatalf("%s: %v", fault, err)
		}
		if out.FaultErr != nil {
			t.Errorf("%s: fault: %v", fault, out.FaultErr)
		}
		granted := 0
		for _, o := range out.Ops {
			if o.Kind == history.Acquire && o.Result == history.OK {
				granted++
			}
		}
		if granted == 0 {
			t.Errorf("%s: no grant in %d ops: the clients did not reach the lock over TLS", fault, len(out.Ops))
		}
		if fault == contract.FaultKeyLoss && !strings.Contains(out.FaultEvidence, "keys deleted") {
			t.Errorf("key-loss: evidence %q; want the holder's keys deleted over the nemesis's TLS client", out.FaultEvidence)
		}
		res, err := checker.Check(ctx, out.Ops, checker.Options{Timeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if fault == contract.FaultNone && res.Verdict != contract.OK {
			t.Errorf("none: the fenced lock over TLS failed its check: %+v", res)
		}
		hist, err := os.ReadFile(out.History)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(hist), password) || strings.Contains(out.FaultEvidence, password) {
			t.Errorf("%s: the password is written in the history or the evidence", fault)
		}
		// The run's keys are in the database asked for (DB 3), none in 0.
		count := func(db int) int {
			a := good.Auth
			a.DB = db
			c := env.AdminClient(a, addr)
			defer c.Close()
			keys, _, err := c.Scan(ctx, 0, "*"+s.KeyPrefix+"*", 100000).Result()
			if err != nil {
				t.Fatalf("scan db %d: %v", db, err)
			}
			return len(keys)
		}
		if n0, n3 := count(0), count(3); n0 != 0 || n3 == 0 {
			t.Errorf("%s: %d of the run's keys in database 0, %d in 3; want all in 3", fault, n0, n3)
		}
		if err := chaos.ClearKeys(ctx, e, s.KeyPrefix); err != nil {
			t.Errorf("%s: clear keys over TLS: %v", fault, err)
		}
		if n := count(3); n != 0 {
			t.Errorf("%s: %d of the run's keys left after ClearKeys", fault, n)
		}
	}
}
