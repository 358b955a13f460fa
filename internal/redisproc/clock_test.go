package redisproc_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/internal/redisproc"
	"github.com/lockproof/lockproof/internal/redistest"
)

// serverTime reads a server's TIME (seconds and µs) over RESP.
func serverTime(t *testing.T, addr string) time.Time {
	t.Helper()
	got, err := roundTripAll(addr, "TIME", 5, time.Second)
	if err != nil {
		t.Fatalf("TIME on %s: %v", addr, err)
	}
	// *2, $len, seconds, $len, µs
	sec, err1 := strconv.ParseInt(got[2], 10, 64)
	us, err2 := strconv.ParseInt(got[4], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("TIME on %s answered %q", addr, got)
	}
	return time.Unix(sec, us*1000)
}

// TestClockBehind starts a redis-server whose clock runs 3s behind and
// checks TIME on it against the host's, and that a key's relative TTL still
// counts down in real time (the shift is constant).
func TestClockBehind(t *testing.T) {
	redistest.Require(t, false)
	envv, err := redisproc.ClockBehind(3 * time.Second)
	if errors.Is(err, redisproc.ErrNoClockShim) && !redistest.InCI() {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	p, err := redisproc.Start(context.Background(), redisproc.Config{Env: envv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop() })
	plain := redistest.Start(t)

	before := time.Now()
	skewed := serverTime(t, p.Addr)
	host := serverTime(t, plain.Addr)
	behind := host.Sub(skewed)
	if behind < 2900*time.Millisecond || behind > 3100*time.Millisecond+time.Since(before) {
		t.Fatalf("the skewed server's clock is %v behind the plain one's; want 3s", behind)
	}
	if got, err := roundTrip(p.Addr, "SET k v PX 2000", time.Second); err != nil || got != "+OK" {
		t.Fatalf("SET = %q, %v", got, err)
	}
	got, err := roundTrip(p.Addr, "PTTL k", time.Second)
	if err != nil || !strings.HasPrefix(got, ":") {
		t.Fatalf("PTTL = %q, %v", got, err)
	}
	if ms, _ := strconv.Atoi(got[1:]); ms < 1500 || ms > 2000 {
		t.Fatalf("PTTL on the skewed server = %d ms; want about 2000", ms)
	}
}

func TestClockBehindRefusesFractions(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second, 1500 * time.Millisecond} {
		if _, err := redisproc.ClockBehind(d); err == nil || errors.Is(err, redisproc.ErrNoClockShim) {
			t.Errorf("ClockBehind(%v) = %v; want a refusal of the duration", d, err)
		}
	}
}

// roundTripAll sends cmd and returns the first n lines of the reply.
func roundTripAll(addr, cmd string, n int, timeout time.Duration) ([]string, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := fmt.Fprintf(c, "%s\r\n", cmd); err != nil {
		return nil, err
	}
	r := bufio.NewReader(c)
	var lines []string
	for len(lines) < n {
		s, err := r.ReadString('\n')
		if err != nil {
			return lines, err
		}
		lines = append(lines, strings.TrimSpace(s))
	}
	return lines, nil
}
