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
	"io"
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
	// Password, when set, is asked of every client (requirepass), and a
	// replica gives it to its master (masterauth); a Sentinel gives it to
	// the other Sentinels (sentinel sentinel-pass). The server then runs
	// in protected mode, and its configuration file is its owner's
	// alone: another local user can neither read it off the file nor
	// send the server a command.
	Password string
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
	// release gives up the port's reservation (proc.ReservePort): held from
	// Start to Stop, through a Kill, so that while the node is down no
	// other test's free port is this one.
	release func() error
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
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, release, err := proc.ReservePort(cfg.Port)
		if err != nil {
			if cfg.Port == 0 {
				p.cleanupDir()
				return nil, err
			}
			// A given port that cannot be reserved (a stranger listens on
			// it) fails below, where redis-server cannot bind it either.
			port, release = cfg.Port, func() error { return nil }
		}
		lastErr = p.launch(ctx, bin, port, cfg)
		if lastErr == nil {
			p.release = release
			return p, nil
		}
		_ = release()
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
	}
	switch {
	case cfg.Password == "":
		// A lock's test server: loopback only, no password.
		conf = append(conf, "protected-mode no")
	case cfg.Sentinel:
		conf = append(conf, "protected-mode yes", "requirepass "+cfg.Password, "sentinel sentinel-pass "+cfg.Password)
	default:
		conf = append(conf, "protected-mode yes", "requirepass "+cfg.Password, "masterauth "+cfg.Password)
	}
	if !cfg.Sentinel {
		conf = append(conf, "save \"\"", "appendonly no")
	}
	conf = append(conf, cfg.Extra...)
	confPath := filepath.Join(p.Dir, "redis.conf")
	if err := os.WriteFile(confPath, []byte(strings.Join(conf, "\n")+"\n"), 0o600); err != nil {
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
		err := ping(wctx, p.Addr, cfg.Password, cmd.Process.Pid)
		if err == nil {
			return nil
		}
		if errors.Is(err, errStranger) {
			// Another test's server answers on the port (it bound it
			// first): ours exits with "Address already in use", and the
			// next attempt takes another port.
			select {
			case <-p.done:
				return fmt.Errorf("start %s on port %d: %w; log: %s", bin, port, err, p.logTail())
			case <-wctx.Done():
				p.kill()
				return fmt.Errorf("start %s on port %d: %w", bin, port, err)
			}
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

// errStranger is ping's error when the server on the port is not the
// process just started.
var errStranger = errors.New("another process answers on the port")

// ping asks the server at addr for INFO server and checks that it is the
// process pid. A PONG alone is not enough: between FreePort and
// redis-server's bind another test may start a server on the same port,
// and its PONG would hand this test a stranger's server (it did, in CI:
// a replica of a chaos test, READONLY and full of its keys).
func ping(ctx context.Context, addr, password string, pid int) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	r := bufio.NewReader(c)
	if password != "" {
		// AUTH as a RESP array: the password may hold any byte.
		cmd := fmt.Sprintf("*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n", len(password), password)
		if _, err := c.Write([]byte(cmd)); err != nil {
			return err
		}
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		if strings.TrimSpace(line) != "+OK" {
			// A stranger's server (it refuses our password, or has none).
			return fmt.Errorf("%w: %s answers AUTH with %q", errStranger, addr, strings.TrimSpace(line))
		}
	}
	if _, err := c.Write([]byte("INFO server\r\n")); err != nil {
		return err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "$")))
	if !strings.HasPrefix(line, "$") || err != nil || n < 0 {
		return fmt.Errorf("ping %s: unexpected reply %q", addr, strings.TrimSpace(line))
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return err
	}
	want := "process_id:" + strconv.Itoa(pid)
	for _, l := range strings.Split(string(body), "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "process_id:") {
			if l != want {
				return fmt.Errorf("%w: %s is %s, not the started pid %d", errStranger, addr, l, pid)
			}
			return nil
		}
	}
	return fmt.Errorf("ping %s: INFO server has no process_id", addr)
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
	var err error
	if !p.Exited() {
		// An ended process's pid may be another's by now: no signal.
		err = p.Kill()
	}
	if p.release != nil {
		err = errors.Join(err, p.release())
	}
	p.cleanupDir()
	return err
}

func (p *Process) cleanupDir() {
	if p.ownDir {
		_ = os.RemoveAll(p.Dir)
	}
}
