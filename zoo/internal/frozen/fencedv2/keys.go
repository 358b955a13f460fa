package fencedv2

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/lockproof/lockproof/internal/seeded"
)

// Keys are the Redis names one lock key uses. All share one hash tag, so they
// live in one Cluster slot and one Lua script may touch them all.
type Keys struct {
	// Lock is a hash {o: owner token, n: hold count, f: fence} with a PX TTL.
	Lock string
	// Fence is the fencing counter. It never expires, so fences only grow.
	Fence string
	// Queue is a sorted set of waiters ("<ttl ms>:<owner token>"), scored by arrival (FIFO).
	Queue string
	// QueueDeadlines is a sorted set of the same members scored by the time
	// (ms, server clock) after which a waiter that stopped refreshing is dropped.
	QueueDeadlines string
	// Channel is the pub/sub channel on which a release that hands the lock
	// over publishes "<new owner token>:<fence>".
	Channel string
}

// RedisKeys returns the Redis names used for the lock key: "{key}",
// "{key}:fence", "{key}:q", "{key}:qt" and the channel "{key}:released".
// A key that contains '{' or '}' is tagged with a hash of itself instead,
// so the tag is always well formed.
func RedisKeys(key string) Keys {
	base := "{" + key + "}"
	if key == "" || strings.ContainsAny(key, "{}") {
		sum := sha256.Sum256([]byte(key))
		base = "{" + hex.EncodeToString(sum[:8]) + "}" + key
	}
	return Keys{
		Lock:           base,
		Fence:          base + ":fence",
		Queue:          base + ":q",
		QueueDeadlines: base + ":qt",
		Channel:        base + ":released",
	}
}

// newToken returns a fresh 128-bit owner token, hex encoded: from
// crypto/rand, or from src when set (Options.Rand, a harness hook added to
// the frozen copy so that a simulation replays it).
func newToken(src *seeded.Source) string { return src.Token() }
