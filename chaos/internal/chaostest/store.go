package chaostest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/internal/etcdproc"
	"github.com/lockproof/lockproof/internal/zkproc"
)

// StoreAsksALogin checks that the consensus store of topo, which an
// environment started, refuses a client without its login (issue 62,
// item 9: its ports are on loopback, open to every local user), and serves one with it (topo.Auth's Store fields): etcd
// a write without a token, and with one of another user's password;
// ZooKeeper a client with no login, and one of another identity (the
// root's ACL admits the env's alone).
func StoreAsksALogin(t *testing.T, ctx context.Context, topo env.Topology) {
	t.Helper()
	a, addr := topo.Auth, topo.Store[0].Upstream
	if a.StoreUsername == "" || a.StorePassword == "" {
		t.Fatalf("the store's login: user %q, password set %t; want both", a.StoreUsername, a.StorePassword != "")
	}
	if topo.StoreKind == contract.TopologyZooKeeper {
		if kids, err := zkproc.Children(ctx, addr, "", "", "/"); !errors.Is(err, zkproc.ErrRefused) {
			t.Errorf("children of / without a login: %v, %v; want ErrRefused", kids, err)
		}
		if kids, err := zkproc.Children(ctx, addr, "intruder", "guess", "/"); !errors.Is(err, zkproc.ErrRefused) {
			t.Errorf("children of / as another identity: %v, %v; want ErrRefused", kids, err)
		}
		if _, err := zkproc.Children(ctx, addr, a.StoreUsername, string(a.StorePassword), "/"); err != nil {
			t.Errorf("children of / with the env's login: %v", err)
		}
		return
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	put := func(token string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v3/kv/put", strings.NewReader(`{"key":"a2V5","value":"dg=="}`))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := put(""); code == http.StatusOK {
		t.Errorf("a put without a login: %d %s; want it refused", code, body)
	}
	if _, err := etcdproc.Token(ctx, hc, addr, etcdproc.Login{User: a.StoreUsername, Password: "guess"}); err == nil {
		t.Error("a login with a wrong password was taken")
	}
	token, err := etcdproc.Token(ctx, hc, addr, etcdproc.Login{User: a.StoreUsername, Password: string(a.StorePassword)})
	if err != nil {
		t.Fatal(err)
	}
	if code, body := put(token); code != http.StatusOK {
		t.Errorf("a put with the env's login: %d %s", code, body)
	}
}
