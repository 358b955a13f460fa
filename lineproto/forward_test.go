package lineproto

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/internal/redisproc"
	"github.com/lockproof/lockproof/internal/redistest"
)

// TestEndpointAdmitsOnlyItsProcess (issue 62 item 1): the loopback
// endpoint a lock's process reaches Redis through lends the harness's
// identity to nobody else. A client that does not log in, or logs in with
// another password (the deployment's own included), is refused before
// anything is dialled upstream, even in front of a Redis that asks no
// password; one that logs in with the endpoint's password (hello's), by
// AUTH (RESP2) or HELLO ... AUTH (RESP3), works, and the endpoint logs in
// to a deployment that asks a password with the harness's credentials,
// which the process never sees.
func TestEndpointAdmitsOnlyItsProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const deployment = "the-deployments-own-password"
	withPassword := redistest.StartPassword(t, deployment)
	for _, c := range []struct {
		name string
		p    *redisproc.Process
		pass string
	}{
		{"no password upstream", redistest.Start(t), ""},
		{"a password upstream", withPassword, deployment},
	} {
		t.Run(c.name, func(t *testing.T) {
			up := redis.NewClient(&redis.Options{Addr: c.p.Addr, Password: c.pass})
			defer up.Close()
			f, _, err := newForwarder(up)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if len(f.Password()) < 32 {
				t.Fatalf("the endpoint's password %q is short", f.Password())
			}
			try := func(o redis.Options) error {
				o.Addr, o.MaxRetries, o.DisableIdentity = f.Addr(), -1, true
				rdb := redis.NewClient(&o)
				defer rdb.Close()
				return rdb.Set(ctx, "k", "v", 0).Err()
			}
			for _, bad := range []struct {
				what string
				o    redis.Options
				want string
			}{
				{"no login", redis.Options{Protocol: 2}, "NOAUTH"},
				{"no login, RESP3", redis.Options{}, "NOAUTH"},
				{"a wrong password", redis.Options{Password: "guess", Protocol: 2}, "WRONGPASS"},
				{"a wrong password, RESP3", redis.Options{Password: "guess"}, "WRONGPASS"},
				{"the deployment's password", redis.Options{Password: deployment, Protocol: 2}, "WRONGPASS"},
				{"another user", redis.Options{Username: "admin", Password: f.Password()}, "WRONGPASS"},
			} {
				if err := try(bad.o); err == nil || !strings.Contains(err.Error(), bad.want) {
					t.Errorf("%s: %v, want %s", bad.what, err, bad.want)
				}
			}
			for _, proto := range []int{2, 3} {
				if err := try(redis.Options{Password: f.Password(), Protocol: proto}); err != nil {
					t.Errorf("the endpoint's password, RESP%d: %v", proto, err)
				}
			}
			if v, err := up.Get(ctx, "k").Result(); err != nil || v != "v" {
				t.Errorf("upstream: %q, %v; want the SET through the endpoint", v, err)
			}
		})
	}
}
