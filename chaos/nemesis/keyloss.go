package nemesis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/chaos/env"
)

// KeyLoss makes Redis forget a lock while its holder lives: an operator's
// DEL of every key of the lock on the nodes that hold it (the lock's own
// key, its fence counter, its queue: whatever the lock stores under the
// key's name). The holder is not told: only its lock can find out (a
// watchdog's next renewal), which is what the fault tests. Stop heals
// nothing: what is deleted stays deleted, as an operator's mistake does.
type KeyLoss struct {
	// Client is the holder (for the fault's name).
	Client string
	// Key is the lock key as the workload names it; every Redis key that
	// contains it, not followed by a digit (k1 is not k10), is deleted.
	Key string
	// Nodes are the addresses (direct, not proxied) of the nodes that
	// hold the lock's keys: the master, or Redlock's masters.
	Nodes []string
	// Auth logs in to the nodes (the topology's).
	Auth env.Auth

	mu sync.Mutex
	ev Evidence
}

// Name is "key-loss <client> <key>".
func (k *KeyLoss) Name() string { return "key-loss " + k.Client + " " + k.Key }

// Start deletes the lock's keys on every node and records, as evidence,
// the keys found before and those left after.
func (k *KeyLoss) Start(ctx context.Context) error {
	var before, after []string
	var deleted int64
	var errs []error
	for _, addr := range k.Nodes {
		c := env.AdminClient(k.Auth, addr)
		keys, err := k.keys(ctx, c.Scan, addr)
		// One DEL per key: a cluster node refuses a DEL of keys in
		// different hash slots (CROSSSLOT), and a lock's keys need not
		// share one.
		for _, key := range keys {
			if err != nil {
				break
			}
			var n int64
			n, err = c.Del(ctx, key).Result()
			deleted += n
		}
		left, lerr := k.keys(ctx, c.Scan, addr)
		errs = append(errs, err, lerr, c.Close())
		before, after = append(before, keys...), append(after, left...)
	}
	// After the DEL a new holder may already have made the key again:
	// the keys after are shown, the DEL's count is the proof.
	k.record(Evidence{Bit: deleted > 0,
		Text: fmt.Sprintf("%s's lock %s forgotten: %d keys deleted; before %s, right after %s", k.Client, k.Key, deleted, list(before), list(after))})
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("key-loss %s: %w", k.Key, err)
	}
	return nil
}

// Present reports whether some key of the lock exists on one of the nodes:
// a strike waits for it, since a holder may release before the DEL.
func (k *KeyLoss) Present(ctx context.Context) (bool, error) {
	for _, addr := range k.Nodes {
		c := env.AdminClient(k.Auth, addr)
		keys, err := k.keys(ctx, c.Scan, addr)
		_ = c.Close()
		if err != nil || len(keys) > 0 {
			return len(keys) > 0, err
		}
	}
	return false, nil
}

// keys lists the keys of the lock on one node (SCAN, then the digit rule).
func (k *KeyLoss) keys(ctx context.Context, scan scanFunc, addr string) ([]string, error) {
	var out []string
	var cursor uint64
	for {
		ks, next, err := scan(ctx, cursor, "*"+globEscape(k.Key)+"*", 1000).Result()
		if err != nil {
			return out, fmt.Errorf("scan %s: %w", addr, err)
		}
		for _, key := range ks {
			if k.owns(key) {
				out = append(out, key)
			}
		}
		if cursor = next; cursor == 0 {
			slices.Sort(out)
			return out, nil
		}
	}
}

// owns reports whether redis key belongs to the lock: it contains Key
// somewhere not followed by a digit.
func (k *KeyLoss) owns(key string) bool {
	for i := 0; ; {
		j := strings.Index(key[i:], k.Key)
		if j < 0 {
			return false
		}
		end := i + j + len(k.Key)
		if end == len(key) || key[end] < '0' || key[end] > '9' {
			return true
		}
		i += j + 1
	}
}

// Keys lists the lock's keys on every node.
func (k *KeyLoss) Keys(ctx context.Context) ([]string, error) { return k.allKeys(ctx) }

// allKeys lists the lock's keys on every node.
func (k *KeyLoss) allKeys(ctx context.Context) ([]string, error) {
	var all []string
	var errs []error
	for _, addr := range k.Nodes {
		c := env.AdminClient(k.Auth, addr)
		keys, err := k.keys(ctx, c.Scan, addr)
		errs = append(errs, err, c.Close())
		all = append(all, keys...)
	}
	return all, errors.Join(errs...)
}

// record sets the evidence (Restart and ForceUnlock, built on KeyLoss,
// record theirs here too).
func (k *KeyLoss) record(ev Evidence) {
	k.mu.Lock()
	k.ev = ev
	k.mu.Unlock()
}

// Stop does nothing: the keys stay deleted.
func (k *KeyLoss) Stop(context.Context) error { return nil }

// Evidence implements Witness: the keys before and right after; Bit when
// the DEL deleted some.
func (k *KeyLoss) Evidence() Evidence {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ev
}

func list(keys []string) string {
	if len(keys) == 0 {
		return "none"
	}
	return "[" + strings.Join(keys, " ") + "]"
}

// globEscape escapes the glob characters of Redis's MATCH.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// scanFunc is redis.Client.Scan.
type scanFunc func(ctx context.Context, cursor uint64, match string, count int64) *redis.ScanCmd

// Restart makes Redis forget every lock at once: the master crashes
// (SIGKILL, or the container is killed) and starts again at the same
// address without persistence, its data set empty, as a node without
// AOF or RDB does after a crash; its replicas resync the empty data set
// from it. The holder of Key lives on, unpaused and connected once the
// master answers again. Evidence: the holder's lock keys before the crash
// and after the restart. It acts on the master every scenario shares, so
// the fault runs alone. Stop heals nothing: the master is back at Start's
// end, and what it forgot stays forgotten.
type Restart struct {
	// Lock names the holder and the lock whose keys are the evidence
	// (its Nodes are the master's direct address).
	Lock *KeyLoss
	// Env runs the master, NodeID.
	Env    env.Env
	NodeID string
}

// Name is "restart <node> (<client> <key>)".
func (r *Restart) Name() string {
	return "restart " + r.NodeID + " (" + r.Lock.Client + " " + r.Lock.Key + ")"
}

// Start kills the master and starts it again, empty, and waits until it
// answers PING.
func (r *Restart) Start(ctx context.Context) error {
	before, berr := r.Lock.allKeys(ctx)
	// While it is down its port refuses, as a dead process's does
	// (env.Crash says why).
	restart, err := env.Crash(ctx, r.Env, r.NodeID)
	if err != nil {
		return fmt.Errorf("restart %s: %w", r.NodeID, err)
	}
	if err := restart(ctx); err != nil {
		return fmt.Errorf("restart %s: %w", r.NodeID, err)
	}
	after, aerr := r.Lock.allKeys(ctx)
	// The restart empties the data set: keys after it are new ones (a
	// client that took the lock at once), shown, not counted.
	r.Lock.record(Evidence{Bit: len(before) > 0,
		Text: fmt.Sprintf("%s crashed and restarted without persistence while %s held %s: its keys before %s, after the restart %s",
			r.NodeID, r.Lock.Client, r.Lock.Key, list(before), list(after))})
	if err := errors.Join(berr, aerr); err != nil {
		return fmt.Errorf("restart %s: %w", r.NodeID, err)
	}
	return nil
}

// Stop does nothing: the master is back, without what it forgot.
func (r *Restart) Stop(context.Context) error { return nil }

// Evidence implements Witness: the holder's lock keys before the crash
// and after the restart; Bit when the restart lost some.
func (r *Restart) Evidence() Evidence { return r.Lock.Evidence() }

// ForceUnlock is an operator's force unlock of a held lock through the
// lock's own API (package lock's ForceUnlock, Redisson's forceUnlock):
// Unlock frees the lock whoever holds it. Unlike key-loss's DEL, the lock
// does what it does on a force unlock (package lock hands the lock to its
// first waiter). Evidence: whether Unlock found the lock held, and the
// lock's keys before and after. Stop heals nothing.
type ForceUnlock struct {
	// Lock names the holder and the lock whose keys are the evidence.
	Lock *KeyLoss
	// Unlock runs the lock's force unlock of lock.Key.
	Unlock func(ctx context.Context, lock *KeyLoss) (held bool, err error)
	// Again finds the next holder when Unlock found the lock free: its
	// holder released between the look that found it and the unlock (a
	// brief hold, a loaded machine). Start then unlocks that one, until
	// Again fails (no holder before its time runs out: the evidence says
	// the fault did not bite). Nil: one try.
	Again func(ctx context.Context) (*KeyLoss, error)
}

// Name is "force-unlock <client> <key>".
func (f *ForceUnlock) Name() string { return "force-unlock " + f.Lock.Client + " " + f.Lock.Key }

// Start force-unlocks the lock, again on the next holder while it finds
// the lock free (Again).
func (f *ForceUnlock) Start(ctx context.Context) error {
	for {
		before, berr := f.Lock.allKeys(ctx)
		held, err := f.Unlock(ctx, f.Lock)
		after, aerr := f.Lock.allKeys(ctx)
		f.Lock.record(Evidence{Bit: held,
			Text: fmt.Sprintf("an operator force-unlocked %s while %s held it: held %v; keys before %s, right after %s",
				f.Lock.Key, f.Lock.Client, held, list(before), list(after))})
		if err := errors.Join(err, berr, aerr); err != nil {
			return fmt.Errorf("force-unlock %s: %w", f.Lock.Key, err)
		}
		if held || f.Again == nil {
			return nil
		}
		next, err := f.Again(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return nil // the evidence says it did not bite
			}
			return fmt.Errorf("force-unlock %s: the next holder: %w", f.Lock.Key, err)
		}
		f.Lock = next
	}
}

// Stop does nothing: the lock stays unlocked.
func (f *ForceUnlock) Stop(context.Context) error { return nil }

// Evidence implements Witness: Bit when the lock was held.
func (f *ForceUnlock) Evidence() Evidence { return f.Lock.Evidence() }
