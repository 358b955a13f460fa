package workload

import (
	"fmt"
	"strconv"
	"strings"
)

// Mix is the share of each choice a client makes per critical section,
// each a probability in [0, 1] drawn from the client's seeded stream.
type Mix struct {
	// Blocking: acquires that wait (locker.Waiter) instead of one attempt.
	Blocking float64
	// Cancel: blocking acquires given a deadline of half the TTL instead of
	// the op timeout, so that they are canceled while they wait in line.
	Cancel float64
	// Reenter: sections that take a nested hold (locker.Reentrant) and
	// release it before the read; two in three ask for a TTL a fifth of
	// the lease's (at least 10ms), one in three for twice it. The outer
	// hold then works on for up to half the TTL.
	Reenter float64
	// Renew: sections that renew the lease explicitly after the acquire.
	Renew float64
	// LongWork: sections without a nested hold that work up to half the
	// TTL before the read (a lease must stay valid that long).
	LongWork float64
	// RushRelease: releases, outer and nested, sent with an already
	// canceled context (half) or a 5ms deadline (half); a release that
	// did not surely happen is sent again with the op timeout, as a
	// careful caller retries.
	RushRelease float64
	// Owner: sections that acquire as the client's own owner
	// (locker.Owned: one owner per client, kept across its holds), with
	// a blocking or a one-shot acquire as the other shares say. When such
	// a holder finds its lease gone at its check before the write, it
	// acquires again as the same owner before it releases the lost lease,
	// as code that defers a release and retries does: the lost lease's
	// release must not free the newer hold.
	Owner float64
	// Leave: sections after whose acquire the client leaves for good,
	// holding: it closes its Locker (watchdogs stop, leases stay until
	// they expire) and stops. Default 0: a fault that waits for a client
	// to hold or wait in line needs the clients to stay.
	// CloseWaiting: sections after whose acquire the client shuts down
	// for good while another of its goroutines waits in line behind its
	// hold (a blocking acquire of its own, half of them without the
	// watchdog when the lock can, locker.Unwatched): it closes its
	// Locker, releases its hold, waits for the waiter and stops
	// (Workload.shutDown). The release hands the lock on, to the waiter
	// when it is first in line: after Close, which a lock that promises
	// it must refuse (the calls property). Drawn from the side stream
	// (only by a lock with a blocking acquire); default 0, as Leave.
	CloseWaiting float64
	Leave        float64
	// Context: holds whose holder, as code that runs its work in the
	// lease's context does, watches and checks the lease's Context
	// (locker.Contexter) instead of Lost: told of a loss when it is
	// canceled (the loss notice), and writing only while it is live. A
	// lock that closes Lost but leaves Context live then shows.
	Context float64
	// Twice: of the blocking acquires as the client's owner, those
	// beside which the owner waits a second time at once, on the same key
	// from another goroutine, as two goroutines of one service sharing an
	// owner id do. Each wait has its own place in line (a lock whose
	// places are per owner lets a place left behind jump the line later),
	// and the second, once granted, works briefly and releases, whatever
	// the first does meanwhile (a lock whose hand-offs are per owner lets
	// it take the one given at the first wait's place, and the first
	// falls behind the next client).
	Twice float64
	// Inspect: of the sections of a lock that tells who holds a key
	// (locker.Inspector), those that ask it, before the acquire and again
	// while holding (and, as the client's owner, its hold count), as
	// operators and code checking isHeldByThread do; the lease property
	// holds the answers to the history.
	Inspect float64
	// Concurrent: of the releases in a section (a nested hold's and the
	// lease's), those beside which a second call on the same lease runs
	// at once from another goroutine, as two paths of one program do (a
	// deferred release and an error path; a renewal loop and the code
	// that is done): half a second Release, half a Renew. At most one
	// Release ends the hold; the other must say it did not (a lock whose
	// second release ends another hold of the owner, a nested lease's
	// outer one, frees the key under a valid lease: the lease and claims
	// properties).
	Concurrent float64
	// TTL: of the sections of a lock whose leases ask its server how long
	// they are still valid (locker.ServerClaimer: package lock's TTLLeft,
	// bsm/redislock's TTL), those that ask, as code checking its lock
	// does: the lease once acquired, a nested hold while held and again
	// after its release (with its outer lease), and the lease after its
	// release; an ask after a release is made only when the release
	// succeeded. Each answer is recorded (a ttl op) and judged as a claim
	// (the claims property): a released lease said to be valid is a false
	// claim. Drawn from the side stream; default 0, so that the saved
	// seeds replay as they were.
	TTL float64
	// Retry: of the blocking acquires not as the client's owner, of a
	// lock that can retry one-shot attempts (locker.Retrier), those that
	// do so instead of waiting in line, chosen by the section's number
	// in quarters (no draw: 0.25, the default, is one in four, as before
	// the share existed; 1 is every one). The shipped lock's adapter
	// gives every other such call a strategy that gives up as package
	// lock's example does.
	Retry float64

	_ struct{}
}

// DefaultMix is the mix `go test ./chaos` and `lockproof run` use.
func DefaultMix() Mix {
	return Mix{Blocking: 0.5, Cancel: 0.2, Reenter: 0.4, Renew: 0.2, LongWork: 0.15, RushRelease: 0.1, Owner: 0.3, Context: 0.3, Twice: 0.2, Inspect: 0.2,
		Concurrent: 0.15, Retry: 0.25}
}

// share is one choice of a Mix by its name (the CLI's --mix).
type share struct {
	name string
	p    *float64
}

func (m *Mix) shares() []share {
	return []share{{"blocking", &m.Blocking}, {"cancel", &m.Cancel}, {"reenter", &m.Reenter}, {"renew", &m.Renew},
		{"long-work", &m.LongWork}, {"rush-release", &m.RushRelease}, {"owner", &m.Owner}, {"leave", &m.Leave}, {"close-waiting", &m.CloseWaiting}, {"context", &m.Context},
		{"twice", &m.Twice}, {"inspect", &m.Inspect}, {"concurrent", &m.Concurrent}, {"ttl", &m.TTL}, {"retry", &m.Retry}}
}

func (m *Mix) validate() error {
	for _, sh := range m.shares() {
		if !(*sh.p >= 0 && *sh.p <= 1) {
			return fmt.Errorf("%w: mix %s = %v: must be in [0, 1]", ErrConfig, sh.name, *sh.p)
		}
	}
	return nil
}

// String is the mix as ParseMix reads it: "blocking=0.5,cancel=0.2,...".
func (m Mix) String() string {
	var parts []string
	for _, sh := range m.shares() {
		parts = append(parts, sh.name+"="+strconv.FormatFloat(*sh.p, 'g', -1, 64))
	}
	return strings.Join(parts, ",")
}

// ParseMix reads "name=share,..." (the names of Mix.String) over
// DefaultMix: the choices not named keep their default share.
func ParseMix(s string) (Mix, error) {
	m := DefaultMix()
	if strings.TrimSpace(s) == "" {
		return m, nil
	}
	for _, part := range strings.Split(s, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		var target *float64
		for _, sh := range m.shares() {
			if sh.name == name {
				target = sh.p
			}
		}
		if !ok || target == nil {
			return m, fmt.Errorf("%w: mix %q: want name=share with name one of %s", ErrConfig, part, m.String())
		}
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			return m, fmt.Errorf("%w: mix %s=%q: not a number", ErrConfig, name, val)
		}
		*target = v
	}
	return m, m.validate()
}

// chance draws one choice of share p from c's stream.
func (c *Client) chance(p float64) bool { return p > 0 && c.rng.Float64() < p }

// beside draws the second call made beside a release (Mix.Concurrent):
// besideNone, besideRelease or besideRenew, from the side stream.
func (c *Client) beside(m *Mix) int {
	if !(m.Concurrent > 0 && c.side.Float64() < m.Concurrent) {
		return besideNone
	}
	return besideRelease + c.side.IntN(2)
}

// sideStream marks a client's side stream apart from its main one.
const sideStream = 1 << 40
