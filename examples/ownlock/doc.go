// Package ownlock is the "Running your own lock" example of docs/OWN-LOCK.md, as a package
// of its own so that it is safe to copy: ownlock_test.go adapts a SET NX PX
// lock with owner-checked Lua scripts to package locker and runs it under
// the matrix with lockproof.Run (TestMyLockUnderChaos); polling_test.go
// gives it a blocking acquire that polls, as most Redis locks wait
// (TestMyPollingLockUnderChaos). docs/OWN-LOCK.md holds both files verbatim
// (TestREADMEShowsTheExample in the root package).
package ownlock
