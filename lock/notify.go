package lock

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// notifier shares one pub/sub connection among all waiters of a Client. It
// subscribes to a lock's channel while someone waits for that lock and
// unsubscribes when nobody does. A release publishes the token of the next
// waiter in line ("" when none); the notifier wakes that waiter only.
//
// One goroutine (manage) sends SUBSCRIBE/UNSUBSCRIBE so that they stay in
// order; one goroutine per connection (receive) reads confirmations and
// messages. manage starts with the first wait and stops with close.
//
// A subscription can die without a word to go-redis's own helpers: a
// dropped connection whose re-SUBSCRIBE Redis refused (an ACL change, a
// proxy that restarts) is never subscribed again, and a half-open one
// never errs. So receive reads errors itself and pings a quiet connection;
// on an error, or a ping left unanswered, it drops the connection, marks
// every channel unsubscribed (its waiters poll, and it wakes them: a
// hand-off may have been published meanwhile), and manage subscribes
// anew on a fresh connection, with a backoff.
//
// go-redis, when a read or write of a pub/sub connection fails, dials a
// new connection and re-subscribes before it reports the failure, under
// the context of the call that failed: a re-dial that hangs (a lost SYN,
// a proxy that accepts and forwards nothing) kept every waiter believing
// in its subscription, deaf to its hand-off, for a whole dial timeout
// (the head of the line served seconds after the release, overtaken).
// Every call on an established connection therefore
// gets noRedial, a context canceled from the start and without a
// deadline: go-redis reads and writes by their timeouts alone, and only
// its re-dial, which honours the context, fails at once, so the failure
// reaches receive, which drops the connection and wakes the waiters to
// poll while manage dials a fresh one in the open.
type notifier struct {
	rdb redis.UniversalClient
	// noRedial is canceled: see above.
	noRedial context.Context
	log      *slog.Logger
	// bg is the Client's count of background work (Client.Close waits).
	bg *background
	// handoff is the Client's hand-off lease (Options.HandoffTTL).
	handoff time.Duration

	mu      sync.Mutex
	ps      *redis.PubSub
	started bool
	closed  bool
	chans   map[string]*chanState
	kick    chan struct{}
	done    chan struct{}
	// backoff is the wait before a fresh connection after a dead one;
	// it doubles while connections keep dying unconfirmed.
	backoff time.Duration
}

// Pub/sub health: the first reconnection waits minBackoff, later ones up
// to maxBackoff; a connection quiet for pingEvery is pinged, and it is
// dead when the ping's answer has not come pingEvery later.
const (
	minBackoff = 10 * time.Millisecond
	maxBackoff = time.Second
	pingEvery  = 3 * time.Second
)

type chanState struct {
	refs      int  // waiters registered
	requested bool // SUBSCRIBE sent, not UNSUBSCRIBEd since
	active    bool // the last confirmation was "subscribe"
	inflight  int  // commands sent and not yet confirmed
	ready     chan struct{}
	gen       uint64    // messages received so far
	recent    [8]string // the payloads of the last messages, by gen % 8
	waiters   map[*waiter]struct{}
	// handed and picked are the fences of the last hand-off and of the
	// last pickup heard of; watch wakes every waiter when the lock may be
	// free without a word (see dispatch).
	handed, picked uint64
	watch          *time.Timer
}

func (s *chanState) isReady() bool { return s.active && s.inflight == 0 }

// update closes ready when the subscription became usable, and replaces it when not.
func (s *chanState) update() {
	select {
	case <-s.ready:
		if !s.isReady() {
			s.ready = make(chan struct{})
		}
	default:
		if s.isReady() {
			close(s.ready)
		}
	}
}

// waiter is one Acquire waiting on a channel.
type waiter struct {
	n     *notifier
	ch    string
	token string
	st    *chanState
	wake  chan struct{} // buffered(1): look again (the lock may be free)
	grant chan uint64   // buffered(1): a release handed the lock to this waiter, with this fence
}

// deliver wakes the waiter: with a hand-off's fence (the lock was handed
// to it), or plainly (ok false: look again). Called with n.mu held.
func (w *waiter) deliver(fence uint64, ok bool) {
	if ok {
		select {
		case w.grant <- fence:
		default:
		}
		return
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// dispatch handles a message on st's channel: "<token>:<fence>", a
// hand-off, wakes the waiter it names; "+<fence>/<ttl ms>" (no ':',
// whatever the token), the pickup of a hand-off, wakes nobody; "" wakes
// every waiter.
//
// The channel, not each waiter, watches over a hand-off to another
// waiter (were each waiter to wake on every hand-off and run a script
// one hand-off lease later, the work would grow with the line): a
// hand-off arms the channel's watch for one hand-off lease, its pickup
// moves it to when the new holder's lease may run out (a holder that
// crashes wakes the line then), and when the watch fires, every waiter
// looks (a recipient that died in line never picks up). A live line thus
// wakes one waiter per hand-off, whatever its length. Called with n.mu
// held.
func (n *notifier) dispatch(st *chanState, payload string) {
	if payload == "" {
		for w := range st.waiters {
			w.deliver(0, false)
		}
		return
	}
	if rest, ok := strings.CutPrefix(payload, "+"); ok && !strings.Contains(payload, ":") {
		fs, ttls, _ := strings.Cut(rest, "/")
		fence, ferr := strconv.ParseUint(fs, 10, 64)
		ms, terr := strconv.ParseInt(ttls, 10, 64)
		if ferr != nil || terr != nil || ms <= 0 {
			return
		}
		st.picked = max(st.picked, fence)
		if fence >= st.handed {
			n.watch(st, time.Duration(ms)*time.Millisecond)
		}
		return
	}
	i := strings.LastIndexByte(payload, ':')
	if i < 0 {
		return
	}
	tok := payload[:i]
	fence, err := strconv.ParseUint(payload[i+1:], 10, 64)
	for w := range st.waiters {
		if w.token == tok {
			w.deliver(fence, err == nil)
		}
	}
	// A copy delivered in this process can come after the pickup it led
	// to: a hand-off already picked up arms nothing.
	if err != nil || fence > st.picked {
		st.handed = fence
		n.watch(st, n.handoff+5*time.Millisecond)
	}
}

// drop forgets channel ch (nobody waits on it) and stops its watch.
// Called with n.mu held.
func (n *notifier) drop(ch string) {
	if st := n.chans[ch]; st != nil && st.watch != nil {
		st.watch.Stop()
	}
	delete(n.chans, ch)
}

// watch (re)arms st's watch to wake every waiter after d. Called with
// n.mu held.
func (n *notifier) watch(st *chanState, d time.Duration) {
	if st.watch != nil {
		st.watch.Reset(d)
		return
	}
	st.watch = time.AfterFunc(d, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.dispatch(st, "") // every waiter looks
	})
}

func newNotifier(rdb redis.UniversalClient, log *slog.Logger, bg *background, handoff time.Duration) *notifier {
	noRedial, cancel := context.WithCancel(context.Background())
	cancel()
	return &notifier{
		rdb:      rdb,
		noRedial: noRedial,
		log:      log,
		bg:       bg,
		handoff:  handoff,
		chans:    make(map[string]*chanState),
		kick:     make(chan struct{}, 1),
		done:     make(chan struct{}),
	}
}

// noteSnapshot records a channel's state before an acquire attempt.
type noteSnapshot struct {
	st    *chanState
	gen   uint64
	ready bool
}

func (n *notifier) snapshot(ch string) noteSnapshot {
	n.mu.Lock()
	defer n.mu.Unlock()
	st := n.chans[ch]
	if st == nil {
		return noteSnapshot{}
	}
	return noteSnapshot{st: st, gen: st.gen, ready: st.isReady()}
}

// current reports whether the subscription was already usable before the
// attempt and no message for this waiter arrived since (before it joined):
// then nothing can have been missed.
func (s noteSnapshot) current(n *notifier, w *waiter) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	st := w.st
	if !s.ready || s.st != st || !st.isReady() || st.gen-s.gen > uint64(len(st.recent)) {
		return false
	}
	for g := s.gen + 1; g <= st.gen; g++ {
		if p := st.recent[g%uint64(len(st.recent))]; p == "" || strings.HasPrefix(p, w.token+":") {
			return false
		}
	}
	return true
}

func (n *notifier) join(ch, token string) *waiter {
	n.mu.Lock()
	defer n.mu.Unlock()
	st := n.chans[ch]
	if st == nil {
		st = &chanState{ready: make(chan struct{}), waiters: make(map[*waiter]struct{})}
		n.chans[ch] = st
	}
	w := &waiter{n: n, ch: ch, token: token, st: st, wake: make(chan struct{}, 1), grant: make(chan uint64, 1)}
	st.refs++
	st.waiters[w] = struct{}{}
	if !n.closed {
		if !n.started {
			n.started = true
			go n.manage()
		}
		if !st.requested {
			n.kickLocked()
		}
	}
	return w
}

func (n *notifier) leave(w *waiter) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(w.st.waiters, w)
	w.st.refs--
	if w.st.refs == 0 {
		if w.st.requested {
			n.kickLocked()
		} else if !w.st.active && w.st.inflight == 0 {
			n.drop(w.ch)
		}
	}
}

func (n *notifier) kickLocked() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// awaitSubscribed waits until the waiter's channel is subscribed, ctx is
// done (its error is returned) or bound passes (nil: carry on with timers).
func (w *waiter) awaitSubscribed(ctx context.Context, bound time.Duration) error {
	t := time.NewTimer(bound)
	defer t.Stop()
	for {
		w.n.mu.Lock()
		ok, ch, closed := w.st.isReady(), w.st.ready, w.n.closed
		w.n.mu.Unlock()
		if ok || closed {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-t.C:
			return nil
		}
	}
}

// subscribed reports whether the waiter's channel is subscribed and
// confirmed: whether a message can reach it. After close, never.
func (w *waiter) subscribed() bool {
	w.n.mu.Lock()
	defer w.n.mu.Unlock()
	return !w.n.closed && w.st.isReady()
}

// manage sends SUBSCRIBE and UNSUBSCRIBE, in order, as waiters come and go.
func (n *notifier) manage() {
	for {
		select {
		case <-n.done:
			return
		case <-n.kick:
		}
		var sub, unsub []string
		n.mu.Lock()
		if n.closed {
			n.mu.Unlock()
			return
		}
		for ch, st := range n.chans {
			switch {
			case st.refs > 0 && !st.requested:
				st.requested = true
				st.inflight++
				st.update()
				sub = append(sub, ch)
			case st.refs == 0 && st.requested:
				st.requested = false
				st.inflight++
				st.update()
				unsub = append(unsub, ch)
			}
		}
		ps := n.ps
		fresh := false
		if ps == nil && len(sub) > 0 {
			// No channel yet: go-redis dials at the first SUBSCRIBE.
			ps, fresh = n.rdb.Subscribe(context.Background()), true
			n.ps = ps
		}
		if ps == nil {
			// Nothing to unsubscribe from: the connection died, and with
			// it every subscription.
			for _, ch := range unsub {
				st := n.chans[ch]
				st.inflight--
				st.update()
				if st.refs == 0 && !st.active && st.inflight == 0 {
					n.drop(ch)
				}
			}
			unsub = nil
		}
		n.mu.Unlock()
		// The first SUBSCRIBE of a fresh connection dials it, within 5s;
		// later commands go on the established one and must not re-dial
		// it (noRedial): a failure drops it instead, and the next round
		// dials a fresh one.
		ctx, cancel := n.noRedial, context.CancelFunc(func() {})
		if fresh {
			ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
		}
		var failed error
		if len(sub) > 0 {
			if err := ps.Subscribe(ctx, sub...); err != nil {
				n.log.Warn("lock: subscribe failed; waiters fall back to timers", "channels", sub, "err", err)
				failed = err
			}
		}
		if len(unsub) > 0 && failed == nil {
			if err := ps.Unsubscribe(ctx, unsub...); err != nil {
				n.log.Warn("lock: unsubscribe failed", "channels", unsub, "err", err)
				failed = err
			}
		}
		cancel()
		if fresh {
			// Its reader starts once the connection is dialed (or failed
			// to be: then its first read fails and drops it).
			go n.receive(ps)
		} else if failed != nil {
			n.dead(ps, failed)
		}
	}
}

// receive handles confirmations and messages of ps until it is closed or
// found dead (see notifier).
func (n *notifier) receive(ps *redis.PubSub) {
	pinged := false
	for {
		m, err := ps.ReceiveTimeout(n.noRedial, pingEvery)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !pinged && n.current(ps) {
				// Quiet: ask. The answer (a Pong) is read by this loop.
				err = ps.Ping(n.noRedial)
				if err == nil {
					pinged = true
					continue
				}
			}
			n.dead(ps, err)
			return
		}
		pinged = false
		switch m := m.(type) {
		case *redis.Subscription:
			n.mu.Lock()
			if st := n.chans[m.Channel]; st != nil && n.ps == ps {
				if st.inflight > 0 {
					st.inflight--
				}
				st.active = m.Kind == "subscribe"
				st.update()
				if st.active {
					n.backoff = 0 // a connection that works
				}
				if st.refs == 0 && !st.requested && !st.active && st.inflight == 0 {
					n.drop(m.Channel)
				}
			}
			n.mu.Unlock()
		case *redis.Message:
			n.mu.Lock()
			if st := n.chans[m.Channel]; st != nil {
				st.gen++
				st.recent[st.gen%uint64(len(st.recent))] = m.Payload
				n.dispatch(st, m.Payload)
			}
			n.mu.Unlock()
		}
	}
}

// current reports whether ps is the notifier's connection (not closed,
// not replaced).
func (n *notifier) current(ps *redis.PubSub) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return !n.closed && n.ps == ps
}

// dead drops ps, which failed with err (or was closed): every channel is
// unsubscribed, its waiters are woken to look at once and then poll, and
// manage subscribes again on a fresh connection after the backoff.
func (n *notifier) dead(ps *redis.PubSub, err error) {
	n.mu.Lock()
	if n.closed || n.ps != ps {
		n.mu.Unlock()
		_ = ps.Close()
		return
	}
	n.ps = nil
	for ch, st := range n.chans {
		st.active, st.requested, st.inflight = false, false, 0
		st.update()
		if st.refs == 0 {
			n.drop(ch)
			continue
		}
		n.dispatch(st, "") // a plain wake-up: a hand-off may have been lost
	}
	n.backoff = min(max(2*n.backoff, minBackoff), maxBackoff)
	wait := n.backoff
	n.mu.Unlock()
	n.log.Warn("lock: pub/sub connection lost; waiters poll until it is back", "err", err, "retry_in", wait)
	_ = ps.Close()
	time.AfterFunc(wait, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.kickLocked()
	})
}

// deliverLocal passes a hand-off message at once to the waiter it names if
// that waiter is in this process (the publish reaches it later, harmlessly).
func (n *notifier) deliverLocal(ch, payload string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if st := n.chans[ch]; st != nil {
		n.dispatch(st, payload)
	}
}

func (n *notifier) close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	ps := n.ps
	close(n.done)
	for _, st := range n.chans {
		select {
		case <-st.ready:
		default:
			close(st.ready)
		}
		// Waits in progress poll from now on (subscribed is false): wake
		// them to look at once and pick their new period.
		n.dispatch(st, "")
	}
	n.mu.Unlock()
	if ps != nil {
		// In the background: go-redis's Close waits for a SUBSCRIBE that
		// is still dialing, up to its dial timeout against a frozen
		// Redis (15s by default), and Client.Close must not.
		n.bg.Add(1)
		go func() {
			defer n.bg.Done()
			if err := ps.Close(); err != nil {
				n.log.Warn("lock: close subscription", "err", err)
			}
		}()
	}
	return nil
}
