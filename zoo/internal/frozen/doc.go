// Package frozen holds frozen copies of package lock, kept by the zoo
// ("fenced-v1", "fenced-v2") to show, run after run, that the harness
// catches the defects review found in the lock as it once was. They are
// not code to read for how the lock works, nor to fix: the lock is
// package lock. A grep for lock code that means the lock we ship can leave
// this folder out (grep -r --exclude-dir=frozen).
//
// Why copies and not deltas of package lock: most of their defects sit in
// the middle of its scripts and its cleanup (a PEXPIRE that takes the
// caller's TTL, a release sent on a canceled context), which no flag of
// the shipped lock could switch back without putting the defect within
// reach of its users.
package frozen
