// Package gate stops one chaos client the way a stop-the-world pause or a
// crash would: every Redis command of the client, its watchdog's included,
// and every resource write pass its Gate.
//
// A Gate is installed on the client's go-redis clients as a redis.Hook
// (commands wait at the gate before they are sent and again after their reply
// arrives; dials wait before dialling) and called explicitly at the
// workload's fault points (Wait).
//
//   - Pause/Resume: a paused gate holds everything that reaches it until
//     Resume. Contexts are not consulted while held, as in a real pause: the
//     client's clocks and deadlines run on, and it notices only after waking.
//   - Crash: everything that reaches the gate fails with ErrCrashed, now and
//     forever. Held callers are released with ErrCrashed.
//   - PauseAfter(name): the gate pauses right after the reply of the next
//     command named name, holding its caller until Resume.
//   - CrashBefore(name): the client crashes right before it sends its next
//     command named name (nothing of it is sent).
//   - CrashAfter(name): the client crashes right after the reply of the next
//     command named name (e.g. "evalsha"): the command took effect in Redis,
//     the client never acts on it. This reaches states between two commands.
package gate

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// ErrCrashed is returned by everything that passes a crashed gate.
var ErrCrashed = errors.New("client crashed")

// Gate is the pause/crash switch of one client. The zero value is not
// usable; use New. A Gate is safe for concurrent use.
type Gate struct {
	mu         sync.Mutex
	paused     chan struct{} // non-nil while paused; closed by Resume
	crashed    chan struct{} // closed by Crash
	crashAfter string        // lower-case command name; "" for none
	pauseAfter string        // lower-case command name; "" for none
	afterReply bool          // the crash came from CrashAfter, right after a reply
	held       int           // callers held right now
	holds      int           // callers held in all, for a fault's evidence
	struck     chan struct{} // closed when the armed PauseAfter strikes

	crashBefore string // CrashBefore's lower-case command name; "" for none
	follower    Follower
}

// Follower is told when its gate pauses, resumes and crashes, whatever
// paused or crashed it (Pause, a PauseAfter that struck, Crash, a
// CrashAfter or CrashBefore): a client whose lock runs in a process of
// its own (package lineproto) freezes that process with SIGSTOP, thaws
// it and kills it along, so that every client fault reaches the lock's
// own runtime, its timers and threads included. It is called with the
// gate's lock held, in the order of the changes, and must not call back
// into the gate.
type Follower interface {
	Paused()
	Resumed()
	Crashed()
}

// Follow makes f follow the gate's changes from now on (nil: none).
func (g *Gate) Follow(f Follower) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.follower = f
}

// New returns an open gate.
func New() *Gate { return &Gate{crashed: make(chan struct{})} }

// Pause closes the gate: callers are held until Resume (or Crash).
func (g *Gate) Pause() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.paused == nil {
		g.paused = make(chan struct{})
		if g.follower != nil {
			g.follower.Paused()
		}
	}
}

// Resume opens a paused gate and releases everyone held.
func (g *Gate) Resume() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.paused != nil {
		close(g.paused)
		g.paused = nil
		if g.follower != nil {
			g.follower.Resumed()
		}
	}
}

// Crash makes the gate fail everything with ErrCrashed, for good.
func (g *Gate) Crash() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.crashed:
	default:
		close(g.crashed)
		if g.follower != nil {
			g.follower.Crashed()
		}
	}
}

// CrashAfter arms a crash right after the reply of the next command named
// name (case-insensitive). "" disarms it.
func (g *Gate) CrashAfter(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.crashAfter = strings.ToLower(name)
}

// PauseAfter arms a pause right after the reply of the next command named
// name (case-insensitive): the caller is held, its reply in hand, until
// Resume. It reaches a pause between two commands (e.g. between the GET and
// the DEL of a release). "" disarms it.
func (g *Gate) PauseAfter(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pauseAfter = strings.ToLower(name)
	if name != "" {
		g.struck = make(chan struct{})
	}
}

// Struck is closed when the pause PauseAfter armed last has struck (the
// client is held right after that reply); nil before any PauseAfter. A
// fault waits on it to count its window from the strike, not the arming.
func (g *Gate) Struck() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.struck
}

// CrashBefore arms a crash right before the next command named name
// (case-insensitive) is sent: the command never leaves the client, and the
// commands before it completed. It reaches states between two commands
// that CrashAfter cannot single out (e.g. after a SETNX that succeeded, before
// the EXPIRE that only follows a success). "" disarms it.
func (g *Gate) CrashBefore(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.crashBefore = strings.ToLower(name)
}

// before is called before cmds are sent: it crashes the gate when a
// CrashBefore name matches (nothing is in flight then, as after a reply).
func (g *Gate) before(names ...string) error {
	g.mu.Lock()
	if g.crashBefore != "" {
		for _, n := range names {
			if strings.EqualFold(n, g.crashBefore) {
				g.crashBefore = ""
				g.afterReply = !g.Crashed()
				g.mu.Unlock()
				g.Crash()
				return fmt.Errorf("before %s: %w", n, ErrCrashed)
			}
		}
	}
	g.mu.Unlock()
	return nil
}

// Crashed reports whether the gate has crashed.
func (g *Gate) Crashed() bool {
	select {
	case <-g.crashed:
		return true
	default:
		return false
	}
}

// CrashedAfterReply reports whether the gate crashed through CrashAfter:
// right after a reply arrived, so the command in flight surely took effect
// before the crash; or through CrashBefore: before a command was sent, so
// nothing was in flight.
func (g *Gate) CrashedAfterReply() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.afterReply
}

// CrashedCh is closed when the gate crashes.
func (g *Gate) CrashedCh() <-chan struct{} { return g.crashed }

// Armed reports whether a pause or crash is armed at a command
// (PauseAfter, CrashAfter, CrashBefore) and has not struck yet.
func (g *Gate) Armed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pauseAfter != "" || g.crashAfter != "" || g.crashBefore != ""
}

// Holds returns how many callers the gate has held in all (each caller
// that found it paused counts once): a pause's evidence that it bit.
func (g *Gate) Holds() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.holds
}

// Held returns how many callers the gate holds right now.
func (g *Gate) Held() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held
}

// Wait passes the gate: it returns nil at once when the gate is open, holds
// the caller while it is paused, and returns ErrCrashed once it has crashed.
// While paused it does not look at ctx (a paused process cannot); ctx is
// checked only before holding, so that callers that are already done do not
// wait.
func (g *Gate) Wait(ctx context.Context) error {
	g.mu.Lock()
	p := g.paused
	if g.Crashed() {
		g.mu.Unlock()
		return ErrCrashed
	}
	if p == nil {
		g.mu.Unlock()
		return nil
	}
	g.held++
	g.holds++
	g.mu.Unlock()
	select {
	case <-p:
	case <-g.crashed:
	}
	g.mu.Lock()
	g.held--
	g.mu.Unlock()
	if g.Crashed() {
		return ErrCrashed
	}
	return nil
}

// after is called once a reply arrived for cmds: it crashes the gate when a
// CrashAfter name matches, then passes the gate.
func (g *Gate) after(ctx context.Context, names ...string) error {
	g.mu.Lock()
	if g.pauseAfter != "" {
		for _, n := range names {
			if strings.EqualFold(n, g.pauseAfter) {
				g.pauseAfter = ""
				if g.paused == nil {
					g.paused = make(chan struct{})
					if g.follower != nil {
						g.follower.Paused()
					}
				}
				if g.struck != nil {
					close(g.struck)
				}
				break
			}
		}
	}
	if g.crashAfter != "" {
		for _, n := range names {
			if strings.EqualFold(n, g.crashAfter) {
				g.crashAfter = ""
				g.afterReply = !g.Crashed()
				g.mu.Unlock()
				g.Crash()
				return fmt.Errorf("after %s: %w", n, ErrCrashed)
			}
		}
	}
	g.mu.Unlock()
	return g.Wait(ctx)
}

// Pass is called by the client's own code at a named point of it that
// sends no command (the workload's lease check before a write, "check"):
// a PauseAfter or CrashAfter of that name strikes there, as after a
// command's reply; then it waits at the gate like Wait.
func (g *Gate) Pass(ctx context.Context, point string) error { return g.after(ctx, point) }

// Hook returns the go-redis hook that makes every dial and command of a
// client pass the gate (client.AddHook(g.Hook())).
func (g *Gate) Hook() redis.Hook { return hook{g} }

type hook struct{ g *Gate }

func (h hook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if err := h.g.Wait(ctx); err != nil {
			return nil, fmt.Errorf("dial %s: %w", addr, err)
		}
		return next(ctx, network, addr)
	}
}

func (h hook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if err := h.g.Wait(ctx); err != nil {
			cmd.SetErr(err)
			return err
		}
		if err := h.g.before(cmd.Name()); err != nil {
			cmd.SetErr(err)
			return err
		}
		err := next(ctx, cmd)
		if gerr := h.g.after(ctx, cmd.Name()); gerr != nil {
			cmd.SetErr(gerr)
			return gerr
		}
		return err
	}
}

func (h hook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if err := h.g.Wait(ctx); err != nil {
			for _, c := range cmds {
				c.SetErr(err)
			}
			return err
		}
		names := make([]string, len(cmds))
		for i, c := range cmds {
			names[i] = c.Name()
		}
		if err := h.g.before(names...); err != nil {
			for _, c := range cmds {
				c.SetErr(err)
			}
			return err
		}
		err := next(ctx, cmds)
		if gerr := h.g.after(ctx, names...); gerr != nil {
			for _, c := range cmds {
				c.SetErr(gerr)
			}
			return gerr
		}
		return err
	}
}
