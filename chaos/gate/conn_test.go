package gate_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/chaos/gate"
)

// TestDialerPassesTheGate: a gated connection carries nothing while its
// gate is paused (a write waits to be sent, a read's bytes wait to be
// handed on), carries on when it resumes, and fails and closes when the
// gate crashes.
func TestDialerPassesTheGate(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	echo := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			echo <- err
			return
		}
		defer c.Close()
		_, err = io.Copy(c, c)
		echo <- err
	}()
	g := gate.New()
	var d net.Dialer
	dial := g.Dialer(d.DialContext)
	c, err := dial(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip := func(msg string) chan string {
		got := make(chan string, 1)
		go func() {
			if _, err := c.Write([]byte(msg)); err != nil {
				got <- "write: " + err.Error()
				return
			}
			buf := make([]byte, len(msg))
			if _, err := io.ReadFull(c, buf); err != nil {
				got <- "read: " + err.Error()
				return
			}
			got <- string(buf)
		}()
		return got
	}
	if got := <-roundTrip("a"); got != "a" {
		t.Fatalf("open gate: %q", got)
	}
	g.Pause()
	got := roundTrip("b")
	select {
	case s := <-got:
		t.Fatalf("paused gate carried %q", s)
	case <-time.After(100 * time.Millisecond):
	}
	if g.Held() == 0 {
		t.Fatal("paused gate holds nobody")
	}
	g.Resume()
	if s := <-got; s != "b" {
		t.Fatalf("after resume: %q", s)
	}
	if _, err := dial(context.Background(), "tcp", ln.Addr().String()); err != nil {
		t.Fatalf("dial through an open gate: %v", err)
	}
	g.Crash()
	if s := <-roundTrip("c"); !strings.Contains(s, gate.ErrCrashed.Error()) {
		t.Fatalf("crashed gate: %q; want %v", s, gate.ErrCrashed)
	}
	if _, err := dial(context.Background(), "tcp", ln.Addr().String()); !errors.Is(err, gate.ErrCrashed) {
		t.Fatalf("dial through a crashed gate: %v", err)
	}
}
