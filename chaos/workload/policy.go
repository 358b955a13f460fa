package workload

import "time"

// The workload's fixed policies: choices made by a client's or a
// section's number, not drawn from a stream. A draw would shift every
// later draw of a saved seed and the finding it was saved for; a number
// shifts nothing, and a seed still replays.

// honoursCtxDeadlines is whether the go-redis clients of the client
// numbered idx honour ctx deadlines (ContextTimeoutEnabled): the
// even-numbered do. The others ignore them (their read timeout alone
// bounds a call), as many users' clients do: a lock, or a resource, must
// then honour ctx itself; with both kinds among every key's clients, a
// lock that leans on either shows.
func honoursCtxDeadlines(idx uint64) bool { return idx%2 == 0 }

// retriesInstead is whether the blocking acquire of the section numbered
// seq retries one-shot attempts instead of waiting in line (Mix.Retry,
// share): the sections fall in quarters by their number, 1 mod 4 the
// first, 2 mod 4 the second, and so on, and a section retries when the
// quarters before its own are less than the share: 0.25 (the default)
// is the sections 1 mod 4, 0.5 adds those 2 mod 4, 1 is every one.
func retriesInstead(seq int, share float64) bool { return float64((seq+3)%4)/4 < share }

// renewsForTwice is whether the explicit renewal of the section numbered
// seq asks for twice the TTL (package lock's RenewFor: the lease's TTL
// from then on, watchdog included) rather than the TTL: every third
// section's.
func renewsForTwice(seq int) bool { return seq%3 == 0 }

// twiceStagger is how long an owner's second wait (Mix.Twice) starts
// after the first, by its hold number (1 to 89µs): two goroutines acting
// at one virtual instant run in an order Go does not fix, and a seed
// would not replay.
func twiceStagger(hold uint64) time.Duration { return time.Duration(hold%89+1) * time.Microsecond }

// twiceWork is how long an owner's second wait, once granted, works
// before it releases, by its hold number (0 to 6ms): a brief section of
// its own.
func twiceWork(hold uint64) time.Duration { return time.Duration(hold%7) * time.Millisecond }
