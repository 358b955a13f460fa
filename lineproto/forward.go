package lineproto

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// forwarder is the one Redis endpoint a lock's process is given: a
// loopback listener whose every connection is dialled anew through the
// client's go-redis dialer. For a Sentinel deployment that dialer asks
// the Sentinels for the master, so a process that knows nothing of
// Sentinel follows failovers as it would behind a proxy that tracks them;
// and it goes through the client's own Toxiproxy links, so partitions and
// latency reach the process as they reach a Go client. TLS, when the
// deployment has it, ends here: the process speaks plain RESP on loopback.
type forwarder struct {
	ln   net.Listener
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	addr string
	to   time.Duration

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	done  bool
	wg    sync.WaitGroup
}

// newForwarder serves rdb's endpoint on loopback. Only a single-endpoint
// client (a master, or a Sentinel failover client) has one: a Redis
// Cluster is many, which protocol versions 1 and 2 do not hand a process.
func newForwarder(rdb redis.UniversalClient) (*forwarder, *redis.Options, error) {
	c, ok := rdb.(*redis.Client)
	if !ok {
		return nil, nil, fmt.Errorf("Deps.Redis is a %T: a lock's own process is handed one Redis endpoint (a master or a Sentinel deployment's), not a Redis Cluster's", rdb)
	}
	opt := c.Options()
	dial := opt.Dialer
	if dial == nil {
		d := &net.Dialer{Timeout: opt.DialTimeout}
		dial = d.DialContext
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, fmt.Errorf("listen for the lock process: %w", err)
	}
	to := opt.DialTimeout
	if to <= 0 {
		to = 5 * time.Second
	}
	f := &forwarder{ln: ln, dial: dial, addr: opt.Addr, to: to, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.serve()
	return f, opt, nil
}

// Addr is the endpoint's address.
func (f *forwarder) Addr() string { return f.ln.Addr().String() }

func (f *forwarder) serve() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		if !f.track(c) {
			_ = c.Close()
			return
		}
		f.wg.Add(1)
		go f.pipe(c)
	}
}

func (f *forwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *forwarder) untrack(c net.Conn) {
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
	_ = c.Close()
}

// pipe joins one connection of the process to a fresh one upstream. A
// reply -READONLY (the master it reached was demoted by a failover) is
// passed on and then the connection is cut, as redis-py's and go-redis's
// own Sentinel clients cut theirs: the process's next connection goes to
// the new master.
func (f *forwarder) pipe(down net.Conn) {
	defer f.wg.Done()
	defer f.untrack(down)
	ctx, cancel := context.WithTimeout(context.Background(), f.to)
	up, err := f.dial(ctx, "tcp", f.addr)
	cancel()
	if err != nil {
		return // the process sees its connection closed: a failed dial
	}
	if !f.track(up) {
		_ = up.Close()
		return
	}
	defer f.untrack(up)
	go func() {
		_, _ = io.Copy(up, down)
		_ = up.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := up.Read(buf)
		if n > 0 {
			if _, werr := down.Write(buf[:n]); werr != nil {
				return
			}
			if readOnly(buf[:n]) {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// readOnly reports whether b holds a -READONLY error reply.
func readOnly(b []byte) bool {
	return bytes.HasPrefix(b, []byte("-READONLY")) || bytes.Contains(b, []byte("\r\n-READONLY"))
}

// Close stops the endpoint and cuts every connection through it.
func (f *forwarder) Close() error {
	f.mu.Lock()
	f.done = true
	for c := range f.conns {
		_ = c.Close()
	}
	f.mu.Unlock()
	err := f.ln.Close()
	f.wg.Wait()
	return err
}
