package zoo

import (
	"context"
	"fmt"
	"time"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/locker"
)

// unlockScript is antirez's compare-and-delete ("Distributed locks with Redis").
const unlockScript = `
if redis.call("get", KEYS[1]) == ARGV[1] then
  return redis.call("del", KEYS[1])
else
  return 0
end`

// extendScript is the compare-and-PEXPIRE that Redlock libraries use to extend.
const extendScript = `
if redis.call("get", KEYS[1]) == ARGV[1] then
  return redis.call("pexpire", KEYS[1], ARGV[2])
else
  return 0
end`

// Lua is the single-instance lock of antirez's "Distributed locks with
// Redis" (redis.io): SET key token NX PX ttl with a random token, released
// by a Lua compare-and-delete, renewed by a Lua compare-and-PEXPIRE.
//
// What is wrong: the lease is sound on one master (G1 holds under pauses,
// latency and partitions), but it issues no fencing token, so a holder
// paused past its TTL wakes and writes after the next holder: G2 breaks
// under pause-client for unfenced data (Kleppmann, "How to do distributed
// locking", 2016). Replication is asynchronous, so a failover loses the lock
// and grants it twice: G1 breaks under failover.
type Lua struct{ basic }

// luaEntry is "lua": the lease profile's predictions are its own.
func luaEntry() locker.Entry {
	return locker.Entry{Name: LuaName, Profile: locker.ProfileLease, NotReentrant: true, Open: newLua, Doc: "SET NX PX, owner-checked Lua release; no fencing",
		Decisive: &locker.Decisive{Fault: contract.FaultPauseClient, Property: contract.PropResource}}
}

func newLua(d locker.Deps) (locker.Locker, error) {
	if err := needRedis(d); err != nil {
		return nil, err
	}
	return &Lua{basic{LuaName, d}}, nil
}

// TryAcquire sends SET key token NX PX ttl.
func (l *Lua) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	if err := checkArgs(ctx, key, ttl, true); err != nil {
		return nil, err
	}
	token := newToken()
	if err := l.setNXPX(ctx, key, token, ttl); err != nil {
		return nil, err
	}
	return &lease{key: key, ttl: ttl,
		release: func(ctx context.Context) error { return l.unlock(ctx, key, token) },
		renew:   func(ctx context.Context, ttl time.Duration) error { return l.extend(ctx, key, token, ttl) },
	}, nil
}

func (l *Lua) unlock(ctx context.Context, key, token string) error {
	cmd, err := runScript(ctx, l.d.Redis, unlockScript, []string{l.rkey(key)}, token)
	if err != nil {
		return fail("release", key, err)
	}
	if n, _ := cmd.Int64(); n != 1 {
		return fmt.Errorf("release %q: expired or taken: %w", key, locker.ErrNotHeld)
	}
	return nil
}

func (l *Lua) extend(ctx context.Context, key, token string, ttl time.Duration) error {
	cmd, err := runScript(ctx, l.d.Redis, extendScript, []string{l.rkey(key)}, token, ms(ttl))
	if err != nil {
		return fail("renew", key, err)
	}
	if n, _ := cmd.Int64(); n != 1 {
		return fmt.Errorf("renew %q: expired or taken: %w", key, locker.ErrNotHeld)
	}
	return nil
}

// Watchdog is Lua plus a goroutine that renews the lease every TTL/3, as
// Redisson's lock watchdog does (and as many hand-written locks do). The
// first failed renewal (refused, or an error: Redisson stops too) stops it
// and closes Lost. Release and Close stop the watchdogs; Close models the
// client crashing (its leases then expire after their TTL). Every renewal is
// announced to locker.Deps.Observer.
//
// What is wrong: renewal keeps a live but slow holder's lease, yet a holder
// paused longer than the TTL (a stop-the-world pause also stops its
// watchdog) still wakes after the lock went to another: without fencing G2
// breaks under pause-client; Lost only fires after the fact. As Lua, a
// failover loses the lock (G1 under failover). And its renewal sets the
// lease's TTL (PEXPIRE), shortening a longer one the holder asked for
// (Lease.Renew with a longer TTL): once the watchdog stops (its client
// paused or crashed, or a renewal failed) the key expires before the longer
// renewal promised (G1; the simulation's seed 434).
type Watchdog struct {
	Lua
	runs watchdogs
}

// watchdogEntry is "watchdog". Its first failed renewal (TTL/3 in, given
// TTL/3 to answer) is its loss notice.
func watchdogEntry() locker.Entry {
	return locker.Entry{Name: WatchdogName, Profile: locker.ProfileLease, NotReentrant: true, Open: newWatchdog, Doc: "lua with a renewal every TTL/3; no fencing",
		LossBound: func(ttl time.Duration) time.Duration { return ttl/3 + watchdogLossBound(ttl) },
		Decisive:  &locker.Decisive{Fault: contract.FaultPauseClient, Property: contract.PropResource},
		Predict: func(fault string, p locker.Prediction) locker.Prediction {
			if stopsWatchdog(fault) {
				mayBreak(&p, contract.PropLease)
				before(&p, whyShortened)
			}
			return p
		}}
}

// whyShortened: the watchdog's renewal shortens a longer one (Watchdog).
const whyShortened = "a watchdog renewal for the lease's TTL shortens a longer renewal the holder made; when the watchdog stops (its client paused or crashed, or a renewal failed) the key expires before the longer renewal promised"

// stopsWatchdog reports whether fault, of those the contract predicts, can
// stop a watchdog's renewals: its client stops, or a renewal fails or
// times out.
func stopsWatchdog(fault string) bool {
	t := traitsOf(fault)
	return t.Predicted && (t.StopsClients || t.Delays)
}

func newWatchdog(d locker.Deps) (locker.Locker, error) {
	if err := needRedis(d); err != nil {
		return nil, err
	}
	return &Watchdog{Lua: Lua{basic{WatchdogName, d}}}, nil
}

// TryAcquire takes the lock as Lua does and starts the lease's watchdog.
func (w *Watchdog) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	if err := checkArgs(ctx, key, ttl, true); err != nil {
		return nil, err
	}
	if w.runs.isClosed() {
		return nil, fmt.Errorf("acquire %q: locker closed: %w", key, locker.ErrInvalid)
	}
	token := newToken()
	if err := w.setNXPX(ctx, key, token, ttl); err != nil {
		return nil, err
	}
	lost := make(chan struct{})
	// Not started if closed while acquiring: the client "crashed"; the lease
	// is left to expire.
	run := w.runs.start(context.Background(), func(ctx context.Context) { w.renewLoop(ctx, key, token, ttl, lost) })
	return &lease{key: key, ttl: ttl, lost: lost,
		release: func(ctx context.Context) error {
			run.stop()
			return w.unlock(ctx, key, token)
		},
		renew: func(ctx context.Context, ttl time.Duration) error { return w.extend(ctx, key, token, ttl) },
	}, nil
}

func (w *Watchdog) renewLoop(ctx context.Context, key, token string, ttl time.Duration, lost chan struct{}) {
	period := max(ttl/3, time.Millisecond)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, period)
		done := w.d.Observe(key, ttl, 0, false)
		err := w.extend(rctx, key, token, ttl)
		done(err)
		cancel()
		if err != nil {
			if ctx.Err() != nil { // stopped while renewing: not a loss
				return
			}
			w.d.Logger.Warn("watchdog: renewal failed; lease lost", "key", key, "err", err)
			close(lost)
			return
		}
	}
}

// Close stops every watchdog this locker.Locker started; their leases expire after
// their TTL, as if the client had crashed.
func (w *Watchdog) Close() error {
	w.runs.stopAll()
	return nil
}
