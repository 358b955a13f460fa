// The endpoint a lock's process reaches Redis through, attacked (issue 62
// item 1): what a local process that finds its port can and cannot do.

package lineproto

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/internal/redistest"
)

func atkFwd(t *testing.T, addr, pass string, dialTimeout time.Duration) (*forwarder, *redis.Client) {
	t.Helper()
	up := redis.NewClient(&redis.Options{Addr: addr, Password: pass, DialTimeout: dialTimeout, PoolSize: 1})
	t.Cleanup(func() { _ = up.Close() })
	f, _, err := newForwarder(up)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f, up
}

func atkConnsReceived(t *testing.T, up *redis.Client) int {
	t.Helper()
	s, err := up.Info(context.Background(), "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`total_connections_received:(\d+)`).FindStringSubmatch(s)
	n, _ := strconv.Atoi(m[1])
	return n
}

// atkSend writes payload on a fresh connection and returns all it reads
// until EOF or the timeout.
func atkSend(t *testing.T, addr, payload string, wait time.Duration) (string, bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(wait))
	_, _ = c.Write([]byte(payload))
	b, err := io.ReadAll(c)
	var ne net.Error
	timedOut := errors.As(err, &ne) && ne.Timeout()
	return string(b), !timedOut
}

func cmdRESP(args ...string) string { return string(encodeCommand(args)) }

// TestAttackNothingUpstreamBeforeLogin: no payload without the password
// makes the endpoint dial upstream, or runs a command there.
func TestAttackNothingUpstreamBeforeLogin(t *testing.T) {
	redistest.Require(t, false)
	p := redistest.Start(t)
	f, up := atkFwd(t, p.Addr, "", time.Second)
	ctx := context.Background()
	sec := f.Password()
	set := cmdRESP("SET", "pwned", "1")
	payloads := map[string]string{
		"inline":             "SET pwned 1\r\n" + set,
		"*0 then SET":        "*0\r\n" + set,
		"refused then SETs":  cmdRESP("PING") + strings.Repeat(set, 20),
		"hello auth no pass": cmdRESP("HELLO", "3", "AUTH", "default") + set,
		"hello auth no ver":  cmdRESP("HELLO", "AUTH", "default", "wrong") + set,
		"hello AUTH trail":   cmdRESP("HELLO", "3", "AUTH", "default", "x", "AUTH") + set,
		"lower auth wrong":   cmdRESP("auth", "wrong") + set,
		"other user":         cmdRESP("AUTH", "admin", sec) + cmdRESP("HELLO", "3", "AUTH", "Default", sec) + set,
		"prefix of secret":   cmdRESP("AUTH", sec[:31]) + cmdRESP("AUTH", sec+"0") + cmdRESP("AUTH", "") + set,
		"auth 4 args":        cmdRESP("AUTH", "default", sec, "x") + cmdRESP("AUTH") + set,
		"huge array header":  "*99999999999999999999999\r\n" + set,
		"huge bulk header":   "*2\r\n$99999999\r\n" + set,
		"negative bulk":      "*2\r\n$-1\r\n" + set,
		"bulk no crlf":       "*2\r\n$4\r\nAUTH\r\n$32\r\n" + sec + "XX" + set,
		"bulk len short":     "*2\r\n$4\r\nAUTH\r\n$31\r\n" + sec + "\r\n" + set,
		"long line":          strings.Repeat("*", 10000) + "\r\n" + set,
		"plus header":        "*+2\r\n$4\r\nAUTH\r\n$+32\r\n" + "x" + sec[1:] + "\r\n" + set,
		"nine refusals then login": strings.Repeat(cmdRESP("PING"), 9) +
			cmdRESP("AUTH", sec) + set,
		"resp3 map as cmd": "%1\r\n$4\r\nAUTH\r\n$32\r\n" + sec + "\r\n" + set,
	}
	before := atkConnsReceived(t, up)
	for name, pl := range payloads {
		out, closed := atkSend(t, f.Addr(), pl, 3*time.Second)
		if !closed {
			t.Errorf("%s: connection still open after 3s", name)
		}
		if strings.Contains(out, "+OK") {
			t.Errorf("%s: got +OK: %q", name, out)
		}
	}
	if after := atkConnsReceived(t, up); after != before {
		t.Errorf("upstream received %d connections from unauthenticated clients", after-before)
	}
	if n, _ := up.Exists(ctx, "pwned").Result(); n != 0 {
		t.Errorf("pwned was SET upstream")
	}
}

// TestAttackLoginDeadline: a connection that never logs in (idle, or
// dripping bytes) is closed within the dial timeout.
func TestAttackLoginDeadline(t *testing.T) {
	redistest.Require(t, false)
	p := redistest.Start(t)
	f, _ := atkFwd(t, p.Addr, "", time.Second)
	start := time.Now()
	if _, closed := atkSend(t, f.Addr(), "", 5*time.Second); !closed {
		t.Errorf("idle: still open after 5s")
	}
	t.Logf("idle closed after %v", time.Since(start))
	c, err := net.Dial("tcp", f.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start = time.Now()
	drip := cmdRESP("SETNAME", strings.Repeat("x", 100))
	for i := 0; i < len(drip); i++ {
		if _, err := c.Write([]byte{drip[i]}); err != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
		if time.Since(start) > 5*time.Second {
			t.Errorf("drip: still open after 5s")
			break
		}
	}
	t.Logf("drip ended after %v", time.Since(start))
}

func atkReadReplies(t *testing.T, r *bufio.Reader, n int) []string {
	t.Helper()
	var out []string
	for range n {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %q: %v", out, err)
		}
		if line[0] == '$' {
			k, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
			if k >= 0 {
				b := make([]byte, k+2)
				_, _ = io.ReadFull(r, b)
				line += string(b)
			}
		}
		out = append(out, line)
	}
	return out
}

// TestAttackPipelinedLogin: a correct client that pipelines its login and
// commands in one write (RESP2 AUTH, lower-case, AUTH default, and RESP3
// HELLO) has every command answered, in order, upstream with or without
// a password.
func TestAttackPipelinedLogin(t *testing.T) {
	redistest.Require(t, false)
	pw := redistest.StartPassword(t, "dep")
	for _, up := range []struct {
		name, addr, pass string
	}{{"nopass", redistest.Start(t).Addr, ""}, {"pass", pw.Addr, "dep"}} {
		f, _ := atkFwd(t, up.addr, up.pass, 2*time.Second)
		sec := f.Password()
		for _, login := range []struct {
			name, cmd string
			hello     bool
		}{
			{"AUTH", cmdRESP("AUTH", sec), false},
			{"auth lower", cmdRESP("auth", sec), false},
			{"AUTH default", cmdRESP("AUTH", "default", sec), false},
			{"HELLO 2", cmdRESP("HELLO", "2", "AUTH", "default", sec, "SETNAME", "me"), true},
		} {
			c, err := net.Dial("tcp", f.Addr())
			if err != nil {
				t.Fatal(err)
			}
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			_, _ = c.Write([]byte(login.cmd + cmdRESP("SELECT", "2") + cmdRESP("SET", "k", login.name) + cmdRESP("GET", "k")))
			r := bufio.NewReader(c)
			var got []string
			if login.hello {
				// a RESP2 HELLO reply: *14 and 7 pairs
				h := atkReadReplies(t, r, 1)
				if !strings.HasPrefix(h[0], "*14") {
					t.Errorf("%s/%s: HELLO reply %q", up.name, login.name, h)
					c.Close()
					continue
				}
				atkReadReplies(t, r, 14)
				got = atkReadReplies(t, r, 3)
			} else {
				got = atkReadReplies(t, r, 4)
				if got[0] != "+OK\r\n" {
					t.Errorf("%s/%s: login reply %q", up.name, login.name, got[0])
				}
				got = got[1:]
			}
			want := []string{"+OK\r\n", "+OK\r\n", fmt.Sprintf("$%d\r\n%s\r\n", len(login.name), login.name)}
			if strings.Join(got, "") != strings.Join(want, "") {
				t.Errorf("%s/%s: %q, want %q", up.name, login.name, got, want)
			}
			c.Close()
		}
	}
}

// TestAttackClients: go-redis with defaults (RESP3, identity on) and RESP2,
// with a DB, through the endpoint.
func TestAttackClients(t *testing.T) {
	redistest.Require(t, false)
	p := redistest.Start(t)
	f, up := atkFwd(t, p.Addr, "", 2*time.Second)
	ctx := context.Background()
	for _, o := range []redis.Options{
		{Password: f.Password()},
		{Password: f.Password(), Protocol: 2, DB: 3},
		{Password: f.Password(), Protocol: 3, DB: 4, ClientName: "x"},
		{Username: "default", Password: f.Password(), Protocol: 2, DB: 5},
	} {
		o.Addr = f.Addr()
		rdb := redis.NewClient(&o)
		if err := rdb.Set(ctx, "c", "v", 0).Err(); err != nil {
			t.Errorf("%+v: %v", o.Protocol, err)
		}
		_ = rdb.Close()
		if n, _ := up.Do(ctx, "SELECT", o.DB).Result(); n != "OK" {
			t.Fatal(n)
		}
		if v, _ := up.Get(ctx, "c").Result(); v != "v" {
			t.Errorf("db %d: %q", o.DB, v)
		}
		up.Do(ctx, "SELECT", 0)
	}
}

// TestAttackUpstreamLoginFailure: the harness's credentials are refused
// upstream, and a go-redis process is told so: the endpoint answers its
// login and the commands after it with its -ERR (go-redis, its HELLO
// refused, tries AUTH on the same connection; a connection closed at once
// showed it only EOF).
func TestAttackUpstreamLoginFailure(t *testing.T) {
	redistest.Require(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pw := redistest.StartPassword(t, "dep")
	f, _ := atkFwd(t, pw.Addr, "not-dep", 2*time.Second)
	for _, proto := range []int{2, 3} {
		rdb := redis.NewClient(&redis.Options{Addr: f.Addr(), Password: f.Password(), Protocol: proto, MaxRetries: -1})
		err := rdb.Ping(ctx).Err()
		_ = rdb.Close()
		t.Logf("RESP%d: %v", proto, err)
		if err == nil || !strings.Contains(err.Error(), "could not log in") {
			t.Errorf("RESP%d: %v, want the endpoint's could not log in", proto, err)
		}
	}
}

// TestAttackReadOnlyCut: a -READONLY reply still cuts the connection
// (replies in the same read as it pass too, as before the change).
func TestAttackReadOnlyCut(t *testing.T) {
	redistest.Require(t, false)
	master := redistest.Start(t)
	replica := redistest.Start(t, "replicaof 127.0.0.1 "+master.Addr[strings.LastIndex(master.Addr, ":")+1:])
	f, _ := atkFwd(t, replica.Addr, "", 2*time.Second)
	for _, login := range []string{cmdRESP("AUTH", f.Password()), cmdRESP("HELLO", "3", "AUTH", "default", f.Password())} {
		out, closed := atkSend(t, f.Addr(), login+cmdRESP("SET", "k", "v"), 3*time.Second)
		if !strings.Contains(out, "-READONLY") || !closed {
			t.Errorf("READONLY not cut: %q closed=%v", out, closed)
		}
	}
}
