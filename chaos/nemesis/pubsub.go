package nemesis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/lockproof/lockproof/chaos/env"
)

// PubSubReset drops every pub/sub connection of a Redis node at a moment
// when the node refuses SUBSCRIBE, round after round: what an ACL rollout,
// a proxy that restarts, or the pub/sub output-buffer limit does to a
// subscriber. Commands pass all along. go-redis reconnects a dropped
// subscription at once, but a refused re-SUBSCRIBE is never sent again:
// only a client that reads its connection's errors itself learns that it
// hears nothing any more; a lock that does not sleeps through its
// waiters' hand-offs.
//
// Each round refuses SUBSCRIBE (ACL SETUSER default -subscribe
// -psubscribe), kills the node's pub/sub clients (CLIENT KILL TYPE
// pubsub), and accepts SUBSCRIBE again Refuse later. Stop ends the rounds
// and always accepts SUBSCRIBE again: the heal is guaranteed. The node
// serves every scenario of an environment, so the fault runs alone.
type PubSubReset struct {
	// Node is the address (direct, not proxied) of the node: the master.
	Node string
	// Auth logs the nemesis in (the topology's); its Username, or
	// "default", is the user whose SUBSCRIBE is refused: the clients'.
	Auth env.Auth
	// Every is the time from one round's start to the next one's.
	Every time.Duration
	// Refuse is how long each round refuses SUBSCRIBE.
	Refuse time.Duration
	// Links, when set, are clients whose connections opened in the
	// first StallWithin of each round are held back for Stall
	// (env.Links.StallDials), set just before the pub/sub connections
	// are dropped: a client that reconnects at once waits that long for
	// the new connection, while those it has open serve its commands.
	Links       []*env.Links
	Stall       time.Duration
	StallWithin time.Duration

	stop chan struct{}
	done chan error

	mu     sync.Mutex
	before int64   // pub/sub clients before the first round
	killed []int64 // per round
	after  int64   // pub/sub clients after the heal (and a moment)
}

// Name is "pubsub-reset <node>".
func (f *PubSubReset) Name() string { return "pubsub-reset " + f.Node }

// Start counts the node's pub/sub clients, runs the first round, and the
// next ones every Every until Stop.
func (f *PubSubReset) Start(ctx context.Context) error {
	if f.Every <= f.Refuse || f.Refuse <= 0 {
		return fmt.Errorf("pubsub-reset: Every (%v) must exceed Refuse (%v), and Refuse be positive", f.Every, f.Refuse)
	}
	n, err := pubsubClients(ctx, f.Auth, f.Node)
	if err != nil {
		return fmt.Errorf("pubsub-reset: %w", err)
	}
	f.mu.Lock()
	f.before = n
	f.mu.Unlock()
	if err := f.round(ctx); err != nil {
		return errors.Join(err, refuseSubscribe(context.WithoutCancel(ctx), f.Auth, f.Node, false))
	}
	f.stop, f.done = make(chan struct{}), make(chan error, 1)
	go func() {
		t := time.NewTicker(f.Every)
		defer t.Stop()
		for {
			select {
			case <-f.stop:
				f.done <- nil
				return
			case <-ctx.Done():
				f.done <- nil
				return
			case <-t.C:
				if err := f.round(ctx); err != nil {
					f.done <- err
					return
				}
			}
		}
	}()
	return nil
}

// round refuses SUBSCRIBE, kills the pub/sub clients, and after Refuse
// accepts SUBSCRIBE again (also when ctx ends meanwhile).
func (f *PubSubReset) round(ctx context.Context) error {
	if err := refuseSubscribe(ctx, f.Auth, f.Node, true); err != nil {
		return err
	}
	for _, l := range f.Links {
		l.StallDials(f.StallWithin, f.Stall)
	}
	c := env.AdminClient(f.Auth, f.Node)
	n, kerr := c.ClientKillByFilter(ctx, "TYPE", "pubsub").Result()
	_ = c.Close()
	if kerr != nil {
		kerr = fmt.Errorf("CLIENT KILL TYPE pubsub on %s: %w", f.Node, kerr)
	}
	f.mu.Lock()
	f.killed = append(f.killed, n)
	f.mu.Unlock()
	t := time.NewTimer(f.Refuse)
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
	return errors.Join(kerr, refuseSubscribe(context.WithoutCancel(ctx), f.Auth, f.Node, false))
}

// Stop ends the rounds, accepts SUBSCRIBE again, and counts the pub/sub
// clients a moment later: those that subscribed again.
func (f *PubSubReset) Stop(ctx context.Context) error {
	var errs []error
	if f.stop != nil {
		close(f.stop)
		errs = append(errs, <-f.done)
		f.stop = nil
	}
	errs = append(errs, refuseSubscribe(ctx, f.Auth, f.Node, false))
	t := time.NewTimer(4 * f.Refuse)
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
	n, err := pubsubClients(ctx, f.Auth, f.Node)
	errs = append(errs, err)
	f.mu.Lock()
	f.after = n
	f.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pubsub-reset: %w", err)
	}
	return nil
}

// Evidence implements Witness: the pub/sub clients before, those each
// round dropped, and those subscribed again after the heal; Bit when a
// round dropped one.
func (f *PubSubReset) Evidence() Evidence {
	f.mu.Lock()
	defer f.mu.Unlock()
	var total int64
	rounds := make([]string, len(f.killed))
	for i, n := range f.killed {
		total += n
		rounds[i] = fmt.Sprint(n)
	}
	text := fmt.Sprintf("%d pub/sub connections before; dropped per round, SUBSCRIBE refused %v each: [%s]; %d pub/sub connections %v after the heal",
		f.before, f.Refuse, strings.Join(rounds, " "), f.after, 4*f.Refuse)
	if len(f.Links) > 0 {
		var held int64
		for _, l := range f.Links {
			held += l.Stalled()
		}
		text += fmt.Sprintf("; %d clients' new connections held back %v each round: %d dials held", len(f.Links), f.Stall, held)
	}
	return Evidence{Bit: total > 0, Text: text}
}

// refuseSubscribe makes the node refuse (refuse) or accept SUBSCRIBE and
// PSUBSCRIBE from the clients' user (a's Username, or the default user,
// the one clients and Sentinels use without one).
func refuseSubscribe(ctx context.Context, a env.Auth, node string, refuse bool) error {
	sign := "+"
	if refuse {
		sign = "-"
	}
	user := a.Username
	if user == "" {
		user = "default"
	}
	return env.Admin(ctx, a, node, "ACL", "SETUSER", user, sign+"subscribe", sign+"psubscribe")
}

// pubsubClients counts the node's clients in pub/sub mode.
// PubSubClients counts the clients in pub/sub mode on the node at addr
// (direct, not proxied): a cluster's pubsub-reset strikes the node its
// waiters subscribed on.
func PubSubClients(ctx context.Context, a env.Auth, addr string) (int64, error) {
	return pubsubClients(ctx, a, addr)
}

func pubsubClients(ctx context.Context, a env.Auth, node string) (int64, error) {
	c := env.AdminClient(a, node)
	defer c.Close()
	list, err := c.ClientList(ctx).Result()
	if err != nil {
		return 0, fmt.Errorf("CLIENT LIST on %s: %w", node, err)
	}
	var n int64
	for _, line := range strings.Split(list, "\n") {
		for _, field := range strings.Fields(line) {
			sub, ok := strings.CutPrefix(field, "sub=")
			if !ok {
				sub, ok = strings.CutPrefix(field, "psub=")
			}
			if ok && sub != "0" {
				n++ // a client in pub/sub mode
				break
			}
		}
	}
	return n, nil
}
