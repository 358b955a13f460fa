//go:build linux

package lineproto

import (
	"context"
	"net"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/internal/redistest"
)

// TestAttackManyConns: a local process that opens connections until the
// harness runs out of descriptors (EMFILE) does not end the endpoint: its
// accept loop backs off and goes on, so after the attacker leaves the
// lock's own process reaches Redis again (the loop used to return on any
// Accept error, for good).
func TestAttackManyConns(t *testing.T) {
	redistest.Require(t, false)
	p := redistest.Start(t)
	f, _ := atkFwd(t, p.Addr, "", time.Second)
	ctx := context.Background()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	low := lim
	low.Cur = 300
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
				t.Error(err)
			}
		}
	}
	defer restore()
	var conns []net.Conn
	for range 400 {
		c, err := net.DialTimeout("tcp", f.Addr(), time.Second)
		if err != nil {
			break
		}
		conns = append(conns, c)
	}
	t.Logf("attacker holds %d connections", len(conns))
	time.Sleep(200 * time.Millisecond)
	for _, c := range conns {
		_ = c.Close()
	}
	restore()
	time.Sleep(1500 * time.Millisecond) // past the login deadline
	rdb := redis.NewClient(&redis.Options{Addr: f.Addr(), Password: f.Password(), MaxRetries: -1, DialTimeout: time.Second})
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Errorf("after the attacker left, the process cannot reach Redis: %v", err)
	}
	buf := make([]byte, 1<<20)
	if !strings.Contains(string(buf[:runtime.Stack(buf, true)]), "(*forwarder).serve") {
		t.Errorf("the endpoint's accept loop (forwarder.serve) has returned")
	}
}
