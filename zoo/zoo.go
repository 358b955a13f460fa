// Package zoo holds lock algorithms from the literature that are known to be
// broken, kept to prove that lockproof's harness catches them, and the
// registry of every lock the harness knows by name (Builtin), the
// production lock's adapter among them. Each lock is driven through
// package locker's interface, as a user's own lock is.
//
// The specimens are kept faithful to their sources on purpose: neither
// accidentally correct nor more broken than the published version. Each
// one's doc comment cites where it comes from, says what is wrong with it,
// and under which fault it breaks; its locker.Entry says it in a line
// (Doc) and predicts it (Predict). The table of every built-in lock is
// made from those entries, not kept by hand: docs/HARNESS.md's "The
// built-in locks" (TestDocsTablesMatchTheCatalogues regenerates and checks
// it), and `lockproof run --plan` names the locks a run takes.
package zoo

import (
	"context"
	"fmt"
	"time"

	"github.com/lockproof/lockproof/lock"
	"github.com/lockproof/lockproof/locker"
)

// The built-in locks' names, spelled once: the registry's, summary.json's,
// the CLI's and the reports' (FencedName is the shipped lock's).
const (
	SetNXName       = "setnx"
	SetNXExpireName = "setnx-expire"
	SetDelName      = "set-del"
	GetDelName      = "get-del"
	GetSetName      = "getset"
	LuaName         = "lua"
	WatchdogName    = "watchdog"
	ReentrantName   = "reentrant"
	RedlockName     = "redlock"
	LocalRedisName  = "local-redis"
	FencedV1Name    = "fenced-v1"
	FencedV2Name    = "fenced-v2"
)

// Builtin returns a new registry of every lock lockproof knows by name, in
// matrix order: the specimens, then the production lock with its defaults
// (FencedEntry). Add your own entries to it, or build a registry of your own
// with locker.NewRegistry.
func Builtin() *locker.Registry {
	r := &locker.Registry{}
	for _, e := range []locker.Entry{
		setNXEntry(), setNXExpireEntry(), setDelEntry(), getDelEntry(), getSetEntry(),
		luaEntry(), watchdogEntry(), reentrantEntry(), RedlockEntry(RedlockOptions{}), localRedisEntry(),
		FencedEntry(lock.Options{Watchdog: true}),
		FencedAcksEntry(lock.Options{Watchdog: true}),
		fencedV1Entry(),
		fencedV2Entry(),
		FencedRWEntry(lock.Options{}),
		FencedSemEntry(lock.Options{}),
		rwUnlockDeletesEntry(), rwShortReentryEntry(), semNoExpiryEntry(), semGetSetEntry(),
	} {
		if err := r.Add(e); err != nil {
			panic(err) // the entries above are constants of this package
		}
	}
	return r
}

// needRedis checks Deps.Redis.
func needRedis(d locker.Deps) error {
	if isNil(d.Redis) {
		return fmt.Errorf("Deps.Redis is nil: %w", locker.ErrInvalid)
	}
	return nil
}

// checkArgs validates the arguments of an acquire.
func checkArgs(ctx context.Context, key string, ttl time.Duration, needTTL bool) error {
	if ctx == nil {
		return fmt.Errorf("acquire %q: ctx is nil: %w", key, locker.ErrInvalid)
	}
	if key == "" {
		return fmt.Errorf("acquire: key is empty: %w", locker.ErrInvalid)
	}
	if needTTL && ttl < time.Millisecond {
		return fmt.Errorf("acquire %q: ttl = %v: must be at least 1ms: %w", key, ttl, locker.ErrInvalid)
	}
	return nil
}

func checkTTL(op, key string, ttl time.Duration) error {
	if ttl < time.Millisecond {
		return fmt.Errorf("%s %q: ttl = %v: must be at least 1ms: %w", op, key, ttl, locker.ErrInvalid)
	}
	return nil
}
