package lock

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/lockproof/lockproof/internal/seeded"
)

// Keys are the Redis names one lock key uses. All share one hash tag, so they
// live in one Cluster slot and one Lua script may touch them all.
type Keys struct {
	// Lock is a hash with a PX TTL: {o: owner token, n: hold count, f:
	// fence, s: hold sequence, p: call given a hand-off not yet picked
	// up, w: somebody may be in line, h.<id>: one record per hold, named
	// by its call's id, "<seq>|<metadata>"} (see scripts.go).
	Lock string
	// Fence is the fencing counter: the last fence granted. It lives an
	// hour (or two TTLs) past the last grant; fences still only grow,
	// since a fence is max(counter+1, server time in µs).
	Fence string
	// Queue is a sorted set of waiting calls ("<ttl ms>#<call id>:<owner
	// token>"), scored by arrival (FIFO).
	Queue string
	// QueueDeadlines is a sorted set of the same members scored by the time
	// (ms, server clock) after which a waiter that stopped refreshing is dropped.
	QueueDeadlines string
	// Channel is the pub/sub channel on which a release that hands the lock
	// over publishes "<new owner token>:<fence>".
	Channel string
	// Gone is a sorted set of the calls (by id) that gave up with their
	// outcome unknown and were cleaned up, each scored by its own expiry
	// (an hour after its bury, server clock, ms): a request of theirs that
	// reaches Redis after the cleanup (held by a paused server, or run
	// behind the cleanup from another connection) takes nothing. Each bury
	// trims the ids whose time has passed, and the key lives as long as
	// its newest id.
	Gone string
}

// RedisKeys returns the Redis names used for the lock key: "{key}",
// "{key}:fence", "{key}:q", "{key}:qt", "{key}:gone" and the channel
// "{key}:released".
// A key that contains '{' or '}' is tagged with a hash of itself instead,
// so the tag is always well formed.
func RedisKeys(key string) Keys { return keysOf(key, "") }

// keysOf are the Redis names of key for a kind of lock: the mutex's
// (kind ""), or a shared kind's (":rw", ":sem": RWLock, Semaphore), whose
// names are the mutex's base name with the kind after it ("{key}:rw",
// "{key}:rw:fence", ...). No mutex's name is a shared kind's: a mutex's
// base ends with its hash tag ("{key}"), or holds a brace after it
// ("{hash}key" for a key with braces), while a shared kind's base goes on
// after the tag with ":rw" or ":sem", which has none. Each kind's scripts
// read the other's records as garbage, so two kinds must never meet on
// one key: were a shared kind's keys a prefix away from the mutex's
// (RedisKeys("rw:"+key)), the mutex "rw:key" and the read-write lock
// "key" would each grant beside the other's holds.
func keysOf(key, kind string) Keys {
	base := "{" + key + "}"
	if key == "" || strings.ContainsAny(key, "{}") {
		sum := sha256.Sum256([]byte(key))
		base = "{" + hex.EncodeToString(sum[:8]) + "}" + key
	}
	base += kind
	// One string holds every name (one allocation, not six: a key's names
	// are made on every acquire); each name is a slice of it.
	all := base + base + ":fence" + base + ":q" + base + ":qt" + base + ":released" + base + ":gone"
	b := len(base)
	at := b
	next := func(suffix int) string {
		n := all[at : at+b+suffix]
		at += b + suffix
		return n
	}
	return Keys{
		Lock:           all[:b],
		Fence:          next(len(":fence")),
		Queue:          next(len(":q")),
		QueueDeadlines: next(len(":qt")),
		Channel:        next(len(":released")),
		Gone:           next(len(":gone")),
	}
}

// scriptKeys are the keys the scripts expect (lock, fence, queue, queue
// deadlines, gone) and the channel, boxed once per call for the script
// arguments.
type scriptKeys struct {
	keys    [5]any
	channel any
}

func (k Keys) boxed() *scriptKeys {
	return &scriptKeys{keys: [5]any{k.Lock, k.Fence, k.Queue, k.QueueDeadlines, k.Gone}, channel: k.Channel}
}

// newToken returns a fresh 128-bit owner token, hex encoded: from
// crypto/rand, or from src when set (Options.Rand).
func newToken(src *seeded.Source) string { return src.Token() }
