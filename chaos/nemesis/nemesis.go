// Package nemesis injects the faults of lockproof's chaos runs: one type per
// fault, each with Start and Stop, and Apply, which records the fault window
// as a "fault" op of the history.
//
// Network faults act on Toxiproxy proxies (a client's own proxies from
// env.Links, a group of clients', or a node's replication proxy) and are
// driven through the Toxiproxy client API. Client faults act on a client's
// gate.Gate or Clock; server faults on the environment's processes.
package nemesis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/internal/proc"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/gate"
)

// Fault is one fault. Start injects it; Stop heals it (a crash cannot be
// healed: its Stop does nothing). Stop after a failed or partial Start heals
// what was injected. Both honour ctx.
type Fault interface {
	// Name is the fault's name in the history, e.g. "partition c1,c2".
	Name() string
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// Recorder records fault windows; *history.Recorder is one. end closes
// the window with the fault's evidence (what it did; "" when the fault
// cannot say).
type Recorder interface {
	FaultWindow(name string) (end func(evidence string))
}

// Apply records a fault window around f: it starts f, holds it for d (or
// until ctx is done), and stops it, even when ctx is done. The window in the
// history spans from before Start to after Stop.
func Apply(ctx context.Context, rec Recorder, f Fault, d time.Duration) error {
	end := rec.FaultWindow(f.Name())
	evidence := ""
	defer func() { end(evidence) }()
	if w, ok := f.(Witness); ok {
		defer func() { evidence = w.Evidence().Text }() // runs first: after Stop
	}
	startErr := f.Start(ctx)
	if startErr == nil {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	stopErr := f.Stop(sctx)
	if err := errors.Join(startErr, stopErr); err != nil {
		return fmt.Errorf("fault %s: %w", f.Name(), err)
	}
	return nil
}

// Toxic is one toxic to put on every proxy of a network fault.
type Toxic struct {
	Type       string // "latency", "timeout", "reset_peer", "bandwidth", ...
	Stream     string // "upstream" (client to server) or "downstream"
	Attributes toxiclient.Attributes
	// Toxicity is the share of connections the toxic acts on (Toxiproxy
	// draws each connection); 0 means every one.
	Toxicity float32
}

// Network puts toxics on a set of proxies while it is started. Toxicity is
// always 1 (every connection); toxic names are unique per Network.
type Network struct {
	// Label is the fault name in the history.
	Label   string
	Proxies []*toxiclient.Proxy
	Toxics  []Toxic
	// Clients names the clients whose traffic the proxies carry ("" when
	// they are a node's): their ops in the window show what the fault did.
	Clients []string
	// Linger is how long Stop waits once the toxics are gone: what a
	// latency toxic held in transit lands within it, inside the window.
	Linger time.Duration

	mu      sync.Mutex
	added   []added
	applied int // toxics Start added, for Evidence
}

type added struct {
	p    *toxiclient.Proxy
	name string
}

// Name implements Fault.
func (n *Network) Name() string { return n.Label }

// Start adds every toxic to every proxy.
func (n *Network) Start(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.Proxies) == 0 {
		return fmt.Errorf("%s: no proxies", n.Label)
	}
	for _, p := range n.Proxies {
		for i, t := range n.Toxics {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("%s: %w", n.Label, err)
			}
			name := fmt.Sprintf("lp-%s-%d", t.Type, i)
			// Toxicity 0 would mean "never" to Toxiproxy: 1.0 means
			// every connection.
			tox := t.Toxicity
			if tox <= 0 {
				tox = 1
			}
			if _, err := p.AddToxic(name, t.Type, t.Stream, tox, t.Attributes); err != nil {
				return fmt.Errorf("%s: add %s toxic to %s: %w", n.Label, t.Type, p.Name, err)
			}
			n.added = append(n.added, added{p, name})
			n.applied++
		}
	}
	return nil
}

// Stop removes the toxics Start added.
func (n *Network) Stop(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var errs []error
	for _, a := range n.added {
		if err := a.p.RemoveToxic(a.name); err != nil {
			errs = append(errs, fmt.Errorf("remove %s from %s: %w", a.name, a.p.Name, err))
		}
	}
	n.added = nil
	errs = append(errs, env.Sleep(ctx, n.Linger))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s: %w", n.Label, err)
	}
	return nil
}

// Late holds the upstream traffic of a share of the proxies' connections
// (toxicity, Toxiproxy drawing each) in transit for by, and lingers by
// after: a request sent on such a connection lands by after it left, after
// its sender gave up when by passes its timeout, while the sender's
// cleanup or retry runs on another connection. What was held lands within
// the window (Linger).
func Late(label string, proxies []*toxiclient.Proxy, toxicity float32, by time.Duration) *Network {
	return &Network{Label: label, Proxies: proxies, Linger: by, Toxics: []Toxic{
		{Type: "latency", Stream: "upstream", Toxicity: toxicity, Attributes: toxiclient.Attributes{"latency": by.Milliseconds()}},
	}}
}

// Latency delays both directions of every proxy by latency ± jitter (a round
// trip so costs about twice latency).
func Latency(label string, proxies []*toxiclient.Proxy, latency, jitter time.Duration) *Network {
	attrs := toxiclient.Attributes{"latency": latency.Milliseconds(), "jitter": jitter.Milliseconds()}
	return &Network{Label: label, Proxies: proxies, Toxics: []Toxic{
		{Type: "latency", Stream: "upstream", Attributes: attrs},
		{Type: "latency", Stream: "downstream", Attributes: attrs},
	}}
}

// Partition blackholes every proxy in both directions: connections stay
// open (new ones are accepted by the proxy) and nothing gets through, as in
// a network partition. This is the timeout toxic with timeout 0, not
// Proxy.Disable (a hard down that refuses connections).
func Partition(label string, proxies []*toxiclient.Proxy) *Network {
	attrs := toxiclient.Attributes{"timeout": 0}
	return &Network{Label: label, Proxies: proxies, Toxics: []Toxic{
		{Type: "timeout", Stream: "upstream", Attributes: attrs},
		{Type: "timeout", Stream: "downstream", Attributes: attrs},
	}}
}

// Reset resets every connection (TCP RST) as soon as it carries data.
func Reset(label string, proxies []*toxiclient.Proxy) *Network {
	return &Network{Label: label, Proxies: proxies, Toxics: []Toxic{
		{Type: "reset_peer", Stream: "upstream", Attributes: toxiclient.Attributes{"timeout": 0}},
	}}
}

// Bandwidth limits both directions of every proxy to kbps KB/s.
func Bandwidth(label string, proxies []*toxiclient.Proxy, kbps int64) *Network {
	attrs := toxiclient.Attributes{"rate": kbps}
	return &Network{Label: label, Proxies: proxies, Toxics: []Toxic{
		{Type: "bandwidth", Stream: "upstream", Attributes: attrs},
		{Type: "bandwidth", Stream: "downstream", Attributes: attrs},
	}}
}

// ClientProxies returns every proxy of the given clients (a group fault).
func ClientProxies(links ...*env.Links) []*toxiclient.Proxy {
	var out []*toxiclient.Proxy
	for _, l := range links {
		out = append(out, l.Proxies()...)
	}
	return out
}

// NodeProxies returns the given clients' proxies to one node.
func NodeProxies(nodeID string, links ...*env.Links) ([]*toxiclient.Proxy, error) {
	var out []*toxiclient.Proxy
	for _, l := range links {
		p, err := l.Proxy(nodeID)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// PauseClient is a stop-the-world pause of one client: its gate holds every
// command (its watchdog's too) and every fault point until Stop. With
// Point.After set, the pause begins right after the reply of the client's
// next command of that name (between two commands) instead of at Start (a
// pause takes no Point.Before).
type PauseClient struct {
	Client string
	Gate   *gate.Gate
	Point  contract.Point

	mu      sync.Mutex
	armed   bool
	base    int // the gate's holds at Arm or Start
	held    int // calls held from then to Stop
	running bool
	started time.Time
	span    time.Duration
}

// Arm arms the pause at Point.After now, counting the gate's holds from here:
// the caller waits for the gate's Struck, then applies the fault (so that
// the window counts from the strike): Start then keeps the client paused.
func (f *PauseClient) Arm() {
	f.mu.Lock()
	f.base, f.armed = f.Gate.Holds(), true
	f.mu.Unlock()
	f.Gate.PauseAfter(f.Point.After)
}

// Name implements Fault.
func (f *PauseClient) Name() string {
	return strings.TrimSpace("pause-client " + f.Client + " " + f.Point.String())
}

// Start pauses the client (or arms the pause).
func (f *PauseClient) Start(ctx context.Context) error {
	f.mu.Lock()
	armed := f.armed
	if !armed {
		f.base = f.Gate.Holds()
	}
	f.running, f.started = true, time.Now()
	f.mu.Unlock()
	if f.Point.After != "" && !armed {
		f.Gate.PauseAfter(f.Point.After)
		return nil
	}
	f.Gate.Pause()
	return nil
}

// Stop disarms the pause and resumes the client.
func (f *PauseClient) Stop(ctx context.Context) error {
	f.mu.Lock()
	if f.running {
		f.held, f.running, f.span = f.Gate.Holds()-f.base, false, time.Since(f.started)
	}
	f.mu.Unlock()
	f.Gate.PauseAfter("")
	f.Gate.Resume()
	return nil
}

// CrashClient crashes one client for good: from Start on, everything it
// does fails. With Point.After set, it crashes right after the reply of the
// next command of that name instead (a crash between two commands); with
// Point.Before set, right before it sends its next command of that name.
type CrashClient struct {
	Client string
	Gate   *gate.Gate
	Point  contract.Point
}

// Name implements Fault.
func (f *CrashClient) Name() string {
	return strings.TrimSpace("crash-client " + f.Client + " " + f.Point.String())
}

// Start crashes the client (or arms the crash).
func (f *CrashClient) Start(ctx context.Context) error {
	if f.Point.After != "" {
		f.Gate.CrashAfter(f.Point.After)
		return nil
	}
	if f.Point.Before != "" {
		f.Gate.CrashBefore(f.Point.Before)
		return nil
	}
	f.Gate.Crash()
	return nil
}

// Stop does nothing: a crashed client stays crashed.
func (f *CrashClient) Stop(ctx context.Context) error { return nil }

// CrashClients crashes several clients in turn, each at its own moment:
// Start runs Steps in order, each waiting (bounded by ctx) for its victim to
// be where it should crash, then crashing it. Crashes are for good: Stop
// does nothing. It lets one fault window hold, say, a client crashed while
// it waits in line and another crashed while it holds the lock.
type CrashClients struct {
	// Label is the fault's name in the history.
	Label string
	// Steps run in order; the first error stops Start.
	Steps []func(ctx context.Context) error

	mu      sync.Mutex
	done    int      // steps that crashed their victim
	victims []string // Noted, for Evidence
}

// Noted records that a step crashed client name (its victim is chosen as
// it strikes), for the fault's evidence.
func (f *CrashClients) Noted(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.victims = append(f.victims, name)
}

// Name implements Fault.
func (f *CrashClients) Name() string { return f.Label }

// Start runs the steps.
func (f *CrashClients) Start(ctx context.Context) error {
	for _, step := range f.Steps {
		if err := step(ctx); err != nil {
			return err
		}
		f.mu.Lock()
		f.done++
		f.mu.Unlock()
	}
	return nil
}

// Stop does nothing: the crashed clients stay crashed.
func (f *CrashClients) Stop(ctx context.Context) error { return nil }

// PauseServer freezes one Redis server (SIGSTOP, docker pause) until Stop.
type PauseServer struct {
	Env    env.Env
	NodeID string

	mu      sync.Mutex
	paused  bool
	started time.Time
	span    time.Duration
}

// Name implements Fault.
func (f *PauseServer) Name() string { return "pause-server " + f.NodeID }

// Start pauses the node.
func (f *PauseServer) Start(ctx context.Context) error {
	if err := f.Env.Pause(ctx, f.NodeID); err != nil {
		return err
	}
	f.mu.Lock()
	f.paused, f.started = true, time.Now()
	f.mu.Unlock()
	return nil
}

// Stop resumes it.
func (f *PauseServer) Stop(ctx context.Context) error {
	f.mu.Lock()
	if f.paused && f.span == 0 {
		f.span = time.Since(f.started)
	}
	f.mu.Unlock()
	return f.Env.Resume(ctx, f.NodeID)
}

// PauseProcess freezes a client run as a child process, with SIGSTOP to its
// process group, until Stop sends SIGCONT: a stop-the-world pause in full,
// its timers and watchdog goroutines included.
type PauseProcess struct {
	Client string
	// Pid returns the process id (and process group id) of the client; 0
	// when it does not run.
	Pid func() int

	mu      sync.Mutex
	pid     int
	stopped int // the pid SIGSTOP reached, for Evidence
	started time.Time
	span    time.Duration
}

// Name implements Fault.
func (f *PauseProcess) Name() string { return "pause-client " + f.Client + " (SIGSTOP)" }

// Start sends SIGSTOP.
func (f *PauseProcess) Start(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	pid := f.Pid()
	if pid == 0 {
		return fmt.Errorf("%s: process not running", f.Name())
	}
	if err := proc.StopGroup(pid); err != nil {
		return fmt.Errorf("%s: SIGSTOP %d: %w", f.Name(), pid, err)
	}
	f.pid, f.stopped, f.started = pid, pid, time.Now()
	return nil
}

// Stop sends SIGCONT.
func (f *PauseProcess) Stop(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pid == 0 {
		return nil
	}
	pid := f.pid
	f.pid, f.span = 0, time.Since(f.started)
	if err := proc.ContGroup(pid); err != nil && !proc.Gone(err) {
		return fmt.Errorf("%s: SIGCONT %d: %w", f.Name(), pid, err)
	}
	return nil
}

// PauseServers freezes several nodes at once (SIGSTOP, docker pause), as
// PauseServer freezes one: a master's replicas, say, so that the master
// serves on and nobody acknowledges its writes (WAIT times out). Stop
// resumes every one, also after a Start that paused only some.
type PauseServers struct {
	Env     env.Env
	NodeIDs []string
	// Label is the fault's name in the history before the node IDs.
	Label string

	mu     sync.Mutex
	paused []string // paused and not yet resumed
	// frozen are the nodes Start paused, started when the first one was,
	// span how long until Stop resumed them (Evidence).
	frozen  []string
	started time.Time
	span    time.Duration
}

// Name implements Fault.
func (f *PauseServers) Name() string { return f.Label + " " + strings.Join(f.NodeIDs, " ") }

// Start pauses the nodes, in order; on an error the ones paused stay so
// until Stop.
func (f *PauseServers) Start(ctx context.Context) error {
	for _, id := range f.NodeIDs {
		if err := f.Env.Pause(ctx, id); err != nil {
			return fmt.Errorf("%s: %w", f.Name(), err)
		}
		f.mu.Lock()
		if len(f.frozen) == 0 {
			f.started = time.Now()
		}
		f.paused, f.frozen = append(f.paused, id), append(f.frozen, id)
		f.mu.Unlock()
	}
	return nil
}

// Stop resumes every node Start paused.
func (f *PauseServers) Stop(ctx context.Context) error {
	f.mu.Lock()
	paused := f.paused
	f.paused = nil
	if len(paused) > 0 && f.span == 0 {
		f.span = time.Since(f.started)
	}
	f.mu.Unlock()
	var errs []error
	for _, id := range paused {
		errs = append(errs, f.Env.Resume(ctx, id))
	}
	return errors.Join(errs...)
}
