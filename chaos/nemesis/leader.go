package nemesis

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/lockproof/lockproof/chaos/env"
)

// LeaderMode says what Leader does to a consensus store's leader.
type LeaderMode int

// The leader faults.
const (
	// LeaderKill kills the leader's process (SIGKILL); Stop starts it
	// again on its data, and it rejoins as a follower.
	LeaderKill LeaderMode = iota
	// LeaderIsolate cuts every link of the leader with its peers
	// (env.StoreEnv Isolate: each store's own way), while its clients
	// still reach it: a leader in a minority. Stop heals the links.
	LeaderIsolate
	// LeaderPause freezes the leader's process (SIGSTOP) until Stop.
	LeaderPause
	// LeaderWipe kills the leader's process; Stop starts it again with
	// its data deleted (env.StoreEnv Wipe).
	LeaderWipe
)

// Leader strikes the leader of a consensus store's environment
// (env.StoreLeader) at Start, and heals at Stop. Its evidence is the new
// leader the others elected in the window: a fault after which the same
// member still led, and nobody else did meanwhile, did not bite.
type Leader struct {
	Env  env.Env
	Mode LeaderMode
	// Label names the fault in the history: its fault's name.
	Label string

	mu      sync.Mutex
	struck  env.Node
	heal    func(context.Context) error
	elected string // the leader the others elected, "" for none
	began   time.Time
	took    time.Duration
}

// Name implements Fault: "<label> <mode> <member>" once struck.
func (f *Leader) Name() string {
	return fmt.Sprintf("%s %s", f.Label, [...]string{"leader-kill", "leader-isolate", "leader-pause", "leader-wipe"}[f.Mode])
}

// leaderWait bounds the wait for a leader, before the strike and for a
// new one.
const leaderWait = 15 * time.Second

// Start finds the leader and strikes it.
func (f *Leader) Start(ctx context.Context) error {
	wctx, cancel := context.WithTimeout(ctx, leaderWait)
	n, err := env.StoreLeader(wctx, f.Env)
	cancel()
	if err != nil {
		return fmt.Errorf("%s: %w", f.Name(), err)
	}
	f.mu.Lock()
	f.struck, f.began = n, time.Now()
	f.mu.Unlock()
	switch f.Mode {
	case LeaderKill, LeaderWipe:
		return f.Env.Kill(ctx, n.ID)
	case LeaderPause:
		return f.Env.Pause(ctx, n.ID)
	}
	l, ok := f.Env.(env.Leaderer)
	if !ok {
		return fmt.Errorf("%s: the %s environment cannot cut a member off: %w", f.Name(), f.Env.Kind(), env.ErrUnsupported)
	}
	heal, err := l.Isolate(ctx, n.ID)
	f.mu.Lock()
	f.heal = heal
	f.mu.Unlock()
	return err
}

// Stop notes the leader the others elected meanwhile, then heals: the
// killed member starts again (wiped, for LeaderWipe), the paused one
// resumes, the cut one's links are restored.
func (f *Leader) Stop(ctx context.Context) error {
	f.mu.Lock()
	n := f.struck
	f.mu.Unlock()
	if n.ID == "" {
		return nil
	}
	// The others' leader, asked while the struck member is still out
	// (isolated or paused, it still calls itself leader: the others are
	// asked apart from it).
	wctx, cancel := context.WithTimeout(ctx, leaderWait)
	if o, err := env.StoreLeader(wctx, f.Env, n.ID); err == nil && o.ID != n.ID {
		f.mu.Lock()
		f.elected, f.took = o.ID, time.Since(f.began)
		f.mu.Unlock()
	}
	cancel()
	var err error
	switch f.Mode {
	case LeaderKill:
		err = f.Env.Restart(ctx, n.ID)
	case LeaderPause:
		err = f.Env.Resume(ctx, n.ID)
	case LeaderWipe:
		if l, ok := f.Env.(env.Leaderer); ok {
			err = l.Wipe(ctx, n.ID)
		} else {
			err = fmt.Errorf("%s: the %s environment cannot wipe a member: %w", f.Name(), f.Env.Kind(), env.ErrUnsupported)
		}
	default:
		f.mu.Lock()
		heal := f.heal
		f.heal = nil
		f.mu.Unlock()
		if heal != nil {
			if herr := heal(ctx); herr != nil {
				err = fmt.Errorf("%s: heal: %w", f.Name(), herr)
			}
		}
	}
	if err != nil {
		return err
	}
	// Healed means one leader again, whoever it is.
	wctx, cancel = context.WithTimeout(ctx, leaderWait)
	defer cancel()
	if _, err := env.StoreLeader(wctx, f.Env); err != nil {
		return fmt.Errorf("%s: after the heal: %w", f.Name(), err)
	}
	return nil
}

// Evidence implements Witness: the member struck and the leader the
// others elected; it bit when they elected one.
func (f *Leader) Evidence() Evidence {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.struck.ID == "" {
		return Evidence{Text: f.Name() + ": found no leader to strike"}
	}
	if f.elected == "" {
		return Evidence{Text: fmt.Sprintf("%s: struck the leader %s; the others elected no other leader in the window", f.Name(), f.struck.ID)}
	}
	return Evidence{Text: fmt.Sprintf("%s: struck the leader %s; the others had elected %s when the heal began, %v after the strike", f.Name(), f.struck.ID, f.elected, f.took.Round(time.Millisecond)), Bit: true}
}
