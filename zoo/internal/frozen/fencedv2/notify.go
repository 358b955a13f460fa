package fencedv2

import (
	"context"
	"fmt"
	"log/slog"
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
// order; one goroutine (receive) reads confirmations and messages. Both start
// with the first wait and stop with close.
type notifier struct {
	rdb redis.UniversalClient
	log *slog.Logger

	mu      sync.Mutex
	ps      *redis.PubSub
	started bool
	closed  bool
	chans   map[string]*chanState
	kick    chan struct{}
	done    chan struct{}
}

type chanState struct {
	refs      int  // waiters registered
	requested bool // SUBSCRIBE sent, not UNSUBSCRIBEd since
	active    bool // the last confirmation was "subscribe"
	inflight  int  // commands sent and not yet confirmed
	ready     chan struct{}
	gen       uint64    // messages received so far
	recent    [8]string // the payloads of the last messages, by gen % 8
	waiters   map[*waiter]struct{}
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
	other chan struct{} // buffered(1): the lock was handed to another waiter
}

// deliver passes a message ("<token>:<fence>" for a hand-off, anything else
// a plain wake-up) to the waiter it names. Called with n.mu held.
func (w *waiter) deliver(payload string) {
	if payload == "" {
		select {
		case w.wake <- struct{}{}:
		default:
		}
		return
	}
	i := strings.LastIndexByte(payload, ':')
	if i < 0 {
		return
	}
	if payload[:i] != w.token {
		select {
		case w.other <- struct{}{}:
		default:
		}
		return
	}
	fence, err := strconv.ParseUint(payload[i+1:], 10, 64)
	if err != nil {
		select {
		case w.wake <- struct{}{}:
		default:
		}
		return
	}
	select {
	case w.grant <- fence:
	default:
	}
}

func newNotifier(rdb redis.UniversalClient, log *slog.Logger) *notifier {
	return &notifier{
		rdb:   rdb,
		log:   log,
		chans: make(map[string]*chanState),
		kick:  make(chan struct{}, 1),
		done:  make(chan struct{}),
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
	w := &waiter{n: n, ch: ch, token: token, st: st, wake: make(chan struct{}, 1), grant: make(chan uint64, 1), other: make(chan struct{}, 1)}
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
			delete(n.chans, w.ch)
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
// confirmed: whether a message can reach it.
func (w *waiter) subscribed() bool {
	w.n.mu.Lock()
	defer w.n.mu.Unlock()
	return w.st.isReady()
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
		if ps == nil && len(sub) > 0 {
			ps = n.rdb.Subscribe(context.Background())
			n.ps = ps
			go n.receive(ps.ChannelWithSubscriptions())
		}
		n.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if len(sub) > 0 {
			if err := ps.Subscribe(ctx, sub...); err != nil {
				n.log.Warn("lock: subscribe failed; waiters fall back to timers", "channels", sub, "err", err)
			}
		}
		if len(unsub) > 0 {
			if err := ps.Unsubscribe(ctx, unsub...); err != nil {
				n.log.Warn("lock: unsubscribe failed", "channels", unsub, "err", err)
			}
		}
		cancel()
	}
}

// receive handles confirmations and messages until the PubSub is closed.
func (n *notifier) receive(msgs <-chan any) {
	for m := range msgs {
		switch m := m.(type) {
		case *redis.Subscription:
			n.mu.Lock()
			if st := n.chans[m.Channel]; st != nil {
				if st.inflight > 0 {
					st.inflight--
				}
				st.active = m.Kind == "subscribe"
				st.update()
				if st.refs == 0 && !st.requested && !st.active && st.inflight == 0 {
					delete(n.chans, m.Channel)
				}
			}
			n.mu.Unlock()
		case *redis.Message:
			n.mu.Lock()
			if st := n.chans[m.Channel]; st != nil {
				st.gen++
				st.recent[st.gen%uint64(len(st.recent))] = m.Payload
				for w := range st.waiters {
					w.deliver(m.Payload)
				}
			}
			n.mu.Unlock()
		}
	}
}

// deliverLocal passes a hand-off message at once to the waiter it names if
// that waiter is in this process (the publish reaches it later, harmlessly).
func (n *notifier) deliverLocal(ch, payload string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if st := n.chans[ch]; st != nil {
		for w := range st.waiters {
			w.deliver(payload)
		}
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
	}
	n.mu.Unlock()
	if ps != nil {
		if err := ps.Close(); err != nil {
			return fmt.Errorf("lock: close subscription: %w", err)
		}
	}
	return nil
}
