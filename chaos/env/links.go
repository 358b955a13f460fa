package env

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"
)

// validName is what client names (and so proxy names) may contain.
var validName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// Links are one client's own proxies: one per node of the topology. A fault
// on them hits this client only.
type Links struct {
	// Client is the client's name.
	Client string

	srv     ProxyServer
	mu      sync.Mutex
	byAddr  map[string]string            // node Addr -> dial address of this client's proxy
	byNode  map[string]*toxiclient.Proxy // node ID -> proxy
	dialer  net.Dialer
	closed  bool
	topoIDs []string
	// A dial begun before stallBegun (Unix ns) waits until stallUntil;
	// stalled counts the dials held (StallDials).
	stallBegun, stallUntil, stalled atomic.Int64
}

// StallDials holds back the dials of this client begun in the next
// within until d from now (within each dial's context), while
// connections already open pass: a connection opened at that moment
// takes as long as one whose first SYN was lost does. Struck right as a
// connection is dropped, it catches the client's reconnection, which a
// lock must not sleep through (package lock's review defect 3: go-redis
// re-dials a dropped pub/sub connection before it reports the drop),
// and rarely anything else: a short within leaves the dials of the
// client's commands alone.
func (l *Links) StallDials(within, d time.Duration) {
	now := time.Now()
	l.stallUntil.Store(now.Add(d).UnixNano())
	l.stallBegun.Store(now.Add(within).UnixNano())
}

// Stalled counts the dials StallDials held back.
func (l *Links) Stalled() int64 { return l.stalled.Load() }

// stall holds a dial begun in a stall's first moment until the stall
// ends, or ctx does.
func (l *Links) stall(ctx context.Context) error {
	now := time.Now().UnixNano()
	if now >= l.stallBegun.Load() {
		return nil
	}
	d := time.Duration(l.stallUntil.Load() - now)
	if d <= 0 {
		return nil
	}
	l.stalled.Add(1)
	return Sleep(ctx, d)
}

// Sleep waits d, or until ctx is done (its error); nil at once when d
// is not positive.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ProxyName is the name of the proxy that carries client's traffic to node.
func ProxyName(client, nodeID string) string { return "c-" + client + "-" + nodeID }

// NewLinks creates, on e's Toxiproxy server, one proxy per node for client
// (named ProxyName(client, node.ID)). Close deletes them.
func NewLinks(ctx context.Context, e Env, client string) (*Links, error) {
	if !validName.MatchString(client) {
		return nil, fmt.Errorf("new links: client name %q: want 1-64 of [A-Za-z0-9_.-]", client)
	}
	srv := e.Proxies()
	l := &Links{
		Client: client,
		srv:    srv,
		byAddr: map[string]string{},
		byNode: map[string]*toxiclient.Proxy{},
		dialer: net.Dialer{Timeout: 2 * time.Second},
	}
	for _, n := range e.Topology().Nodes() {
		if err := ctx.Err(); err != nil {
			_ = l.Close()
			return nil, fmt.Errorf("new links for %q: %w", client, err)
		}
		name := ProxyName(client, n.ID)
		p, err := srv.API.CreateProxy(name, net.JoinHostPort(srv.ListenHost, "0"), n.Upstream)
		if err != nil {
			_ = l.Close()
			return nil, fmt.Errorf("new links for %q: create proxy %s -> %s: %w", client, name, n.Upstream, err)
		}
		_, port, err := net.SplitHostPort(p.Listen)
		if err != nil {
			_ = p.Delete()
			_ = l.Close()
			return nil, fmt.Errorf("new links for %q: proxy %s listens on %q: %w", client, name, p.Listen, err)
		}
		l.byNode[n.ID] = p
		l.byAddr[n.Addr] = net.JoinHostPort(srv.DialHost, port)
		l.topoIDs = append(l.topoIDs, n.ID)
	}
	return l, nil
}

// Dial is a go-redis Dialer (redis.Options.Dialer, redis.FailoverOptions.Dialer):
// it dials this client's proxy for the node known as addr, and addr itself
// when it is no node's address (a Sentinel).
func (l *Links) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	l.mu.Lock()
	to, ok := l.byAddr[addr]
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("dial %s for client %q: links closed", addr, l.Client)
	}
	if !ok {
		to = addr
	}
	if err := l.stall(ctx); err != nil {
		return nil, fmt.Errorf("dial %s (via %s) for client %q: held back: %w", addr, to, l.Client, err)
	}
	c, err := l.dialer.DialContext(ctx, network, to)
	if err != nil {
		return nil, fmt.Errorf("dial %s (via %s) for client %q: %w", addr, to, l.Client, err)
	}
	return c, nil
}

// Addr returns the address at which this client reaches the node through its
// own proxy (for plain clients of the fenced and Redlock nodes).
func (l *Links) Addr(nodeID string) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p, ok := l.byNode[nodeID]
	if !ok {
		return "", fmt.Errorf("links of %q: node %q: %w", l.Client, nodeID, ErrNoNode)
	}
	_, port, err := net.SplitHostPort(p.Listen)
	if err != nil {
		return "", fmt.Errorf("links of %q: proxy %s listens on %q: %w", l.Client, p.Name, p.Listen, err)
	}
	return net.JoinHostPort(l.srv.DialHost, port), nil
}

// Proxy returns this client's proxy to the node.
func (l *Links) Proxy(nodeID string) (*toxiclient.Proxy, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p, ok := l.byNode[nodeID]
	if !ok {
		return nil, fmt.Errorf("links of %q: node %q: %w", l.Client, nodeID, ErrNoNode)
	}
	return p, nil
}

// Proxies returns all of this client's proxies, ordered by node ID.
func (l *Links) Proxies() []*toxiclient.Proxy {
	l.mu.Lock()
	defer l.mu.Unlock()
	ids := append([]string(nil), l.topoIDs...)
	sort.Strings(ids)
	out := make([]*toxiclient.Proxy, 0, len(ids))
	for _, id := range ids {
		out = append(out, l.byNode[id])
	}
	return out
}

// Close deletes this client's proxies. It is safe to call more than once.
func (l *Links) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	var first error
	for id, p := range l.byNode {
		if err := p.Delete(); err != nil && first == nil {
			first = fmt.Errorf("links of %q: delete proxy for %s: %w", l.Client, id, err)
		}
	}
	return first
}
