package redisproc_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/internal/redisproc"
	"github.com/lockproof/lockproof/internal/redistest"
)

func roundTrip(addr, cmd string, timeout time.Duration) (string, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := fmt.Fprintf(c, "%s\r\n", cmd); err != nil {
		return "", err
	}
	s, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(s), err
}

func TestStartPauseResumeStop(t *testing.T) {
	p := redistest.Start(t)
	if got, err := roundTrip(p.Addr, "PING", time.Second); err != nil || got != "+PONG" {
		t.Fatalf("PING = %q, %v; want +PONG", got, err)
	}
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	if _, err := roundTrip(p.Addr, "PING", 200*time.Millisecond); err == nil {
		t.Fatal("a paused redis-server answered PING")
	}
	if err := p.Resume(); err != nil {
		t.Fatal(err)
	}
	if got, err := roundTrip(p.Addr, "PING", time.Second); err != nil || got != "+PONG" {
		t.Fatalf("after resume PING = %q, %v", got, err)
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if !p.Exited() {
		t.Fatal("process still running after Stop")
	}
	if _, err := roundTrip(p.Addr, "PING", 200*time.Millisecond); err == nil {
		t.Fatal("a stopped redis-server answered PING")
	}
}

func TestStartSentinel(t *testing.T) {
	m := redistest.Start(t)
	s := redistest.StartSentinel(t, fmt.Sprintf("sentinel monitor mymaster 127.0.0.1 %d 1", m.Port))
	got, err := roundTrip(s.Addr, "SENTINEL GET-MASTER-ADDR-BY-NAME mymaster", time.Second)
	if err != nil || got != "*2" {
		t.Fatalf("sentinel reply = %q, %v; want an array of 2", got, err)
	}
}

func TestStartFixedBusyPortFails(t *testing.T) {
	redistest.Require(t, false)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p, err := redisproc.Start(ctx, redisproc.Config{Port: port, StartTimeout: 2 * time.Second})
	if err == nil {
		p.Stop()
		t.Fatalf("started on busy port %d", port)
	}
}

// TestStartRefusesAStrangersServer: a port on which another redis-server
// already answers is not taken for the one just started, though that one
// answers PING: Start checks the answering process is its own.
func TestStartRefusesAStrangersServer(t *testing.T) {
	other := redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := redisproc.Start(ctx, redisproc.Config{Port: other.Port, StartTimeout: 5 * time.Second})
	if err == nil {
		p.Stop()
		t.Fatalf("Start returned the server of pid %d on port %d as its own", other.Pid(), other.Port)
	}
	if !strings.Contains(err.Error(), "another process answers") {
		t.Fatalf("err = %v; want it to name the stranger", err)
	}
}
