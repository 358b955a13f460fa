// Package fencedv1 is a frozen copy of package lock as it was at commit
// 5b31d9a, before the defects that review found in it were fixed. It is not
// a lock to use: the zoo keeps it ("fenced-v1") so that the harness can show,
// run after run, that it catches what was wrong with the lock lockproof
// ships. Do not fix it; fix package lock, and let this copy keep failing.
//
// What is wrong with it, as far as a history can show:
//
//   - a nested acquire (WithOwner) or a renewal with a shorter TTL shortens
//     the whole lock: its PEXPIRE takes the caller's TTL, so another client
//     can take the key while the outer lease is still valid (G1);
//   - a crashed waiter can be handed the lock and keep it for a whole TTL;
//   - the queue's expiry follows whichever waiter refreshed it last;
//   - a lease received by hand-off counts its validity from the waiter's
//     last attempt, so it can be born nearly expired;
//   - Release with a canceled context marks the lease released without
//     sending anything, so the key stays held for its TTL;
//   - cleanup after an ambiguous acquire runs on fresh contexts, so calls
//     overshoot their deadlines.
package fencedv1
