package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Child is a started server process in a group of its own (Attr), whose
// end is watched: the process layer's servers (etcd members, ZooKeeper
// servers) are each one, killed, paused and resumed as a group.
type Child struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts cmd in a process group of its own and watches its end;
// onExit, when not nil, runs once it has ended (closing its log, say).
func Start(cmd *exec.Cmd, onExit func()) (*Child, error) {
	cmd.SysProcAttr = Attr()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &Child{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // a killed server's exit status says nothing
		if onExit != nil {
			onExit()
		}
		close(c.done)
	}()
	return c, nil
}

// Pid is the child's process id (its group's too).
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Running reports whether the child has not ended; false for nil.
func (c *Child) Running() bool {
	if c == nil {
		return false
	}
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// Kill ends the child's group at once (KillGroup) and waits up to wait
// for the child to end. An ended child is not signaled: its pid may be
// another's by now.
func (c *Child) Kill(wait time.Duration) error {
	if !c.Running() {
		return nil
	}
	_ = KillGroup(c.Pid())
	select {
	case <-c.done:
		return nil
	case <-time.After(wait):
		return fmt.Errorf("pid %d still runs %v after SIGKILL", c.Pid(), wait)
	}
}

// Signal sends send (StopGroup, ContGroup) to the child's group; an error
// when the child has ended.
func (c *Child) Signal(send func(pid int) error) error {
	if !c.Running() {
		return fmt.Errorf("not running")
	}
	return send(c.Pid())
}

// Member is one server of a cluster the process layer runs (an etcd
// member, a ZooKeeper server): how to start it, where its output goes, the
// ports it holds, and the process running it now, if any. Its methods are
// safe for concurrent use.
type Member struct {
	// Name names it in errors ("etcd m0", "zookeeper 2").
	Name string
	// Log is the file its output is appended to.
	Log string
	// Command makes the command of each start.
	Command func() *exec.Cmd

	mu       sync.Mutex
	child    *Child
	releases []func() error
}

// Hold keeps release (a port's reservation, ReservePort) until Close.
func (m *Member) Hold(release func() error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.releases = append(m.releases, release)
}

// Launch starts the member; an error when it runs already.
func (m *Member) Launch() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.child.Running() {
		return fmt.Errorf("start %s: still running", m.Name)
	}
	logf, err := os.OpenFile(m.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("start %s: %w", m.Name, err)
	}
	cmd := m.Command()
	cmd.Stdout, cmd.Stderr = logf, logf
	child, err := Start(cmd, func() { _ = logf.Close() })
	if err != nil {
		_ = logf.Close()
		return fmt.Errorf("start %s: %w", m.Name, err)
	}
	m.child = child
	return nil
}

func (m *Member) process() *Child {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.child
}

// Running reports whether the member's process runs.
func (m *Member) Running() bool { return m.process().Running() }

// Pid is the process id of the member's process, 0 when it does not run
// (for its CPU time, in the bench).
func (m *Member) Pid() int {
	c := m.process()
	if !c.Running() {
		return 0
	}
	return c.Pid()
}

// Kill crashes the member (SIGKILL to its group, no shutdown) and waits
// for it; a member not running is left alone.
func (m *Member) Kill() error {
	if err := m.process().Kill(10 * time.Second); err != nil {
		return fmt.Errorf("kill %s: %w", m.Name, err)
	}
	return nil
}

// Pause freezes the member's group (SIGSTOP); Resume thaws it.
func (m *Member) Pause() error { return m.signal("pause", StopGroup) }

// Resume thaws a paused member (SIGCONT).
func (m *Member) Resume() error { return m.signal("resume", ContGroup) }

func (m *Member) signal(what string, send func(int) error) error {
	if err := m.process().Signal(send); err != nil {
		return fmt.Errorf("%s %s: %w", what, m.Name, err)
	}
	return nil
}

// Close kills the member and gives up what it holds.
func (m *Member) Close() error {
	err := m.Kill()
	m.mu.Lock()
	rs := m.releases
	m.releases = nil
	m.mu.Unlock()
	for _, r := range rs {
		err = errors.Join(err, r())
	}
	return err
}

// Ensemble is the members of one cluster of the process layer (an etcd
// cluster, a ZooKeeper ensemble), under one temporary directory.
type Ensemble struct {
	// Root is the directory the members' directories are made in.
	Root    string
	members []*Member
	once    sync.Once
	err     error
}

// NewEnsemble makes the ensemble's temporary directory (os.MkdirTemp's
// pattern).
func NewEnsemble(pattern string) (*Ensemble, error) {
	root, err := os.MkdirTemp("", pattern)
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	return &Ensemble{Root: root}, nil
}

// Add makes m one of the ensemble's members, closed by Stop.
func (e *Ensemble) Add(m *Member) { e.members = append(e.members, m) }

// Stop closes every member (Member.Close) and removes Root. It is safe
// to call more than once; every call returns the first's error.
func (e *Ensemble) Stop() error {
	e.once.Do(func() {
		for _, m := range e.members {
			e.err = errors.Join(e.err, m.Close())
		}
		e.err = errors.Join(e.err, os.RemoveAll(e.Root))
	})
	return e.err
}

// Tails returns the last 1,500 bytes of each member's log, for an error.
func (e *Ensemble) Tails() string {
	var b strings.Builder
	for _, m := range e.members {
		log, _ := os.ReadFile(m.Log)
		if len(log) > 1500 {
			log = log[len(log)-1500:]
		}
		fmt.Fprintf(&b, "\n%s log: %s", m.Name, strings.TrimSpace(string(log)))
	}
	return b.String()
}

// Await calls try every interval until it succeeds, and returns its
// result; when ctx ends first, ctx's error with try's last.
func Await[T any](ctx context.Context, every time.Duration, try func(context.Context) (T, error)) (T, error) {
	for {
		v, err := try(ctx)
		if err == nil {
			return v, nil
		}
		select {
		case <-ctx.Done():
			return v, fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(every):
		}
	}
}
