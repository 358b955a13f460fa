package workload

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockproof/lockproof/internal/proc"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/locker"
)

// ChildEnv is the environment variable through which a parent hands a child
// process its client (JSON). MaybeChild looks for it.
const ChildEnv = "LOCKPROOF_WORKLOAD_CHILD"

// childSpec is what a child process needs to run one client.
type childSpec struct {
	Name, Key, Lock             string
	Seed, Index                 uint64
	TTL, Hold, Think, OpTimeout time.Duration
	WaitTimeout                 time.Duration
	Mix                         Mix
	Route                       route
	// Dial maps a node's address (as Sentinel reports it) to the client's proxy.
	Dial map[string]string
	// Base is the history clock's time zero, Unix nanoseconds (wall clock:
	// parent and child share the machine's clock).
	Base int64
}

// Proc is a workload client run as a child process: a fault can freeze it
// whole (SIGSTOP), watchdog, timers and all, the way a VM or GC pause does.
// The child records its operations on the parent's history clock and streams
// them to the parent, which adds them to the history.
type Proc struct {
	Name  string
	Key   string
	Links *env.Links

	spec    childSpec
	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	holding atomic.Bool
	held    chan struct{}
	// stdin is the child's control line (pause, disarm, go; closed to
	// stop it); freeze is FreezeAtHold's wish, frozen its answer.
	stdin  io.Writer
	freeze bool
	frozen chan struct{}
	// waiting: the child waits in line; inflight: its acquire as invoked
	// (events on fd 3); killed: Kill struck it.
	waiting  atomic.Bool
	inflight atomic.Pointer[history.Op]
	killed   atomic.Bool
	eventErr atomic.Value // error: an event the parent could not read
}

// readEvents follows the child's events (fd 3): "waiting <op>" when it
// starts waiting in line, "done" when that wait ends, "holding" when it
// holds with its check behind and its write ahead, "free" when that ends.
func (p *Proc) readEvents(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		switch string(line) {
		case "holding":
			p.holding.Store(true)
			select {
			case p.held <- struct{}{}:
			default:
			}
			continue
		case "free":
			p.holding.Store(false)
			continue
		case "pausing":
			p.pausing()
			continue
		}
		if js, ok := bytes.CutPrefix(line, []byte("waiting ")); ok {
			var op history.Op
			if err := op.UnmarshalJSON(js); err != nil {
				p.eventErr.Store(fmt.Errorf("child %s: event %q: %w", p.Name, line, err))
				continue
			}
			p.inflight.Store(&op)
			p.waiting.Store(true)
			continue
		}
		p.waiting.Store(false)
	}
}

// FreezeAtHold freezes the child (SIGSTOP to its group) at its next hold,
// right after its lease check with its write ahead, and returns once it is
// frozen, bounded by ctx. The child stops there by itself and waits for the
// parent's word: a SIGSTOP sent when the parent heard "holding" landed
// wherever the child had got to meanwhile, on a loaded machine often past
// its write (a pause-process that froze nothing that mattered, CI of
// 890981d).
func (p *Proc) FreezeAtHold(ctx context.Context) error {
	p.mu.Lock()
	p.freeze = true
	err := p.control("pause")
	p.mu.Unlock()
	if err != nil {
		return err
	}
	select {
	case <-p.frozen:
		return nil
	case <-ctx.Done():
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.frozen: // it froze as the wait gave up
		return nil
	default:
	}
	p.freeze = false
	_ = p.control("disarm")
	return fmt.Errorf("freeze %s at its hold of %q: %w", p.Name, p.Key, ctx.Err())
}

// pausing answers a child that stopped at its hold for the parent's word:
// frozen first when FreezeAtHold wants it, then told to go on (the word
// waits in the pipe until SIGCONT).
func (p *Proc) pausing() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.freeze {
		p.freeze = false
		if pid := p.pidLocked(); pid != 0 && proc.StopGroup(pid) == nil {
			select {
			case p.frozen <- struct{}{}:
			default:
			}
		}
	}
	_ = p.control("go")
}

// control writes a line to the child's control line; p.mu is held.
func (p *Proc) control(line string) error {
	if p.stdin == nil {
		return fmt.Errorf("child %s: not running", p.Name)
	}
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		return fmt.Errorf("child %s: %s: %w", p.Name, line, err)
	}
	return nil
}

// WaitQueued waits until the child waits in line in a blocking acquire,
// bounded by ctx.
func (p *Proc) WaitQueued(ctx context.Context) error {
	if err := poll(ctx, p.waiting.Load); err != nil {
		return fmt.Errorf("wait for %s to queue for %q: %w", p.Name, p.Key, err)
	}
	return nil
}

// Kill SIGKILLs the child's process group: a client that dies for good,
// mid-operation. The operation it was in stays in flight; a blocking
// acquire it was waiting in is recorded as never returned.
func (p *Proc) Kill() error {
	pid := p.Pid()
	if pid == 0 {
		return fmt.Errorf("kill %s: not running", p.Name)
	}
	p.killed.Store(true)
	return proc.KillGroup(pid)
}

func (w *Workload) newProc(ctx context.Context, e env.Env, topo env.Topology, name, key string, idx uint64) (*Proc, error) {
	l, rt, err := w.linksOf(ctx, e, topo, name)
	if err != nil {
		return nil, err
	}
	dial := map[string]string{}
	for _, n := range topo.Nodes() {
		a, err := l.Addr(n.ID)
		if err != nil {
			_ = l.Close()
			return nil, err
		}
		dial[n.Addr] = a
	}
	c := w.cfg
	return &Proc{Name: name, Key: key, Links: l, held: make(chan struct{}, 1), frozen: make(chan struct{}, 1), spec: childSpec{
		Name: name, Key: key, Lock: c.Lock, Seed: c.Seed, Index: idx,
		TTL: c.TTL, Hold: c.Hold, Think: c.Think, OpTimeout: c.OpTimeout, WaitTimeout: c.WaitTimeout, Mix: *c.Mix, Route: rt, Dial: dial,
	}}, nil
}

// Pid returns the child's process id, 0 when it does not run.
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pidLocked()
}

// pidLocked is Pid with p.mu held.
func (p *Proc) pidLocked() int {
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	select {
	case <-p.exited:
		return 0
	default:
	}
	return p.cmd.Process.Pid
}

// Holding reports whether the child holds its lock with its write ahead, as
// far as the parent has learnt from its recorded operations.
func (p *Proc) Holding() bool { return p.holding.Load() }

// WaitHolding waits until the child holds its lock with its write ahead,
// bounded by ctx.
func (p *Proc) WaitHolding(ctx context.Context) error {
	for !p.Holding() {
		select {
		case <-p.held:
		case <-ctx.Done():
			return fmt.Errorf("wait for %s to hold %q: %w", p.Name, p.Key, ctx.Err())
		}
	}
	return nil
}

// run starts the child, adds the operations it streams to rec until ctx is
// done, then asks it to stop (its stdin closes) and waits for it, killing
// it when it does not end within a grace period.
func (p *Proc) run(ctx context.Context, rec *history.Recorder) error {
	spec := p.spec
	spec.Base = time.Now().UnixNano() - rec.Now()
	js, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("encode child spec: %w", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable: %w", err)
	}
	// -test.run=^$: a test binary that forgot MaybeChild runs no test and exits.
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), ChildEnv+"="+string(js))
	cmd.SysProcAttr = proc.Attr()
	var stderr proc.Tail
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("child stdin: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("child stdout: %w", err)
	}
	evr, evw, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("child events: %w", err)
	}
	defer evr.Close()
	cmd.ExtraFiles = []*os.File{evw} // fd 3 in the child
	if err := cmd.Start(); err != nil {
		_ = evw.Close()
		return fmt.Errorf("start child: %w", err)
	}
	_ = evw.Close()
	go p.readEvents(evr)
	exited := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.exited, p.stdin = cmd, exited, stdin
	p.mu.Unlock()

	readDone := make(chan struct{})
	go p.stopOn(ctx, readDone, stdin, cmd.Process.Pid)
	errs := p.record(stdout, rec)
	close(readDone)
	werr := cmd.Wait()
	close(exited)
	if in := p.inflight.Swap(nil); in != nil && p.killed.Load() {
		// Killed while it waited in line: its acquire never returned (the
		// child sent it in that form).
		if err := rec.Record(*in); err != nil {
			errs = append(errs, err)
		}
	}
	if err, _ := p.eventErr.Load().(error); err != nil {
		errs = append(errs, err)
	}
	if werr != nil && !p.killed.Load() {
		errs = append(errs, fmt.Errorf("child %s: %w; stderr: %s", p.Name, werr, stderr.String()))
	}
	return errors.Join(errs...)
}

// stopOn stops the child (its stdin closes) when ctx ends or its output
// did (readDone), and kills its process group, pid's, when it has not
// ended within a grace period.
func (p *Proc) stopOn(ctx context.Context, readDone <-chan struct{}, stdin io.Closer, pid int) {
	select {
	case <-ctx.Done():
	case <-readDone:
	}
	p.mu.Lock()
	_ = stdin.Close()
	p.stdin = nil
	p.mu.Unlock()
	grace := 3*p.spec.OpTimeout + 5*time.Second
	select {
	case <-readDone:
	case <-time.After(grace):
		_ = proc.KillGroup(pid)
	}
}

// record adds the operations the child streams on stdout to rec, until
// it ends, and returns what went wrong on the way.
func (p *Proc) record(stdout io.Reader, rec *history.Recorder) []error {
	var errs []error
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var op history.Op
		if err := op.UnmarshalJSON(sc.Bytes()); err != nil {
			errs = append(errs, fmt.Errorf("child line %q: %w", sc.Text(), err))
			continue
		}
		if in := p.inflight.Load(); in != nil && op.Kind == history.Acquire && op.Call == in.Call {
			p.inflight.Store(nil) // it returned after all
		}
		if err := rec.Record(op); err != nil {
			errs = append(errs, err)
		}
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("read child: %w", err))
	}
	return errs
}

// close kills a child still running and deletes its proxies.
func (p *Proc) close() error {
	if pid := p.Pid(); pid != 0 {
		_ = proc.KillGroup(pid)
	}
	return p.Links.Close()
}

// MaybeChild runs this process as a workload child client when ChildEnv is
// set (it then never returns), and returns at once otherwise. Programs that
// run workloads with Config.Processes > 0 call it first in main or TestMain,
// with the registry their locks are in (required: zoo.Builtin() for
// lockproof's own).
func MaybeChild(locks *locker.Registry) {
	js := os.Getenv(ChildEnv)
	if js == "" {
		return
	}
	code := 0
	var events io.Writer
	if f := os.NewFile(3, "lockproof-events"); f != nil {
		events = f
	}
	if err := runChild(js, locks, os.Stdin, os.Stdout, events); err != nil {
		fmt.Fprintln(os.Stderr, "workload child:", err)
		code = 1
	}
	os.Exit(code)
}

// runChild runs one client per the spec until stdin ends, writing its
// operations to out as history lines.
func runChild(js string, locks *locker.Registry, stdin io.Reader, out, events io.Writer) error {
	var spec childSpec
	if err := json.Unmarshal([]byte(js), &spec); err != nil {
		return fmt.Errorf("%s: %w", ChildEnv, err)
	}
	cfg, err := Config{Lock: spec.Lock, Locks: locks, Mix: &spec.Mix, TTL: spec.TTL, Hold: spec.Hold, Think: spec.Think,
		OpTimeout: spec.OpTimeout, WaitTimeout: spec.WaitTimeout, Seed: spec.Seed, Keys: 1, Clients: 1}.withDefaults()
	if err != nil {
		return err
	}
	w := &Workload{cfg: cfg}
	rt := spec.Route
	var d net.Dialer
	rt.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if to, ok := spec.Dial[addr]; ok {
			addr = to
		}
		return d.DialContext(ctx, network, addr)
	}
	c, err := w.build(spec.Name, spec.Key, spec.Index, rt)
	if err != nil {
		return err
	}
	defer c.close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var armed atomic.Bool
	goOn := make(chan struct{}, 1)
	if events != nil {
		c.tellParent(ctx, events, &armed, goOn)
	}
	rec := history.NewRecorder(out, history.Options{Base: time.Unix(0, spec.Base)})
	go func() {
		readControl(stdin, &armed, goOn)
		cancel() // the control line's end stops the child
	}()
	c.rec.Store(rec)
	stopWatching := watchStalls(ctx, rec, []string{c.Name}) // its own stalls
	werr := w.worker(ctx, rec, c)
	c.watchers.Wait()
	stopWatching()
	return errors.Join(werr, rec.Close())
}

// tellParent has a child's client c tell its parent on events when it
// waits in line and when it holds, pausing there when the parent armed
// it (armed; goOn: the parent's "go"), until ctx ends.
func (c *Client) tellParent(ctx context.Context, events io.Writer, armed *atomic.Bool, goOn <-chan struct{}) {
	// Tell the parent when this client waits in line, with its acquire
	// as invoked: killed there, it leaves a dead waiter the parent
	// records as never returned.
	var mu sync.Mutex
	c.onQueued = func(op *history.Op, waiting bool) {
		mu.Lock()
		defer mu.Unlock()
		line := []byte("done\n")
		if waiting && op != nil {
			pending := *op
			pending.Result = history.Unknown // as a never-returned op is written
			line = append([]byte("waiting "), history.AppendJSON(nil, pending)...)
			line = append(line, '\n')
		}
		_, _ = events.Write(line)
	}
	// And when it holds with its check behind and its write ahead
	// (see Client.WaitHolding): a SIGSTOP then lands between the two.
	// Armed by the parent (FreezeAtHold), it says "pausing" there and
	// waits for the parent's "go", sent once the parent has frozen it:
	// the freeze lands at this point, not wherever the child got to
	// while the parent heard of it.
	c.onHolding = func(holding bool) {
		mu.Lock()
		line, pause := "free\n", false
		if holding {
			line = "holding\n"
			if pause = armed.CompareAndSwap(true, false); pause {
				line += "pausing\n"
			}
		}
		_, _ = io.WriteString(events, line)
		mu.Unlock()
		if pause {
			select {
			case <-goOn:
			case <-ctx.Done():
			}
		}
	}
}

// readControl reads the parent's control line until it ends: pause (arm:
// pause at the next hold), disarm, go (after a pause).
func readControl(stdin io.Reader, armed *atomic.Bool, goOn chan<- struct{}) {
	sc := bufio.NewScanner(stdin)
	for sc.Scan() {
		switch sc.Text() {
		case "pause":
			armed.Store(true)
		case "disarm":
			armed.Store(false)
		case "go":
			select {
			case goOn <- struct{}{}:
			default:
			}
		}
	}
}
