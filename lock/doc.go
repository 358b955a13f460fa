// Package lock is a fenced lease lock on Redis: an owner token, a fencing
// counter, a TTL, an optional watchdog, reentrancy, and a FIFO wait queue
// woken by pub/sub.
//
// It works over any redis.UniversalClient (a single node, Sentinel through
// redis.NewFailoverClient, or Cluster): every Redis key of a lock shares one
// hash tag (see RedisKeys), and every change is one Lua script.
//
// # What it guarantees
//
//   - G1, lease exclusivity, on one master: while a lease on a key is
//     unexpired in Redis, no other owner is granted one, and only the owner
//     token can release or renew it. Client pauses, latency and partitions do
//     not break this; they only make leases expire.
//   - Fences of successive holders of a key strictly increase. A fence is
//     max(counter+1, Redis server time in µs), so even a failover that loses
//     the counter issues larger fences, as long as the servers' clocks agree
//     within the failover time.
//   - Fairness: waiters are served first come, first served; a release hands
//     the lock to the first waiter with a provisional lease (HandoffTTL) that
//     the waiter confirms on pickup (one round trip), and a releasing holder
//     that asks again queues behind the others. TryAcquire fails while
//     others queue. A place in line is a call's, not an owner's: two waits
//     WithOwner hold two places, and a hand-off given at one of them is
//     that call's to pick up (another call of the owner finds the lock
//     taken meanwhile).
//   - Waiters are not held up by waiters that died: a dead waiter keeps its
//     place at most QueueTTL (live waiters refresh theirs), and a lock handed
//     to it is blocked for one hand-off lease, not a TTL. Once a lock is
//     surely free, a live waiter gets it within Options.WaitBound.
//   - A lease is valid from the start of the attempt that got it (the pickup,
//     for a hand-off) for TTL×(1−Drift); nested holds and renewals only ever
//     extend a lock's expiry, never shorten it.
//   - Every blocking call honours its context, returning within its deadline
//     plus a small constant (cleanup that must outlive it runs in the
//     background, bounded); a lost reply is reported as ErrUnknownOutcome,
//     never as "not held" or "not acquired"; a waiter that gives up gets
//     ErrNotAcquired; a Release that did not surely happen can be retried.
//
// # What it cannot guarantee
//
//   - Holders are not exclusive. A holder paused (GC, VM, SIGSTOP) past its
//     TTL wakes up believing it holds the lock while another holder works.
//     Lease.ValidUntil, Lost and Context narrow that window; only fencing
//     closes it: pass Lease.Fence with every write and make the resource
//     reject fences below the highest it has seen.
//   - Failover. Redis replicates asynchronously: a master can acknowledge an
//     acquire and fail before its replica sees it, and the promoted replica
//     grants the lock again. Options.ReplicaAcks (WAIT) narrows that window
//     and does not close it.
//   - Clocks. Validity is measured on the client's monotonic clock from the
//     start of the acquire, minus Options.Drift; expiry happens on the server's
//     clock. A server whose clock runs fast expires leases early.
//   - Fences across a failover between skewed servers. If the promoted
//     replica's clock is behind the old master's by more than the failover
//     took, its first fences can be below fences the old master issued: a
//     fence goes backwards. Data stays safe (a fencing resource refuses the
//     lower fences, and the owner tie-break refuses an equal one from
//     another owner), but new holders' writes are refused until the new
//     master's clock passes the highest fence the resource saw: for at most
//     the skew. Keep the Redis nodes' clocks in sync (NTP) well within
//     Sentinel's down-after. tla/FencedLock.tla checks both sides of this
//     assumption (FencedLock.cfg, FencedLock_skew_unsafe.cfg).
//
// # Performance
//
// Acquire and Release are one round trip each (one Lua script; the scripts
// need Redis 6.2 or later). When nobody waits for the key, both scripts take
// a fast path that runs only the commands an uncontended lock needs: acquire
// checks that neither the lock nor its queue exists, reads the clock and
// sets the fence, the hash and its TTL; release checks the owner and the
// queue and deletes the lock. Queue maintenance runs only when a queue exists.
//
// Give the go-redis client ContextTimeoutEnabled: true. Otherwise go-redis
// ignores context deadlines, and the lock runs each command in a helper
// goroutine to honour them, which costs a goroutine switch per round trip.
//
// # Reentrancy and identity
//
// Every hold is a record of its own in Redis, named by the call that made
// it: an outer hold, a nested one (Lease.Reenter, a second acquire
// WithOwner) and a hand-off alike. Lease.Reenter takes one more hold of a
// held lock and returns a new Lease with the same owner and fence and a
// record of its own; the lock is freed when every hold has been released.
// It refuses (ErrNotHeld) once the outer lease's own record is gone,
// rather than take a fresh hold nothing outer protects. Acquiring
// WithOwner(token) names an owner across calls: it re-enters a lock that
// owner holds. Release, Renew, TTLLeft and Reenter of a lease act on its
// own record only, so a released nested lease is not held (its TTLLeft
// says ErrNotHeld) while its outer one is. An owner token belongs to its
// Client (Redis stores "<Client.ID>/<token>"), so two processes that pick
// the same token still exclude each other; Options.SharedOwners opts out.
// WithMetadata stores who holds a lock and why, for Inspect (the newest
// hold's that has some); Client.HoldsOf counts an owner's holds.
//
// # Retries, deadlines, shutdown
//
// Acquire waits in line; WithRetry makes spaced one-shot attempts instead,
// as a RetryStrategy says: LinearBackoff, ExponentialBackoff, LimitRetry,
// Jitter (spread the waits), RetryIf and ErrorAwareStrategy (see the
// error: a refused connection, a taken lock as *TakenError with the
// holder's remaining TTL). Lease.WithValidity bounds one downstream call
// by the lease's validity deadline. Client.Close(ctx) stops watchdogs and
// the subscription, then waits within ctx for background cleanups.
//
// # Unknown outcomes
//
// A call whose reply was lost (ErrUnknownOutcome) is made sure in the
// background. Every request that ends a hold names its record: a release,
// the undo of an acquire whose reply was lost, the give-back of an acquire
// too few replicas acknowledged, and a waiter's leave are one script that
// ends hold <id> and does nothing when that record is gone, so landing
// twice, late or at the same time as another is harmless. A request that
// makes a record (an acquire, a reentry) whose reply was lost may still
// land after its sender gave up (held by a paused server, held in transit
// as a TCP retransmit is, or behind the cleanup on another connection):
// its cleanup buries the call's id (the sorted set {key}:gone, each id for
// an hour, or two TTLs if longer) in the same script that ends its hold
// and leaves its place in line, so the late request takes nothing. A
// renewal whose reply was lost is buried too. Release is single-flight
// per Lease, and Release called again after an unknown outcome sends the
// same request again. An Acquire WithRetry cleans a lost attempt up before
// the next, which gets an id of its own, and says ErrUnknownOutcome when
// it ends without a lease after one. The cleanup keeps trying for a minute
// (or the call's TTL, if longer) while Redis does not answer; a request
// held in transit longer than its bury may still take effect.
//
// The lock never sends a request twice (go-redis is told not to resend a
// script), and a request that was answered is not delivered again (TCP):
// only a request whose reply was lost can land late. A network that
// replays answered requests is outside what it defends against: a replayed
// acquire of a released hold would take the lock again for a TTL.
package lock
