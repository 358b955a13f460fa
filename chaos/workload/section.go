package workload

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/fencing"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/locker"
)

// A critical section is a table of steps (sectionSteps), run in order on
// one section's state: each step draws its own choices from the client's
// streams, in the shares of the Mix it declares (step.draws), does what it
// does and may end the section. A new client behaviour is one step in the
// table and one share of the Mix.
//
// The steps draw in the table's order, and a step draws only what it drew
// when the section was one function: a seed replays the history it
// recorded before (the simulation's saved findings hold that to their
// digests). TestStepsDrawWhatTheyDeclare holds each step to its declared
// shares and states the order in which a section draws from the streams.

// step is one step of a critical section: its name (what the package doc
// and a reader of the table call it) and what it does. done ends the
// section after it, with err (nil for a section that ended as it should).
type step struct {
	name string
	// draws are the Mix shares the step chooses by (their names in
	// Mix.String), in the order it reads them: drawn from the client's
	// main stream (section.chance) or its side stream (sideChance,
	// beside: the comments say which), or, for Retry, read and not drawn
	// (section.uses, retriesInstead). A step reads no other share.
	draws []string
	run   func(w *Workload, s *section) (done bool, err error)
}

// sectionSteps are a critical section's steps, in order, each with the
// Mix shares it draws.
func sectionSteps() []step {
	return []step{
		{"as-owner", []string{"owner"}, (*Workload).stepOwner},
		{"inspect-before", []string{"inspect"}, (*Workload).stepInspectBefore},
		{"wait-in-line", []string{"blocking", "retry", "cancel"}, (*Workload).stepWait},
		{"wait-twice", []string{"twice"}, (*Workload).stepTwice},
		{"acquire", []string{"context"}, (*Workload).stepAcquire},
		{"inspect-holding", nil, (*Workload).stepInspectHolding},
		{"ask-ttl", []string{"ttl"}, (*Workload).stepAskTTL}, // side stream
		{"leave", []string{"leave"}, (*Workload).stepLeave},
		{"close-waiting", []string{"close-waiting"}, (*Workload).stepCloseWaiting}, // side stream
		{"renew", []string{"renew"}, (*Workload).stepRenew},
		{"reenter", []string{"reenter", "rush-release", "concurrent", "long-work"}, (*Workload).stepReenter}, // concurrent: side stream
		{"read", nil, (*Workload).stepRead},
		{"check-write", nil, (*Workload).stepWrite},
		{"release", []string{"rush-release", "concurrent"}, (*Workload).stepRelease}, // concurrent: side stream
	}
}

// section is one critical section's state, as its steps build it.
type section struct {
	ctx context.Context
	rec *history.Recorder
	c   *Client
	seq int
	cfg Config
	mix *Mix
	// The acquire the section makes: its op, how, and its deadline.
	acqOp    history.Op
	acquire  func(ctx context.Context) (locker.Lease, error)
	timeout  time.Duration
	owned    locker.Owned     // as the client's own owner; nil: not
	insp     locker.Inspector // asked who holds; nil: not
	askTTL   bool             // asks the server how long its leases are valid (Mix.TTL)
	twice    bool             // a second wait runs beside (Mix.Twice)
	inLineAt *atomic.Int64    // when the lock said the waiter is in line (locker.InLine); 0: it did not
	blocking bool
	// mode and permits: a Moded lock's hold (stepOwner draws them).
	mode    locker.Mode
	permits int
	// What it holds once acquired.
	lease    locker.Lease
	acqStart time.Time
	h        held
	token    uint64
	fenced   bool
	resource fencing.Resource
	// What it read: the value, and whether the read succeeded.
	read   fencing.Value
	readOK bool
	// gone: the check before the write found the lease gone.
	gone bool
	// cleanups run when the section ends, last first (as defers do),
	// and may set its error.
	cleanups []func(err *error)
	// reads, when set, is told of every share of mix a step reads
	// (uses): a test holds the steps to their declared draws with it.
	reads func(share *float64)
}

// section is one critical section (see the package doc): its steps
// (sectionSteps), in order, until one ends it.
func (w *Workload) section(ctx context.Context, rec *history.Recorder, c *Client, seq int) error {
	return w.runSteps(w.newSection(ctx, rec, c, seq), sectionSteps())
}

// newSection is the state of c's section numbered seq, before its steps.
func (w *Workload) newSection(ctx context.Context, rec *history.Recorder, c *Client, seq int) *section {
	return &section{ctx: ctx, rec: rec, c: c, seq: seq, cfg: w.cfg, mix: w.cfg.Mix, inLineAt: new(atomic.Int64)}
}

// runSteps runs steps on s, in order, until one ends the section, then
// its cleanups.
func (w *Workload) runSteps(s *section, steps []step) (err error) {
	defer func() {
		for i := len(s.cleanups) - 1; i >= 0; i-- {
			s.cleanups[i](&err)
		}
	}()
	for _, st := range steps {
		done, err := st.run(w, s)
		if done || err != nil {
			return err
		}
	}
	return nil
}

// uses is the share of s.mix at p (a field of it), read by the step
// running: every read of the Mix by a step goes through it, so that a
// test sees which shares each step reads (step.draws).
func (s *section) uses(p *float64) float64 {
	if s.reads != nil {
		s.reads(p)
	}
	return *p
}

// chance draws a choice of the share at p (a field of s.mix) from the
// client's main stream.
func (s *section) chance(p *float64) bool { return s.c.chance(s.uses(p)) }

// sideChance draws a choice of the share at p (a field of s.mix) from the
// client's side stream, for the choices added after seeds were saved.
func (s *section) sideChance(p *float64) bool {
	share := s.uses(p)
	return share > 0 && s.c.side.Float64() < share
}

// beside draws the second call made beside a release (Mix.Concurrent,
// from the side stream: Client.beside).
func (s *section) beside() int {
	s.uses(&s.mix.Concurrent)
	return s.c.beside(s.mix)
}

// watched draws whether the holder of the section's lease watches its
// Context (Mix.Context), and returns it then: only a lease that has one
// draws.
func (s *section) watched() context.Context {
	if x, ok := s.lease.(locker.Contexter); ok && s.chance(&s.mix.Context) {
		return x.Context()
	}
	return nil
}

// stepOwner: acquire as the client's own owner (locker.Owned). Only a
// lock that has owners draws this choice, so other locks' seeds replay as
// before.
func (w *Workload) stepOwner(s *section) (bool, error) {
	c, cfg := s.c, s.cfg
	// Acquire: one attempt, or wait in line (and maybe be canceled there).
	s.acqOp = history.Op{Client: c.Name, Kind: history.Acquire, Key: c.Key, TTLMillis: cfg.TTL.Milliseconds(), Hold: c.nextHold()}
	s.acquire, s.timeout = func(ctx context.Context) (locker.Lease, error) { return c.locker.TryAcquire(ctx, c.Key, cfg.TTL) }, cfg.OpTimeout
	s.owned, _ = c.locker.(locker.Owned)
	if s.owned != nil && !s.chance(&s.mix.Owner) {
		s.owned = nil
	}
	if owned := s.owned; owned != nil {
		s.acquire = func(ctx context.Context) (locker.Lease, error) {
			return owned.AcquireAs(ctx, c.Key, cfg.TTL, c.owner(), false, nil)
		}
	}
	if md, ok := c.locker.(locker.Moded); ok {
		// A lock with modes: draw the hold's (only such a lock draws, so
		// other locks' seeds replay as before).
		s.mode, s.permits = c.drawMode(md)
		s.acqOp.Mode = history.Mode(s.mode)
		if s.mode == locker.ModePermits {
			s.acqOp.Permits, s.acqOp.Capacity = int64(s.permits), int64(md.Capacity())
		}
		s.acquire = func(ctx context.Context) (locker.Lease, error) {
			return md.AcquireMode(ctx, c.Key, cfg.TTL, s.mode, s.permits, false, nil)
		}
	}
	return false, nil
}

// drawMode draws a Moded lock's hold: a read or a write, as likely, on a
// read-write lock (with three reads in four, readers held the lock
// without a break and a writer that does not wait in line never got in:
// a writer's flaw never showed); on a semaphore, 1 or (of 2 or more) 2
// permits.
func (c *Client) drawMode(md locker.Moded) (locker.Mode, int) {
	if slices.Contains(md.Modes(), locker.ModePermits) {
		return locker.ModePermits, 1 + c.rng.IntN(min(2, max(md.Capacity(), 1)))
	}
	if c.rng.IntN(2) == 0 {
		return locker.ModeWrite, 1
	}
	return locker.ModeRead, 1
}

// stepInspectBefore: ask the lock who holds the key, before the acquire
// (and, drawn here, while holding: stepInspectHolding). Only a lock that
// can say draws this choice, so other locks' seeds replay as before.
func (w *Workload) stepInspectBefore(s *section) (bool, error) {
	c := s.c
	s.insp, _ = c.locker.(locker.Inspector)
	if s.insp != nil && !s.chance(&s.mix.Inspect) {
		s.insp = nil
	}
	if s.insp == nil {
		return false, nil
	}
	// Before the acquire, the client's owner holds nothing a live hold
	// could count for (a lock that counts another owner's holds for it
	// shows here).
	owner := ""
	if _, ok := c.locker.(locker.Owned); ok {
		owner = c.owner()
	}
	return false, c.inspect(s.ctx, s.rec, s.insp, owner, s.cfg.OpTimeout)
}

// stepWait: wait in line (locker.Waiter) instead of one attempt, and maybe
// be canceled there; or, one blocking acquire in four, retry one-shot
// attempts (locker.Retrier).
func (w *Workload) stepWait(s *section) (bool, error) {
	c, cfg, rec, owned := s.c, s.cfg, s.rec, s.owned
	waiter, canWait := c.locker.(locker.Waiter)
	s.blocking = canWait && s.chance(&s.mix.Blocking)
	if retrier, ok := c.locker.(locker.Retrier); ok && s.blocking && owned == nil && retriesInstead(s.seq, s.uses(&s.mix.Retry)) {
		// A share of the blocking acquires (Mix.Retry: one in four by
		// default), chosen by the section's number (retriesInstead),
		// retries one-shot attempts (locker.Retrier) instead of waiting
		// in line: recorded as a one-shot acquire, promised no wait
		// bound. It gives up after half a TTL: waiters in line go first,
		// so a retrier may starve, and a long op would overlap more
		// events than trace validation lets one stay pending
		// (tla/trace.MaxAhead).
		s.blocking = false
		s.timeout = max(cfg.TTL/2, time.Millisecond)
		s.acquire = func(ctx context.Context) (locker.Lease, error) { return retrier.AcquireRetry(ctx, c.Key, cfg.TTL) }
	}
	if !s.blocking {
		return false, nil
	}
	s.acqOp.Wait = true
	inLineAt := s.inLineAt
	s.acquire = func(ctx context.Context) (locker.Lease, error) {
		// In line when the lock says so (locker.InLine), or else once
		// the first attempt is surely over (see FirstQueued).
		var marked atomic.Bool
		mark := func() {
			if marked.Swap(true) {
				return
			}
			c.waiting.Store(true)
			if c.onQueued != nil {
				c.onQueued(c.invoked.Load(), true)
			}
		}
		t := time.AfterFunc(queuedAfter, mark)
		defer func() {
			t.Stop()
			if marked.Swap(true) && c.onQueued != nil {
				c.onQueued(nil, false)
			}
			c.waiting.Store(false)
		}()
		inLine := func() {
			inLineAt.Store(max(rec.Now(), 1))
			mark()
		}
		if md, ok := c.locker.(locker.Moded); ok {
			return md.AcquireMode(ctx, c.Key, cfg.TTL, s.mode, s.permits, true, inLine)
		}
		if owned != nil {
			if _, ok := c.locker.(locker.InLine); !ok {
				inLine = nil // a lock that cannot say when it is in line
			}
			return owned.AcquireAs(ctx, c.Key, cfg.TTL, c.owner(), true, inLine)
		}
		if il, ok := c.locker.(locker.InLine); ok {
			return il.AcquireInLine(ctx, c.Key, cfg.TTL, inLine)
		}
		return waiter.Acquire(ctx, c.Key, cfg.TTL)
	}
	// A waiter waits long enough for the lock's promise to waiters to be
	// checked (locker.Entry.WaitBound), or is canceled in line.
	s.timeout = max(cfg.OpTimeout, cfg.WaitTimeout)
	if s.chance(&s.mix.Cancel) {
		s.timeout = max(cfg.TTL/2, time.Millisecond)
	}
	return false, nil
}

// stepTwice: an owner waiting in line waits a second time beside,
// joined at the end of the section, whatever it does: the second wait,
// which releases on its own, may be served only once the first hold is
// released.
func (w *Workload) stepTwice(s *section) (bool, error) {
	c, cfg := s.c, s.cfg
	if s.owned == nil || !s.blocking || !s.chance(&s.mix.Twice) {
		return false, nil
	}
	join := c.waitTwice(s.ctx, s.rec, s.owned, cfg.TTL, cfg.OpTimeout, s.timeout)
	// Not asked while the second wait runs beside: two goroutines of one
	// client sending at one virtual instant take the simulated network's
	// draws in an order Go does not fix, and the seed would replay less
	// often.
	s.insp, s.twice = nil, true
	s.cleanups = append(s.cleanups, func(err *error) {
		if jerr := join(); jerr != nil && *err == nil {
			*err = jerr
		}
	})
	return false, nil
}

// stepAcquire makes the acquire the steps before planned; a section that
// did not get the lock ends here.
func (w *Workload) stepAcquire(s *section) (bool, error) {
	c, rec := s.c, s.rec
	s.acqStart = c.Clock.Now()
	res, err := c.recording(rec).lockEdit(s.ctx, s.acqOp, ctxNormal, s.timeout, func(ctx context.Context) error {
		var err error
		s.lease, err = s.acquire(ctx)
		return err
	}, c.learnt(rec, s.inLineAt, &s.lease))
	if err != nil || res != history.OK {
		return true, err
	}
	s.h = held{lease: s.lease, id: s.acqOp.Hold, believed: c.reckon(s.lease, s.acqStart), watched: s.watched(),
		mode: s.acqOp.Mode, permits: s.acqOp.Permits}
	s.h.released = c.watchLoss(s.ctx, rec, s.h)
	return false, nil
}

// stepInspectHolding asks the lock who holds the key while holding (drawn
// in stepInspectBefore).
func (w *Workload) stepInspectHolding(s *section) (bool, error) {
	if s.insp == nil {
		return false, nil
	}
	owner := ""
	if s.owned != nil {
		owner = s.c.owner()
	}
	return false, s.c.inspect(s.ctx, s.rec, s.insp, owner, s.cfg.OpTimeout)
}

// stepAskTTL draws whether the section asks the lock's server how long its
// leases are still valid (Mix.TTL; only a lease that can ask draws, from
// the side stream: the seed's main draws stay as they were), and asks for
// the lease it holds. Not while a second wait runs beside (Mix.Twice), as
// stepTwice does not inspect then: the seed would replay less often.
func (w *Workload) stepAskTTL(s *section) (bool, error) {
	c := s.c
	if _, ok := s.lease.(locker.ServerClaimer); !ok || s.twice || !s.sideChance(&s.mix.TTL) {
		return false, nil
	}
	s.askTTL = true
	return false, c.askTTL(s.ctx, s.rec, s.h, s.cfg.OpTimeout)
}

// stepLeave: gone while holding; the lock must let the lease expire (a
// watchdog that outlived Close would keep the others out). Otherwise the
// holder learns its fence and resource.
func (w *Workload) stepLeave(s *section) (bool, error) {
	c := s.c
	if s.chance(&s.mix.Leave) {
		close(c.gone) // nobody is left to hear a loss notice
		if err := w.leave(s.ctx, s.rec, c); err != nil {
			return true, err
		}
		return true, errStop
	}
	s.token, s.fenced = s.lease.Fence()
	s.resource = c.unfenced
	if s.fenced {
		s.resource = c.fenced
	}
	s.cleanups = append(s.cleanups, func(*error) { c.setHolding(false) })
	return false, nil
}

// stepRenew renews explicitly: by the lease's TTL, or in every third
// section for twice it (package lock's RenewFor: the lease's TTL from then
// on, watchdog included). A lock that renews only by its own TTL says so
// (ErrUnsupported, or ErrInvalid for that ttl): the renewal is then
// withdrawn from the history.
func (w *Workload) stepRenew(s *section) (bool, error) {
	c, cfg, rec, lease := s.c, s.cfg, s.rec, s.lease
	if !s.chance(&s.mix.Renew) {
		return false, nil
	}
	rttl := cfg.TTL
	if renewsForTwice(s.seq) {
		rttl = 2 * cfg.TTL
	}
	op := s.h.stamp(history.Op{Client: c.Name, Kind: history.Renew, Key: c.Key, TTLMillis: rttl.Milliseconds(), Token: s.token, HasToken: s.fenced, Hold: s.h.id})
	start := c.Clock.Now()
	res, err := c.recording(rec).lock(s.ctx, op, ctxNormal, cfg.OpTimeout, func(ctx context.Context) error {
		err := lease.Renew(ctx, rttl)
		if rttl != cfg.TTL && errors.Is(err, locker.ErrInvalid) {
			return fmt.Errorf("%w: %w", locker.ErrUnsupported, err)
		}
		return err
	}, func(o *history.Op) { c.claim(rec, o, lease) })
	if err != nil {
		return true, err
	}
	if b := c.reckon(lease, start); res == history.OK && b.After(s.h.believed) {
		s.h.believed = b
	}
	return false, nil
}

// stepReenter takes a nested hold by the same owner, with a shorter or a
// longer TTL, and releases it (maybe rushed); or works long.
func (w *Workload) stepReenter(s *section) (bool, error) {
	c, cfg, rec, ctx := s.c, s.cfg, s.rec, s.ctx
	if r, ok := s.lease.(locker.Reentrant); ok && s.chance(&s.mix.Reenter) {
		ttl := max(cfg.TTL/5, 10*time.Millisecond)
		if c.rng.IntN(3) == 0 {
			ttl = 2 * cfg.TTL
		}
		var inner locker.Lease
		op := s.h.stamp(history.Op{Client: c.Name, Kind: history.Acquire, Key: c.Key, TTLMillis: ttl.Milliseconds(), Hold: c.nextHold()})
		if op.Mode == history.ModePermits {
			op.Capacity = s.acqOp.Capacity
		}
		res, err := c.recording(rec).lock(ctx, op, ctxNormal, cfg.OpTimeout, func(ctx context.Context) error {
			var err error
			inner, err = r.Reenter(ctx, ttl)
			return err
		}, func(o *history.Op) {
			o.Token, o.HasToken = inner.Fence()
			c.claim(rec, o, inner)
		})
		if err != nil {
			return true, err
		}
		if res == history.OK {
			in := held{lease: inner, id: op.Hold, mode: op.Mode, permits: op.Permits}
			in.released = c.watchLoss(ctx, rec, in)
			if s.askTTL {
				if err := c.askTTL(ctx, rec, in, cfg.OpTimeout); err != nil {
					return true, err
				}
			}
			_ = sleepRand(ctx, c.rng, cfg.Hold)
			// A nested release may be rushed too: its reply lost, the
			// lock's undo of the nested hold races the request still on
			// its way, and the outer hold works on, which a late release
			// ending the outer hold breaks.
			rushIn := s.chance(&s.mix.RushRelease) && !c.Gate.Armed()
			relRes, err := c.releaseBeside(ctx, rec, in, rushIn, s.beside(), cfg.OpTimeout)
			if err != nil {
				return true, err
			}
			if s.askTTL && relRes == history.OK {
				// Released, the nested lease is not held, though its
				// outer one is: a lock whose nested holds share the
				// outer's record says otherwise.
				if err := c.askTTL(ctx, rec, in, cfg.OpTimeout); err != nil {
					return true, err
				}
				if err := c.askTTL(ctx, rec, s.h, cfg.OpTimeout); err != nil {
					return true, err
				}
			}
			// The outer hold outlives the nested one, as it does in code
			// that calls a locked helper and then goes on: a nested hold
			// that shortened the lease shows now.
			_ = sleepRand(ctx, c.rng, cfg.TTL/2)
		}
	} else if s.chance(&s.mix.LongWork) {
		_ = sleepRand(ctx, c.rng, cfg.TTL/2)
	}
	return false, nil
}

// stepRead reads the resource under the lease.
func (w *Workload) stepRead(s *section) (bool, error) {
	c, cfg, rec := s.c, s.cfg, s.rec
	if s.mode == locker.ModePermits {
		// Permits exclude nothing: the resource is not theirs to use.
		return false, nil
	}
	if err := c.Gate.Wait(s.ctx); err != nil {
		return true, errStop
	}
	readOp := history.Op{Client: c.Name, Kind: history.Read, Key: c.Key, Token: s.token, HasToken: s.fenced, Hold: s.h.id}
	res, err := c.recording(rec).resource(s.ctx, readOp, cfg.OpTimeout, func(ctx context.Context) (err error) {
		if fr, ok := s.resource.(FencedReader); ok && s.fenced {
			s.read, err = fr.ReadFenced(ctx, c.Key, s.token, c.Name)
		} else {
			s.read, err = s.resource.Read(ctx, c.Key)
		}
		return err
	}, func(o *history.Op) { o.Value = s.read.Value })
	if err != nil {
		return true, err
	}
	s.readOK = res == history.OK
	return false, nil
}

// stepWrite works on what was read, then checks the lease as users
// without fencing do, leaving room for the write to come (gap, a
// twentieth to a tenth of the TTL: long enough for a fault that waits for
// the holder to strike in it), and writes while the lease is valid.
func (w *Workload) stepWrite(s *section) (bool, error) {
	c, cfg, rec, ctx := s.c, s.cfg, s.rec, s.ctx
	if !s.readOK && s.mode != locker.ModePermits {
		return false, nil
	}
	c.working.Store(true)
	_ = sleepRand(ctx, c.rng, cfg.Hold)
	c.working.Store(false)
	gap := cfg.TTL/20 + time.Duration(c.rng.Int64N(int64(cfg.TTL/20)+1))
	valid, claimed := c.check(s.h, gap)
	s.gone = !valid
	if valid {
		// Holding, with the write ahead and the check behind: a fault
		// that waits for the client to hold strikes here, between the
		// check and the act (the GC pause of the literature: a frozen
		// process cannot see time pass).
		c.setHolding(true)
		_ = sleepFor(ctx, gap) // preparing the write
	}
	// The fault point: a paused client stops here, after its check.
	if err := c.Gate.Pass(ctx, contract.LeaseCheckPoint); err != nil {
		return true, errStop
	}
	// A pause that strikes from now on holds the write's command at the gate.
	c.setHolding(false)
	if !valid || s.mode == locker.ModeRead || s.mode == locker.ModePermits {
		// A read hold excludes only writers: it reads, never writes; a
		// permit excludes nothing (it works, holds and checks as any
		// holder, for the faults that wait for a holder).
		return false, nil
	}
	val := fmt.Sprintf("%s-%d", c.Name, s.seq)
	writeOp := history.Op{Client: c.Name, Kind: history.Write, Key: c.Key, Token: s.token, HasToken: s.fenced,
		Value: val, Prev: s.read.Value, HasPrev: true, Hold: s.h.id, Checked: true}
	if !claimed.IsZero() {
		writeOp.ValidUntil, writeOp.HasValid = c.onHistory(rec, claimed), true
	}
	if _, err := c.recording(rec).resource(ctx, writeOp, cfg.OpTimeout, func(ctx context.Context) error {
		return s.resource.Write(ctx, c.Key, fencing.Write{Token: s.token, NoToken: !s.fenced, Owner: c.Name, Value: val})
	}, nil); err != nil {
		return true, err
	}
	return false, nil
}

// stepRelease releases the hold (maybe rushed), or, for an owner whose
// check found its lease gone, tries again (Workload.again).
func (w *Workload) stepRelease(s *section) (bool, error) {
	c := s.c
	if err := c.Gate.Wait(s.ctx); err != nil {
		return true, errStop
	}
	// A client armed for a fault at a command is not rushed: the fault
	// point (e.g. between the GET and the DEL of a release) is where a
	// careful client stands, and a rushed release never sends its DEL
	// after a pause (get-del × pause-client missed 3 seeds of 20 so).
	rush := s.chance(&s.mix.RushRelease) && !c.Gate.Armed()
	if s.gone && s.owned != nil {
		return true, w.again(s.ctx, s.rec, c, s.owned, s.h)
	}
	res, err := c.releaseBeside(s.ctx, s.rec, s.h, rush, s.beside(), s.cfg.OpTimeout)
	if err != nil || !s.askTTL || res != history.OK {
		return true, err
	}
	// Released, the lease is not held: its server must not say otherwise.
	return true, c.askTTL(s.ctx, s.rec, s.h, s.cfg.OpTimeout)
}
