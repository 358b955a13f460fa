// Package fencedv2 is a frozen copy of package lock as it was at commit
// 894adc3, before the defects that the review of what the lock tells its
// user found in it were fixed, with package fencing's Redis resource as it
// was then (Resource: it ignores the ctx of a go-redis client that does). It is not a lock to use: the zoo keeps it
// ("fenced-v2") so that the harness shows, run after run, that it catches
// them. Do not fix it; fix package lock, and let this copy keep failing.
//
// What is wrong with it, as far as a history can show:
//
//   - a Release with an unknown outcome leaves the lease claiming its
//     validity (Context live, Lost open, ValidUntil a TTL ahead) while the
//     next waiter already holds the lock (claims: claim-overlap);
//   - a Release racing a watchdog renewal closes Lost on a lease the
//     Release then reports released (loss notice: false-notice);
//   - and the rest of the review of package lock (issue 26): starvation
//     under churn, a WithOwner waiter counted twice, a stale subscription
//     after a pub/sub reset, a lost lease's Release freeing a newer hold of
//     its owner, Close blocking on a frozen Redis, every waiter woken per
//     hand-off, Acquire after Close, an orphan hold after an unknown
//     reentrant acquire.
package fencedv2
