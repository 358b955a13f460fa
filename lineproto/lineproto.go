// Package lineproto puts a lock written in any language under lockproof's
// harness: the lock runs as a process of its own, one per workload client,
// and speaks JSON lines on stdin and stdout (docs/LINEPROTO.md, the
// protocol's contract, version 2). Entry makes a locker.Entry of such a
// command; the harness then drives it as any Go lock, under the whole
// real-time matrix. pause-client freezes the process with SIGSTOP and
// crash-client kills it (Locker.Pid, which package chaos looks for).
//
// The harness records every call and return on its own clock, around the
// round trip to the process: a recorded window is wider than the lock's
// own by the protocol's latency (Locker.Overhead), which can only hide an
// overlap shorter than it, never invent one.
package lineproto

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/lockproof/lockproof/internal/proc"
	"github.com/lockproof/lockproof/internal/redact"
	"github.com/lockproof/lockproof/locker"
)

// Config is a lock run as a command.
type Config struct {
	// Name is the lock's name in the matrix (locker.Entry.Name).
	Name string
	// Command is the program and its arguments, started once per client.
	Command []string
	// Dir is the command's working directory; "" is the caller's.
	Dir string
	// Profile is what the lock claims (locker.Entry.Profile); "" is fenced,
	// the strongest claim, until the lock says otherwise.
	Profile locker.Profile
	// Doc is one line saying what the lock is.
	Doc string
	// HelloTimeout bounds the start: the process must answer hello within
	// it; 0 means 10s (an interpreter's or a JVM's start).
	HelloTimeout time.Duration
	// CloseTimeout bounds Close: a process that has not exited by then
	// after its close request and the end of its stdin is killed; 0 means 5s.
	CloseTimeout time.Duration
	// Env names the variables of this process's environment the lock's
	// process gets beside the ones it always gets (BaseEnv): its
	// interpreter's, say (PYTHONPATH, VIRTUAL_ENV, JAVA_HOME). No other
	// variable reaches it (docs/LINEPROTO.md, The process's environment).
	Env []string
}

// BaseEnv are the variables of this process's environment every lock
// process gets (when set): what finds programs and files and says the
// locale, nothing that may hold a secret of the harness's (such as
// LOCKPROOF_SENTINEL_PASSWORD). LC_* is every
// variable of that prefix; SYSTEMROOT, TEMP and TMP are Windows'.
var BaseEnv = []string{"PATH", "HOME", "LANG", "LANGUAGE", "LC_*", "TMPDIR", "TZ", "SYSTEMROOT", "TEMP", "TMP"}

// Environ returns the environment of a lock process: the variables of
// environ (os.Environ's form) that BaseEnv or extra name.
func Environ(environ, extra []string) []string {
	keep := func(name string) bool {
		for _, n := range slices.Concat(BaseEnv, extra) {
			if prefix, ok := strings.CutSuffix(n, "*"); ok && strings.HasPrefix(name, prefix) || n == name ||
				runtime.GOOS == "windows" && strings.EqualFold(n, name) {
				return true
			}
		}
		return false
	}
	out := []string{} // never nil: exec.Cmd's nil Env is the whole environment
	for _, kv := range environ {
		if name, _, ok := strings.Cut(kv, "="); ok && name != "" && keep(name) {
			out = append(out, kv)
		}
	}
	return out
}

// Entry returns the locker.Entry of the lock c runs: each client's Locker
// is a process of its own (Open).
func Entry(c Config) (locker.Entry, error) {
	if len(c.Command) == 0 || c.Command[0] == "" {
		return locker.Entry{}, fmt.Errorf("lock %q: Command is empty: %w", c.Name, locker.ErrInvalid)
	}
	doc := c.Doc
	if doc == "" {
		doc = "a lock in its own process: " + strings.Join(c.Command, " ")
	}
	return locker.Entry{Name: c.Name, Profile: c.Profile, Doc: doc,
		Open: func(d locker.Deps) (locker.Locker, error) { return Open(c, d) }}, nil
}

// Locker is one client's lock process. It implements locker.Locker and,
// as the process's hello says, locker.Waiter; its leases implement
// locker.Reentrant and locker.Claimer when the lock has them.
type Locker struct {
	cfg    Config
	deps   locker.Deps
	client string
	fwd    *forwarder
	cmd    *exec.Cmd
	hello  Reply
	exited chan struct{} // closed when the process has exited
	stderr proc.Tail
	// red redacts the password hello hands the process from a line of
	// its stdout before the line is cut to quote it (ErrProtocol): a cut
	// through the password would leave a part that the harness's own
	// redaction of the error (runner.Config.Secrets) cannot recognise.
	red *redact.Redactor

	wmu   sync.Mutex // one line at a time on stdin
	stdin io.WriteCloser

	mu       sync.Mutex
	next     uint64
	pending  map[uint64]chan Reply
	leases   map[uint64]*lease
	renewals map[uint64]func(error)
	broken   error // the first protocol error: every call fails with it
	closed   bool
	waitErr  error // the process's exit status, once exited

	over overhead
}

// Open starts the lock's process for the client d serves and says hello.
// The process reaches Redis through one loopback endpoint that dials along
// d.Redis (see forwarder); it must answer hello within Config.HelloTimeout.
func Open(c Config, d locker.Deps) (locker.Locker, error) {
	d = d.Normalize()
	if d.Redis == nil {
		return nil, fmt.Errorf("lock %q: Deps.Redis is nil: %w", c.Name, locker.ErrInvalid)
	}
	if len(c.Command) == 0 {
		return nil, fmt.Errorf("lock %q: Command is empty: %w", c.Name, locker.ErrInvalid)
	}
	fwd, opt, err := newForwarder(d.Redis)
	if err != nil {
		return nil, fmt.Errorf("lock %q: %w: %w", c.Name, err, locker.ErrUnsupported)
	}
	client := d.Client
	if client == "" {
		client = c.Name
	}
	l := &Locker{cfg: c, deps: d, client: client, fwd: fwd, exited: make(chan struct{}), red: redact.New(opt.Password, fwd.Password()),
		pending: map[uint64]chan Reply{}, leases: map[uint64]*lease{}, renewals: map[uint64]func(error){}}
	if err := l.start(); err != nil {
		_ = fwd.Close()
		return nil, fmt.Errorf("lock %q: %w", c.Name, err)
	}
	to := c.HelloTimeout
	if to <= 0 {
		to = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), to)
	defer cancel()
	r, err := l.call(ctx, Request{Op: OpHello, Version: Version, Client: client, Prefix: d.Prefix,
		Redis: &Redis{Addr: fwd.Addr(), Password: fwd.Password(), DB: opt.DB}})
	if err == nil {
		err = checkHello(r)
	}
	if err != nil {
		_ = l.kill()
		return nil, fmt.Errorf("lock %q: %w%s", c.Name, err, l.stderrTailUnsaid(err))
	}
	l.mu.Lock()
	l.hello = r
	l.mu.Unlock()
	l.deps.Logger.Debug("lineproto: hello", "client", client, "lock", r.Lock, "ops", r.Ops,
		"fenced", r.Fenced, "claims", r.Claims, "notices", r.Notices)
	// A few pings measure the protocol's own round trip before the run.
	for range 5 {
		if err := l.Ping(ctx); err != nil {
			_ = l.kill()
			return nil, fmt.Errorf("lock %q: ping: %w%s", c.Name, err, l.stderrTailUnsaid(err))
		}
	}
	switch {
	case len(r.Modes) > 0 && slices.Contains(r.Ops, OpWait):
		return &modedWaiter{moded{l}}, nil
	case len(r.Modes) > 0:
		return &moded{l}, nil
	case slices.Contains(r.Ops, OpWait):
		return &waiter{l}, nil
	}
	return l, nil
}

// checkHello says what is wrong with a hello reply that parsed (parseLine
// checked its fields' types): nil for nothing.
func checkHello(r Reply) error {
	if r.Result != ResultOK {
		return fmt.Errorf("hello: result %q: %s", r.Result, r.Error)
	}
	if r.Version < MinVersion || r.Version > Version {
		return fmt.Errorf("hello: the process speaks version %d, the harness %d to %d", r.Version, MinVersion, Version)
	}
	if err := checkModes(r); err != nil {
		return err
	}
	for _, op := range r.Ops {
		if !slices.Contains([]string{OpAcquire, OpWait, OpRelease, OpRenew, OpReenter}, op) {
			return fmt.Errorf("hello: ops: unknown op %q", op)
		}
	}
	if !slices.Contains(r.Ops, OpAcquire) {
		return errors.New(`hello: ops: a lock must have "acquire"`)
	}
	return nil
}

// checkModes says what is wrong with a hello's modes and capacity: a
// version 1 process has none; a version 2 one none (a mutex), read and
// write (a read-write lock), or permits with a capacity (a semaphore).
func checkModes(r Reply) error {
	if r.Version < 2 && (len(r.Modes) > 0 || r.Capacity != 0) {
		return fmt.Errorf("hello: modes and capacity are version 2's; the process speaks version %d", r.Version)
	}
	m := slices.Clone(r.Modes)
	slices.Sort(m)
	switch {
	case len(m) == 0:
		if r.Capacity != 0 {
			return errors.New("hello: capacity without modes [\"permits\"]")
		}
	case slices.Equal(m, []string{ModeRead, ModeWrite}):
		if r.Capacity != 0 {
			return errors.New("hello: capacity on a read-write lock (modes read and write)")
		}
	case slices.Equal(m, []string{ModePermits}):
		if r.Capacity < 1 {
			return fmt.Errorf("hello: capacity %d: a semaphore (modes [\"permits\"]) has at least 1", r.Capacity)
		}
	default:
		return fmt.Errorf("hello: modes %q: want none, [\"read\", \"write\"] or [\"permits\"]", r.Modes)
	}
	return nil
}

func (l *Locker) start() error {
	cmd := exec.Command(l.cfg.Command[0], l.cfg.Command[1:]...)
	cmd.Dir = l.cfg.Dir
	cmd.Env = Environ(os.Environ(), l.cfg.Env)
	cmd.SysProcAttr = proc.Attr()
	cmd.Stderr = &l.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %q: %w", l.cfg.Command[0], err)
	}
	l.cmd, l.stdin = cmd, stdin
	go l.read(stdout)
	return nil
}

// read follows the process's stdout until it ends, then waits for the
// process: every call still pending learns it died.
func (l *Locker) read(stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		r, bad := parseLine(line)
		if bad == "" {
			bad = l.dispatch(r)
		}
		if bad != "" {
			text := l.red.String(string(line))
			if len(text) > 200 {
				text = text[:200]
			}
			l.breakWith(&ErrProtocol{Client: l.client, Line: n, Text: text, Reason: bad})
		}
	}
	if err := sc.Err(); err != nil {
		l.breakWith(&ErrProtocol{Client: l.client, Line: n + 1, Reason: err.Error()})
	}
	err := l.cmd.Wait()
	l.mu.Lock()
	l.waitErr = err
	// Closed under l.mu, before the calls in flight hear of the death: a
	// call made once one of them returned finds the process exited (under
	// the race detector one slipped in between, wrote to the closed stdin
	// and said only "file already closed").
	close(l.exited)
	for id, ch := range l.pending {
		close(ch) // died mid-call
		delete(l.pending, id)
	}
	for id, done := range l.renewals {
		done(fmt.Errorf("%w: the lock process exited", locker.ErrUnknownOutcome))
		delete(l.renewals, id)
	}
	l.mu.Unlock()
}

// exitedLocked is the error of a call that found the process exited:
// nothing was sent (surely no effect). Called with l.mu held.
func (l *Locker) exitedLocked() error {
	return fmt.Errorf("the lock process of client %s exited (%v): nothing sent", l.client, l.waitErr)
}

// dispatch hands a reply to its caller, or acts on an event; it returns
// what is wrong with the line, "" for nothing.
func (l *Locker) dispatch(r Reply) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r.Event == "" {
		ch, ok := l.pending[r.ID]
		if !ok {
			if r.ID > l.next {
				return fmt.Sprintf("a reply to id %d, which was never sent", r.ID)
			}
			// The caller gave up (its context ended): a late reply. Its
			// effect stands unknown in the history, as recorded.
			l.deps.Logger.Debug("lineproto: late reply", "client", l.client, "id", r.ID, "result", r.Result)
			return ""
		}
		delete(l.pending, r.ID)
		ch <- r
		return ""
	}
	switch r.Event {
	case EventLost:
		if !l.hello.Notices {
			return `event "lost" from a lock whose hello said notices false`
		}
		if ls, ok := l.leases[r.Lease]; ok {
			ls.markLost()
		}
	case EventRenewing:
		ls, ok := l.leases[r.Lease]
		if !ok {
			return fmt.Sprintf("renewing lease %d, which the process never granted or was released", r.Lease)
		}
		if _, dup := l.renewals[r.Renewal]; dup {
			return fmt.Sprintf("renewal %d announced twice", r.Renewal)
		}
		tok, has := ls.Fence()
		l.renewals[r.Renewal] = l.deps.Observe(ls.key, time.Duration(r.TTL)*time.Millisecond, tok, has)
	case EventRenewed:
		done, ok := l.renewals[r.Renewal]
		if !ok {
			return fmt.Sprintf("renewal %d ended, never announced", r.Renewal)
		}
		delete(l.renewals, r.Renewal)
		done(resultErr(r, locker.ErrNotHeld))
	}
	return ""
}

func (l *Locker) breakWith(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.broken != nil {
		return
	}
	l.broken = err
	l.deps.Logger.Error("lineproto: protocol broken", "err", err)
	// No reply can be trusted from here on: every call in flight is
	// unknown (the process may have acted on it).
	for id, ch := range l.pending {
		close(ch)
		delete(l.pending, id)
	}
}

// call sends req and waits for its reply, bounded by ctx. It returns an
// error only when no reply came: nothing was sent (a closed or broken
// Locker, a dead process), or the outcome is unknown (ctx ended, the
// process died mid-call).
func (l *Locker) call(ctx context.Context, req Request) (Reply, error) {
	if err := ctx.Err(); err != nil {
		return Reply{}, err // nothing sent
	}
	l.mu.Lock()
	if l.broken != nil {
		err := l.broken
		l.mu.Unlock()
		return Reply{}, fmt.Errorf("%w: %w", locker.ErrInvalid, err)
	}
	select {
	case <-l.exited:
		err := l.exitedLocked()
		l.mu.Unlock()
		return Reply{}, err
	default:
	}
	l.next++
	req.ID = l.next
	ch := make(chan Reply, 1)
	l.pending[req.ID] = ch
	l.mu.Unlock()
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		if left <= 0 {
			// The deadline passed since the check above: send nothing
			// rather than a request without timeout_ms, which says "no
			// deadline" (docs/LINEPROTO.md: timeout_ms is never 0).
			l.forget(req.ID)
			return Reply{}, context.DeadlineExceeded
		}
		req.TimeoutMillis = millis(left)
	}
	b, err := json.Marshal(req)
	if err != nil {
		l.forget(req.ID)
		return Reply{}, fmt.Errorf("%w: encode %s: %w", locker.ErrInvalid, req.Op, err)
	}
	start := time.Now()
	l.wmu.Lock()
	_, err = l.stdin.Write(append(b, '\n'))
	l.wmu.Unlock()
	if err != nil {
		// A pipe write is whole or not at all for a line this short; a
		// process that no longer reads got nothing.
		l.forget(req.ID)
		// A process that died shows as a closed or broken stdin before
		// its reader has seen it exit: wait a moment for that, to say so.
		t := time.NewTimer(100 * time.Millisecond)
		defer t.Stop()
		select {
		case <-l.exited:
			l.mu.Lock()
			xerr := l.exitedLocked()
			l.mu.Unlock()
			return Reply{}, fmt.Errorf("%w: %w", xerr, err)
		case <-t.C:
		case <-ctx.Done():
		}
		return Reply{}, fmt.Errorf("write to the lock process of client %s: %w", l.client, err)
	}
	select {
	case r, ok := <-ch:
		if !ok {
			l.mu.Lock()
			broken := l.broken
			l.mu.Unlock()
			if broken != nil {
				return Reply{}, fmt.Errorf("%w: %w (%s in flight)", locker.ErrUnknownOutcome, broken, req.Op)
			}
			return Reply{}, fmt.Errorf("%w: the lock process of client %s died during %s%s", locker.ErrUnknownOutcome, l.client, req.Op, l.stderrTail())
		}
		if req.Op != OpHello {
			// hello's round trip is the process's start-up (an
			// interpreter's, its imports), not the protocol's latency.
			l.over.add(time.Since(start) - time.Duration(r.TookMicros)*time.Microsecond)
		}
		return r, nil
	case <-ctx.Done():
		l.forget(req.ID)
		return Reply{}, fmt.Errorf("%w: %s: no reply from the lock process within the context: %w", locker.ErrUnknownOutcome, req.Op, ctx.Err())
	}
}

func (l *Locker) forget(id uint64) {
	l.mu.Lock()
	delete(l.pending, id)
	l.mu.Unlock()
}

// resultErr maps a reply's result to package locker's errors; fail is
// refused.
func resultErr(r Reply, refused error) error {
	var err error
	switch r.Result {
	case ResultOK:
		return nil
	case ResultFail:
		err = refused
	case ResultUnknown:
		err = locker.ErrUnknownOutcome
	case ResultUnsupported:
		err = locker.ErrUnsupported
	default:
		err = locker.ErrInvalid
	}
	if r.Error != "" {
		return fmt.Errorf("%w: %s", err, r.Error)
	}
	return err
}

// Name implements locker.Locker: the configured name.
func (l *Locker) Name() string { return l.cfg.Name }

// Pid is the process's id (its group's), 0 once it has exited: the client
// faults freeze and kill it (pause-client, crash-client).
func (l *Locker) Pid() int {
	select {
	case <-l.exited:
		return 0
	default:
		return l.cmd.Process.Pid
	}
}

// Ping makes one round trip to the process that the lock does not act on:
// the protocol's own latency (pipes, encoding, the process's dispatch).
func (l *Locker) Ping(ctx context.Context) error {
	r, err := l.call(ctx, Request{Op: OpPing})
	if err != nil {
		return err
	}
	return resultErr(r, locker.ErrInvalid)
}

// Overhead is the protocol's own latency measured so far: each call's
// round trip less the time the process says the lock spent (took_us, 0
// when it does not say), as quantiles over the calls. hello is not among
// them: its round trip is the process's start-up.
func (l *Locker) Overhead() (n int, p50, p99, maxd time.Duration) { return l.over.quantiles() }

// TryAcquire implements locker.Locker: on a lock with modes, an
// exclusive hold (a write, or every permit).
func (l *Locker) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	mode, k := l.exclusive()
	return l.acquire(ctx, key, ttl, false, mode, k)
}

// exclusive is the hold TryAcquire and Acquire ask for: none on a lock
// without modes, a write, or every permit.
func (l *Locker) exclusive() (string, int) {
	switch {
	case slices.Contains(l.hello.Modes, ModePermits):
		return ModePermits, l.hello.Capacity
	case len(l.hello.Modes) > 0:
		return ModeWrite, 0
	}
	return "", 0
}

func (l *Locker) acquire(ctx context.Context, key string, ttl time.Duration, wait bool, mode string, permits int) (locker.Lease, error) {
	if key == "" || ttl < 0 {
		return nil, fmt.Errorf("acquire: key %q, ttl %v: %w", key, ttl, locker.ErrInvalid)
	}
	at := l.deps.Clock()
	r, err := l.call(ctx, Request{Op: OpAcquire, Key: key, TTLMillis: millis(ttl), Wait: wait, Mode: mode, Permits: permits})
	if err != nil {
		return nil, err
	}
	if err := resultErr(r, locker.ErrNotAcquired); err != nil {
		return nil, err
	}
	ls, err := l.grant(r, key, ttl, at)
	if err == nil && mode == ModePermits {
		// Permits are never reentrant: the harness sends no reenter.
		if c, ok := ls.(*claimLease); ok {
			return permitClaimLease{permitLease{c}, c}, nil
		}
		return permitLease{ls}, nil
	}
	return ls, err
}

// moded is a Locker whose process's holds have modes (version 2).
type moded struct{ *Locker }

// Modes implements locker.Moded.
func (m *moded) Modes() []locker.Mode {
	out := make([]locker.Mode, len(m.hello.Modes))
	for i, s := range m.hello.Modes {
		out[i] = locker.Mode(s)
	}
	return out
}

// Capacity implements locker.Moded.
func (m *moded) Capacity() int { return m.hello.Capacity }

// AcquireMode implements locker.Moded: an acquire with mode (and permits,
// for ModePermits); wait only when the process has a blocking acquire.
func (m *moded) AcquireMode(ctx context.Context, key string, ttl time.Duration, mode locker.Mode, permits int, wait bool, _ func()) (locker.Lease, error) {
	if !slices.Contains(m.hello.Modes, string(mode)) {
		return nil, fmt.Errorf("acquire %q: mode %q is not among the lock's %q: %w", key, mode, m.hello.Modes, locker.ErrInvalid)
	}
	k := 0
	if mode == locker.ModePermits {
		if permits < 1 || permits > m.hello.Capacity {
			return nil, fmt.Errorf("acquire %q: %d permits of %d: %w", key, permits, m.hello.Capacity, locker.ErrInvalid)
		}
		k = permits
	}
	return m.acquire(ctx, key, ttl, wait && slices.Contains(m.hello.Ops, OpWait), string(mode), k)
}

// modedWaiter is a moded Locker with a blocking acquire.
type modedWaiter struct{ moded }

// Acquire implements locker.Waiter: an exclusive hold.
func (w *modedWaiter) Acquire(ctx context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	mode, k := w.exclusive()
	return w.acquire(ctx, key, ttl, true, mode, k)
}

// permitLease is a semaphore's hold: a lease without Reenter.
type permitLease struct{ locker.Lease }

// permitClaimLease is a semaphore's hold of a lock that claims validity.
type permitClaimLease struct {
	permitLease
	c *claimLease
}

// ValidUntil implements locker.Claimer.
func (p permitClaimLease) ValidUntil() time.Time { return p.c.ValidUntil() }

// grant makes the lease an ok acquire or reenter reply describes.
func (l *Locker) grant(r Reply, key string, ttl time.Duration, at time.Time) (locker.Lease, error) {
	if bad := checkGrant(r, l.hello.Fenced); bad != "" {
		return nil, l.bad(r, bad)
	}
	ls := &lease{l: l, id: r.Lease, key: key, ttl: ttl, lost: make(chan struct{})}
	if r.Fence != nil {
		ls.fence, ls.fenced = *r.Fence, true
	}
	if l.hello.Claims {
		ls.setValid(r, at)
	}
	l.mu.Lock()
	if _, dup := l.leases[r.Lease]; dup {
		l.mu.Unlock()
		return nil, l.bad(r, fmt.Sprintf("lease id %d granted twice", r.Lease))
	}
	l.leases[r.Lease] = ls
	l.mu.Unlock()
	if l.hello.Claims {
		return &claimLease{ls}, nil
	}
	return ls, nil
}

// checkGrant says what is wrong with an ok acquire or reenter reply of a
// lock whose hello said fenced: "" for nothing.
func checkGrant(r Reply, fenced bool) string {
	if r.Lease == 0 {
		return "an ok acquire without a lease id"
	}
	if fenced != (r.Fence != nil) {
		return fmt.Sprintf("fence given %v, but hello said fenced %v", r.Fence != nil, fenced)
	}
	return ""
}

// bad breaks the protocol on a reply that parses but says something
// impossible; the call it answers is unknown.
func (l *Locker) bad(r Reply, reason string) error {
	b, _ := json.Marshal(r)
	err := &ErrProtocol{Client: l.client, Text: string(b), Reason: reason}
	l.breakWith(err)
	return fmt.Errorf("%w: %w", locker.ErrUnknownOutcome, err)
}

// Close implements locker.Locker: it asks the process to close (it must
// not release its leases, which expire), closes its stdin, and waits for
// it to exit, killing it after Config.CloseTimeout. A second Close
// returns nil.
func (l *Locker) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	to := l.cfg.CloseTimeout
	if to <= 0 {
		to = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), to)
	defer cancel()
	var errs []error
	if r, err := l.call(ctx, Request{Op: OpClose}); err == nil && r.Result != ResultOK {
		errs = append(errs, fmt.Errorf("close: %s %s", r.Result, r.Error))
	}
	l.wmu.Lock()
	_ = l.stdin.Close()
	l.wmu.Unlock()
	select {
	case <-l.exited:
	case <-ctx.Done():
		_ = l.kill()
	}
	errs = append(errs, l.fwd.Close())
	if n, p50, p99, mx := l.Overhead(); n > 0 {
		l.deps.Logger.Info("lineproto: protocol overhead", "client", l.client, "calls", n, "p50", p50, "p99", p99, "max", mx)
	}
	return errors.Join(errs...)
}

// kill ends the process for good and waits for it.
func (l *Locker) kill() error {
	if l.cmd.Process != nil {
		_ = proc.KillGroup(l.cmd.Process.Pid)
	}
	<-l.exited
	_ = l.fwd.Close()
	return nil
}

// stderrTailUnsaid is stderrTail unless err says it already (a call
// that saw the process die): the process's stderr is said once.
func (l *Locker) stderrTailUnsaid(err error) string {
	if tail := l.stderrTail(); tail != "" && !strings.Contains(err.Error(), tail) {
		return tail
	}
	return ""
}

func (l *Locker) stderrTail() string {
	if s := l.stderr.String(); s != "" {
		return "; its stderr ends: " + s
	}
	return ""
}

// waiter is a Locker whose process has a blocking acquire.
type waiter struct{ *Locker }

// Acquire implements locker.Waiter: the process waits, in whatever way its
// lock waits, within the context's deadline (timeout_ms).
func (w *waiter) Acquire(ctx context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	return w.acquire(ctx, key, ttl, true, "", 0)
}

// lease is one hold the process granted.
type lease struct {
	l      *Locker
	id     uint64
	key    string
	ttl    time.Duration
	fence  uint64
	fenced bool

	mu       sync.Mutex
	valid    time.Time
	lost     chan struct{}
	lostOnce sync.Once
}

func (s *lease) Key() string           { return s.key }
func (s *lease) TTL() time.Duration    { return s.ttl }
func (s *lease) Fence() (uint64, bool) { return s.fence, s.fenced }
func (s *lease) markLost()             { s.lostOnce.Do(func() { close(s.lost) }) }
func (s *lease) forget()               { s.l.mu.Lock(); delete(s.l.leases, s.id); s.l.mu.Unlock() }
func (s *lease) Lost() <-chan struct{} {
	if !s.l.hello.Notices {
		return nil
	}
	return s.lost
}

// setValid takes the validity a reply claims. The process counted it from
// the reply's writing, which came at least took_us after the request was
// sent (at, on the Locker's clock): at + took_us + valid_ms is never later
// than the process's own deadline, so the protocol's latency never
// stretches the claim, and a long blocking wait (took_us) does not
// shrink it to nothing.
func (s *lease) setValid(r Reply, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.ValidMillis == nil {
		return
	}
	s.valid = at.Add(time.Duration(r.TookMicros)*time.Microsecond + time.Duration(*r.ValidMillis)*time.Millisecond)
}

// Release implements locker.Lease.
//
// The lease claims nothing from the first try on, whatever its outcome: a
// release whose reply is lost may have freed the key for another client.
func (s *lease) Release(ctx context.Context) error {
	s.mu.Lock()
	s.valid = time.Time{}
	s.mu.Unlock()
	r, err := s.l.call(ctx, Request{Op: OpRelease, Lease: s.id})
	if err != nil {
		return err
	}
	if r.Result == ResultOK {
		s.forget()
	}
	return resultErr(r, locker.ErrNotHeld)
}

// Renew implements locker.Lease.
func (s *lease) Renew(ctx context.Context, ttl time.Duration) error {
	if !slices.Contains(s.l.hello.Ops, OpRenew) {
		return locker.ErrUnsupported
	}
	at := s.l.deps.Clock()
	r, err := s.l.call(ctx, Request{Op: OpRenew, Lease: s.id, TTLMillis: millis(ttl)})
	if err != nil {
		return err
	}
	if r.Result == ResultOK && s.l.hello.Claims {
		s.setValid(r, at)
	}
	return resultErr(r, locker.ErrNotHeld)
}

// Reenter implements locker.Reentrant (ErrUnsupported when the lock has no
// reenter: nothing is sent).
func (s *lease) Reenter(ctx context.Context, ttl time.Duration) (locker.Lease, error) {
	if !slices.Contains(s.l.hello.Ops, OpReenter) {
		return nil, locker.ErrUnsupported
	}
	at := s.l.deps.Clock()
	r, err := s.l.call(ctx, Request{Op: OpReenter, Lease: s.id, TTLMillis: millis(ttl)})
	if err != nil {
		return nil, err
	}
	if err := resultErr(r, locker.ErrNotAcquired); err != nil {
		return nil, err
	}
	return s.l.grant(r, s.key, ttl, at)
}

// claimLease is a lease of a lock that claims validity (hello claims).
type claimLease struct{ *lease }

// ValidUntil implements locker.Claimer.
func (c *claimLease) ValidUntil() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.valid
}

// overhead keeps the protocol's latency samples.
type overhead struct {
	mu sync.Mutex
	d  []time.Duration
}

func (o *overhead) add(d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.d) < 1<<16 {
		o.d = append(o.d, max(d, 0))
	}
}

func (o *overhead) quantiles() (n int, p50, p99, mx time.Duration) {
	o.mu.Lock()
	d := slices.Clone(o.d)
	o.mu.Unlock()
	if len(d) == 0 {
		return 0, 0, 0, 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return len(d), d[len(d)/2], d[(len(d)*99)/100], d[len(d)-1]
}
