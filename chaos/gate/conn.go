package gate

import (
	"context"
	"net"
	"sync"
)

// DialFunc dials addr over network within ctx (go-redis's Dialer, gRPC's
// context dialer, less its network, and ZooKeeper's dialer wrap it).
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Dialer returns dial with every connection it opens passing the gate: a
// dial waits at the gate first; a write waits before it sends, a read
// after its bytes arrived and before it hands them on. It is how the gate
// reaches a lock whose client is not go-redis (an etcd or ZooKeeper
// client, whose library runs its own keep-alives): a paused client then
// sends nothing and learns nothing until it wakes, its session's
// keep-alives included, as in a stop-the-world pause, and a crashed one's
// connections fail with ErrCrashed and are closed.
func (g *Gate) Dialer(dial DialFunc) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if err := g.Wait(ctx); err != nil {
			return nil, err
		}
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		gc := &conn{Conn: c, g: g, done: make(chan struct{})}
		go gc.closeOnCrash()
		return gc, nil
	}
}

// conn is a connection that passes its gate.
type conn struct {
	net.Conn
	g    *Gate
	once sync.Once
	done chan struct{}
}

// closeOnCrash closes the connection when the gate crashes: a crashed
// client's sockets close with its process, and its peers see them close.
func (c *conn) closeOnCrash() {
	select {
	case <-c.g.CrashedCh():
		_ = c.Conn.Close()
	case <-c.done:
	}
}

// Read implements net.Conn: the bytes read are handed on once the gate
// is open (never while paused), and not at all once it has crashed.
func (c *conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if werr := c.g.Wait(context.Background()); werr != nil {
		return 0, werr
	}
	return n, err
}

// Write implements net.Conn: it sends once the gate is open.
func (c *conn) Write(p []byte) (int, error) {
	if err := c.g.Wait(context.Background()); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

// Close implements net.Conn.
func (c *conn) Close() error {
	c.once.Do(func() { close(c.done) })
	return c.Conn.Close()
}
