// Package redisproc starts and stops real redis-server and redis-sentinel
// processes on free loopback ports, each in a temporary directory of its own.
//
// It is shared by the tests of lock and fencing (through redistest) and by the
// chaos environments. Every process runs in its own process group so that it
// can be paused (SIGSTOP), resumed (SIGCONT) and killed as a whole.
package redisproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockproof/lockproof/internal/proc"
)

// ErrNotInstalled is returned when the redis-server or redis-sentinel binary is not on PATH.
var ErrNotInstalled = errors.New("redis binary not found on PATH")

// Config says how to start one process.
type Config struct {
	// Sentinel starts redis-sentinel instead of redis-server.
	Sentinel bool
	// Port to listen on; 0 picks a free loopback port.
	Port int
	// Dir is the working directory; "" makes a temporary one, removed by Stop.
	Dir string
	// Extra lines appended to the generated configuration file
	// (for example "replicaof 127.0.0.1 6379" or "sentinel monitor ...").
	Extra []string
	// StartTimeout bounds the wait for the process to accept connections; 0 means 10s.
	StartTimeout time.Duration
	// Env are extra environment variables (KEY=VALUE) of the process, on
	// top of this process's own (ClockBehind makes some).
	Env []string
}

// Process is a running redis-server or redis-sentinel.
type Process struct {
	// Addr is host:port on 127.0.0.1.
	Addr string
	// Port is the TCP port it listens on.
	Port int
	// Dir is its working directory (config file, log, data).
	Dir string

	cmd     *exec.Cmd
	ownDir  bool
	done    chan struct{}
	waitErr error
	mu      sync.Mutex
	stopped bool
}

// Binary returns the path of redis-server (or redis-sentinel), or ErrNotInstalled.
func Binary(sentinel bool) (string, error) {
	name := "redis-server"
	if sentinel {
		name = "redis-sentinel"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, ErrNotInstalled)
	}
	return p, nil
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start launches a process per cfg and waits, bounded by ctx and
// cfg.StartTimeout, until it accepts connections and answers PING.
func Start(ctx context.Context, cfg Config) (*Process, error) {
	bin, err := Binary(cfg.Sentinel)
	if err != nil {
		return nil, err
	}
	p := &Process{Dir: cfg.Dir, done: make(chan struct{})}
	if p.Dir == "" {
		d, err := os.MkdirTemp("", "lockproof-redis-*")
		if err != nil {
			return nil, fmt.Errorf("start redis: temp dir: %w", err)
		}
		p.Dir, p.ownDir = d, true
	}
	port := cfg.Port
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		if cfg.Port == 0 {
			if port, err = FreePort(); err != nil {
				p.cleanupDir()
				return nil, err
			}
		}
		lastErr = p.launch(ctx, bin, port, cfg)
		if lastErr == nil {
			return p, nil
		}
		if cfg.Port != 0 || ctx.Err() != nil {
			break
		}
	}
	p.cleanupDir()
	return nil, lastErr
}

func (p *Process) launch(ctx context.Context, bin string, port int, cfg Config) error {
	conf := []string{
		"bind 127.0.0.1",
		"port " + strconv.Itoa(port),
		"dir " + p.Dir,
		"logfile " + filepath.Join(p.Dir, "redis.log"),
		"daemonize no",
		"protected-mode no",
	}
	if !cfg.Sentinel {
		conf = append(conf, "save \"\"", "appendonly no")
	}
	conf = append(conf, cfg.Extra...)
	confPath := filepath.Join(p.Dir, "redis.conf")
	if err := os.WriteFile(confPath, []byte(strings.Join(conf, "\n")+"\n"), 0o644); err != nil {
		return fmt.Errorf("start redis: write %s: %w", confPath, err)
	}
	cmd := exec.Command(bin, confPath)
	cmd.Dir = p.Dir
	cmd.SysProcAttr = proc.Attr()
	if len(cfg.Env) > 0 {
		cmd.Env = append(os.Environ(), cfg.Env...)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", bin, err)
	}
	p.cmd, p.Port, p.Addr = cmd, port, net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	p.done = make(chan struct{})
	go func() { p.waitErr = cmd.Wait(); close(p.done) }()

	timeout := cfg.StartTimeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if err := ping(wctx, p.Addr); err == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("start %s on port %d: exited early (%v); log: %s", bin, port, p.waitErr, p.logTail())
		case <-wctx.Done():
			p.kill()
			return fmt.Errorf("start %s on port %d: not ready: %w; log: %s", bin, port, wctx.Err(), p.logTail())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// ping sends an inline PING and waits for +PONG.
func ping(ctx context.Context, addr string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("ping %s: unexpected reply %q", addr, strings.TrimSpace(line))
	}
	return nil
}

func (p *Process) logTail() string {
	b, err := os.ReadFile(filepath.Join(p.Dir, "redis.log"))
	if err != nil {
		return "(no log)"
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// Pid returns the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Pause freezes the process with SIGSTOP: it keeps its sockets but answers
// nothing. (proc.ErrUnsupported where the platform cannot.)
func (p *Process) Pause() error { return p.signal("SIGSTOP", proc.StopGroup) }

// Resume thaws a paused process with SIGCONT.
func (p *Process) Resume() error { return p.signal("SIGCONT", proc.ContGroup) }

// Kill ends the process at once with SIGKILL (a crash, no shutdown) and waits for it.
// Its directory is kept so that a restart can reuse it.
func (p *Process) Kill() error {
	p.kill()
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("kill redis pid %d: still running after 10s", p.Pid())
	}
}

func (p *Process) kill() {
	_ = proc.KillGroup(p.cmd.Process.Pid) // thawed first: a stopped process must run to die
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *Process) signal(name string, send func(pid int) error) error {
	if err := send(p.cmd.Process.Pid); err != nil {
		return fmt.Errorf("%s to redis pid %d: %w", name, p.Pid(), err)
	}
	return nil
}

// Stop kills the process (if it still runs) and removes its temporary directory.
// It is safe to call more than once.
func (p *Process) Stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return nil
	}
	p.stopped = true
	err := p.Kill()
	p.cleanupDir()
	return err
}

func (p *Process) cleanupDir() {
	if p.ownDir {
		_ = os.RemoveAll(p.Dir)
	}
}
