package zoo

import (
	"context"
	"sync"
)

// watchdogs is the set of a locker.Locker's running lease watchdogs, one goroutine
// per lease. Once stopAll has run (Close: the client "crashed") it starts no
// more. The zero value is an empty, open set.
type watchdogs struct {
	mu     sync.Mutex
	closed bool
	runs   map[*watchdogRun]struct{}
}

// watchdogRun is one lease's renewal goroutine.
type watchdogRun struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// stop cancels the run and waits until its goroutine has returned.
func (w *watchdogRun) stop() {
	w.cancel()
	<-w.done
}

// isClosed reports whether stopAll has run.
func (s *watchdogs) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// start runs loop in a goroutine of the set, with a context derived from
// parent that the run's stop cancels; the run leaves the set when loop
// returns. After stopAll (the locker.Locker was closed meanwhile: the lease is left
// to expire) it starts nothing and returns a run already stopped.
func (s *watchdogs) start(parent context.Context, loop func(ctx context.Context)) *watchdogRun {
	ctx, cancel := context.WithCancel(parent)
	run := &watchdogRun{cancel: cancel, done: make(chan struct{})}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		cancel()
		close(run.done)
		return run
	}
	if s.runs == nil {
		s.runs = make(map[*watchdogRun]struct{})
	}
	s.runs[run] = struct{}{}
	go func() {
		defer close(run.done)
		defer s.remove(run)
		defer cancel()
		loop(ctx)
	}()
	return run
}

func (s *watchdogs) remove(run *watchdogRun) {
	s.mu.Lock()
	delete(s.runs, run)
	s.mu.Unlock()
}

// stopAll closes the set, then stops every run and waits for them.
func (s *watchdogs) stopAll() {
	s.mu.Lock()
	s.closed = true
	runs := make([]*watchdogRun, 0, len(s.runs))
	for r := range s.runs {
		runs = append(runs, r)
	}
	clear(s.runs)
	s.mu.Unlock()
	for _, r := range runs {
		r.stop()
	}
}
