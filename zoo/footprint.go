package zoo

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/internal/rediscmd"
	"github.com/lockproof/lockproof/lock"
	"github.com/lockproof/lockproof/locker"
)

// fencedFootprint is what package lock keeps in Redis for a key
// (lock.RedisKeys), as its scripts write it (lock/scripts.go):
//
//   - Base 7: the lock hash's fixed fields o, n, f, s, p, w (6), and the
//     fence counter (1), which lives an hour past the last grant;
//   - PerHold 1: the hash's record h.<id> of each hold;
//   - PerWaiter 2: a waiter's member of the queue and of the queue
//     deadlines;
//   - PerUnknown 4: a call whose outcome was unknown (or a waiter that gave
//     up in line) is buried (1 member of gone), and until its cleanup has
//     run its hold and its two places may stay;
//   - BuriedFor: a buried id lives an hour (lock's buryLife), buried by
//     a cleanup that keeps trying for a minute after its call returned.
func fencedFootprint() *locker.FootprintBound {
	return &locker.FootprintBound{Base: 7, PerHold: 1, PerWaiter: 2, PerUnknown: 4, BuriedFor: time.Hour + time.Minute}
}

// footprintScript measures keys at once: ARGV[i] says what KEYS[i] is ("h"
// a hash, "z" a sorted set, "s" a string). Returns {records, bytes}:
// records are hash fields, set members and strings; bytes the lengths of
// fields, values and members (8 more per member for its score). It
// changes nothing. (MEMORY USAGE would measure the server's allocation,
// but miniredis, the simulation's Redis, answers with the size of its Go
// values: the two would never agree.)
var footprintScript = rediscmd.NewScript(`
local n, b = 0, 0
for i, k in ipairs(KEYS) do
  local t = ARGV[i]
  if t == 'h' then
    local h = redis.call('HGETALL', k)
    n = n + #h / 2
    for j = 1, #h do b = b + #h[j] end
  elseif t == 'z' then
    local m = redis.call('ZRANGE', k, 0, -1)
    n = n + #m
    for j = 1, #m do b = b + #m[j] + 8 end
  else
    local v = redis.call('GET', k)
    if v then n = n + 1; b = b + #v end
  end
end
return {n, b}
`)

// footprintOf runs footprintScript on rdb over keys, each of the kind
// kinds says ("h", "z", "s").
func footprintOf(ctx context.Context, rdb redis.UniversalClient, keys []string, kinds ...any) (locker.Footprint, error) {
	if err := ctx.Err(); err != nil {
		return locker.Footprint{}, notSent{context.Cause(ctx)}
	}
	v, err := rediscmd.NewSender(rdb).Run(ctx, footprintScript, keys, kinds...)
	if err != nil {
		return locker.Footprint{}, err
	}
	r, ok := v.([]any)
	if !ok || len(r) != 2 {
		return locker.Footprint{}, fmt.Errorf("footprint: unexpected reply %v", v)
	}
	n, ok1 := r[0].(int64)
	b, ok2 := r[1].(int64)
	if !ok1 || !ok2 {
		return locker.Footprint{}, fmt.Errorf("footprint: unexpected reply %v", v)
	}
	return locker.Footprint{Records: n, Bytes: b}, nil
}

// Footprint measures package lock's keys for key (locker.Footprinter):
// the lock hash, the fence counter, the queue and its deadlines, and the
// buried ids, in one script. It reads Redis only, and works after Close.
// ErrUnsupported on the frozen copies, whose keys are laid out otherwise.
func (f *Fenced) Footprint(ctx context.Context, key string) (locker.Footprint, error) {
	if _, ok := f.c.(currentLock); !ok {
		return locker.Footprint{}, fmt.Errorf("%s has no footprint: %w", f.name, locker.ErrUnsupported)
	}
	if ctx == nil || key == "" {
		return locker.Footprint{}, fmt.Errorf("footprint %q: ctx and key are required: %w", key, locker.ErrInvalid)
	}
	k := lock.RedisKeys(f.d.Prefix + key)
	fp, err := footprintOf(ctx, f.d.Redis, []string{k.Lock, k.Fence, k.Queue, k.QueueDeadlines, k.Gone}, "h", "s", "z", "z", "z")
	if err != nil {
		return fp, fail("footprint", key, err)
	}
	return fp, nil
}
