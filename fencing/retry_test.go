package fencing_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/fencing"
	"github.com/lockproof/lockproof/internal/redistest"
)

// lossyConn loses the next reply once armed: it reads the reply off the
// wire (the command ran), lets lost run (another holder acts while the
// caller does not know), and reports the connection broken.
type lossyConn struct {
	net.Conn
	armed *atomic.Bool
	lost  func()
	sent  *atomic.Int32 // scripts written to the wire, resends included
}

func (c *lossyConn) Write(b []byte) (int, error) {
	if bytes.Contains(bytes.ToLower(b), []byte("evalsha")) {
		c.sent.Add(1)
	}
	return c.Conn.Write(b)
}

func (c *lossyConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err == nil && n > 0 && c.armed.CompareAndSwap(true, false) {
		c.lost()
		_ = c.Conn.Close()
		return 0, io.ErrUnexpectedEOF
	}
	return n, err
}

// TestWriteWithLostReplyIsUnknown: a fenced write whose reply is lost, on a
// client with go-redis's default retries, is reported as of unknown
// outcome, and is not sent again. (The old resource let go-redis resend the
// script: by then the next holder had raised the fence, so the applied
// write was reported refused, ErrStaleToken, a false "surely not".)
func TestWriteWithLostReplyIsUnknown(t *testing.T) {
	p := redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	next, err := fencing.NewRedis(redis.NewClient(&redis.Options{Addr: p.Addr}), fencing.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var armed atomic.Bool
	var sent atomic.Int32
	lost := func() {
		if err := next.Write(ctx, "k", fencing.Write{Token: 2, Owner: "b", Value: "b1"}); err != nil {
			t.Errorf("the next holder's write: %v", err)
		}
	}
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr, // default MaxRetries: go-redis would resend
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &lossyConn{Conn: c, armed: &armed, lost: lost, sent: &sent}, nil
		}})
	t.Cleanup(func() { _ = rdb.Close() })
	res, err := fencing.NewRedis(rdb, fencing.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Write(ctx, "k", fencing.Write{Token: 1, Owner: "a", Value: "a0"}); err != nil {
		t.Fatal(err) // warms the script cache and the connection
	}
	armed.Store(true)
	sent.Store(0)
	err = res.Write(ctx, "k", fencing.Write{Token: 1, Owner: "a", Value: "a1"})
	if errors.Is(err, fencing.ErrStaleToken) || !errors.Is(err, fencing.ErrUnknownOutcome) {
		t.Fatalf("write whose reply was lost: %v; want ErrUnknownOutcome, never ErrStaleToken", err)
	}
	if n := sent.Load(); n != 1 {
		t.Fatalf("the write was sent %d times; want once", n)
	}
}
