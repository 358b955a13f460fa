package redisproc_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/lockproof/lockproof/internal/redisproc"
	"github.com/lockproof/lockproof/internal/redistest"
)

// bindPlain binds 127.0.0.1:port without SO_REUSEADDR, as an automatic
// port choice would need the port: it fails while a socket holds it.
func bindPlain(t *testing.T, port int) error {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	return syscall.Bind(fd, &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}})
}

// TestPortHeldWhileDown: a killed server's port stays held (no other
// test's free port is it) and a restart on it works; Stop frees it.
func TestPortHeldWhileDown(t *testing.T) {
	p := redistest.Start(t)
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := bindPlain(t, p.Port); !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("bind of a killed server's port %d: %v; want EADDRINUSE (the port is held)", p.Port, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	again, err := redisproc.Start(ctx, redisproc.Config{Port: p.Port})
	if err != nil {
		t.Fatalf("restart on the held port: %v", err)
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := again.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := bindPlain(t, p.Port); err != nil {
		t.Fatalf("after Stop the port %d is still held: %v", p.Port, err)
	}
}
