package fencedv2

import "github.com/lockproof/lockproof/internal/rediscmd"

// The lock is a hash at Keys.Lock: o = owner token, n = hold count, f = fence.
// The Lua scripts below are the only code that writes it.

// The scripts share two blocks of helpers; neither runs a command itself, so
// a fast path pays only for the commands it needs. They expect KEYS lock,
// fence, queue, queue deadlines. Queue members are "<ttl ms>:<owner token>".
//
// luaPrelude, at the top of each script (after the fast path in release):
//   - clock sets us (µs, as a number and as the decimal string uss) and now
//     (ms) from the server clock (TIME).
//   - grant gives the lock to tok: fence = max(counter+1, server µs), read
//     and written by one SET ... PX ... GET in the usual case that the clock
//     is ahead, then HSET o, n, f (every field of the hash, so no DEL is
//     needed) and PEXPIRE. The counter lives an hour (or two TTLs, if
//     longer) past the last grant: a lock name used once does not leave a
//     key behind for good, and tokens stay monotonic, because a fence is
//     never more than a few µs ahead of the server clock that issued it, so
//     once the counter is gone the clock alone is above every earlier fence
//     (unless the server's clock stepped back by an hour).
//
// luaQueue, after a script's fast path (defining fewer functions on the
// fast path saves server time):
//   - dropDead drops waiters whose place expired (a crashed waiter cannot
//     block the queue for long).
//   - handoff grants the lock to the first waiter and publishes
//     "<token>:<fence>" on chan, or deletes the lock when nobody waits.
//
// The scripts need Redis >= 6.2 (SET ... GET). They read TIME before
// writing, which Redis replicates correctly since 5.0 (effects replication
// is the default), so they do not call redis.replicate_commands().
// Each redis.call costs a few µs of server time, and string.format more than
// a concatenation: the uncontended paths keep both to a minimum.
const luaPrelude = `
local us, uss, now
local function clock()
  local t = redis.call('TIME')
  uss = t[1] .. string.sub('00000' .. t[2], -6)
  us = tonumber(uss)
  now = math.floor(us / 1000)
end
local function grant(tok, ttl)
  if not us then clock() end
  local f, fs = us, uss
  local life = math.max(2 * tonumber(ttl), 3600000)
  local prev = tonumber(redis.call('SET', KEYS[2], fs, 'PX', life, 'GET') or '0') + 1
  if prev > f then
    f, fs = prev, string.format('%.0f', prev)
    redis.call('SET', KEYS[2], fs, 'PX', life)
  end
  redis.call('HSET', KEYS[1], 'o', tok, 'n', 1, 'f', fs)
  redis.call('PEXPIRE', KEYS[1], ttl)
  return f, fs
end
`

// luaExtend defines extend(ttl): the lock lives at least ttl ms more, and
// never less than it already had. A nested hold or a renewal with a shorter
// TTL than another hold's must not shorten the lease: every hold's validity
// (and its ValidUntil) stays true. (PEXPIRE ... GT would do it in one
// command, but needs Redis 7.)
const luaExtend = `
local function extend(ttl)
  if redis.call('PTTL', KEYS[1]) < tonumber(ttl) then
    redis.call('PEXPIRE', KEYS[1], ttl)
  end
end
`

// luaQueue: see luaPrelude. Every script that loads it passes the hand-off
// lease (ms) as its last ARGV.
const luaQueue = `
local function dropDead()
  local dead = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, 100)
  if #dead > 0 then
    redis.call('ZREM', KEYS[3], unpack(dead))
    redis.call('ZREM', KEYS[4], unpack(dead))
  end
end
local function handoff(chan)
  local ho = tonumber(ARGV[#ARGV])
  while true do
    local head = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
    if not head then
      redis.call('DEL', KEYS[1])
      return ''
    end
    redis.call('ZREM', KEYS[3], head)
    redis.call('ZREM', KEYS[4], head)
    local ttl, tok = string.match(head, '^(%d+):(.+)$')
    if tok then
      local _, fs = grant(tok, math.min(tonumber(ttl), ho))
      local msg = tok .. ':' .. fs
      redis.call('PUBLISH', chan, msg)
      return msg
    end
  end
end
local function growExpire(key, ttl)
  if redis.call('PTTL', key) < ttl then
    redis.call('PEXPIRE', key, ttl)
  end
end
`

// acquireScript: KEYS lock, fence, queue, queue deadlines.
// ARGV token, ttl ms, mode ("w": join the queue on failure, "t": don't),
// queue ttl ms, reentrant ("1": same owner increments the hold count,
// "0": same owner is an idempotent retry, or a hand-off being picked up),
// channel, hand-off lease ms.
// Returns {1, fence, holds} when acquired, {0, pttl of the lock} when not.
//
// Fast path: when neither the lock nor the queue exists (uncontended), it
// grants at once (EXISTS, TIME, SET ... GET of the fence, HSET, PEXPIRE).
// Otherwise it reads the clock, drops expired waiters, and then grants to
// the owner (reentrancy, or confirming a hand-off: the lease gets its full
// TTL), to the head of the queue, or queues the caller. A free lock whose
// queue head is someone else is handed to that head (a provisional lease,
// published): a head that died in line holds it up for one hand-off lease.
//
// The fence is max(counter+1, server time in µs): it strictly increases on one
// master, and after a failover that lost the counter it still exceeds every
// earlier fence as long as the servers' clocks agree within the failover time.
var acquireScript = rediscmd.NewScript(luaPrelude + `
if redis.call('EXISTS', KEYS[1], KEYS[3]) == 0 then
  local f = grant(ARGV[1], ARGV[2])
  return {1, f, 1}
end
` + luaQueue + luaExtend + `
clock()
dropDead()
local owner = redis.call('HGET', KEYS[1], 'o')
if owner == ARGV[1] then
  local n = tonumber(redis.call('HGET', KEYS[1], 'n'))
  if ARGV[5] == '1' then n = redis.call('HINCRBY', KEYS[1], 'n', 1) end
  extend(ARGV[2])
  return {1, tonumber(redis.call('HGET', KEYS[1], 'f')), n}
end
local member = ARGV[2] .. ':' .. ARGV[1]
if not owner then
  local head = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
  if head == nil or head == member then
    if head then
      redis.call('ZREM', KEYS[3], member)
      redis.call('ZREM', KEYS[4], member)
    end
    local f = grant(ARGV[1], ARGV[2])
    return {1, f, 1}
  end
  handoff(ARGV[6])
end
if ARGV[3] == 'w' then
  local qttl = tonumber(ARGV[4])
  redis.call('ZADD', KEYS[3], 'NX', us, member)
  redis.call('ZADD', KEYS[4], now + qttl, member)
  growExpire(KEYS[3], qttl)
  growExpire(KEYS[4], qttl)
end
return {0, redis.call('PTTL', KEYS[1])}
`)

// releaseScript: KEYS lock, fence, queue, queue deadlines. ARGV token,
// channel, hand-off lease ms.
// Returns {-1} when the token does not hold the lock, {remaining holds}
// otherwise. At zero holds it hands the lock to the first waiter, publishing
// "<token>:<fence>" on the channel, and returns {0, that message}; with
// nobody waiting it deletes the lock and returns {0, ""}. The waiter gets a
// provisional lease (the hand-off lease, at most its TTL) that it confirms
// on pickup.
//
// Fast path: the last hold released with no queue key is HMGET, EXISTS, DEL;
// only when a queue exists does it read the clock and drop expired waiters
// before the hand-off.
var releaseScript = rediscmd.NewScript(`
local h = redis.call('HMGET', KEYS[1], 'o', 'n')
if h[1] ~= ARGV[1] then return {-1} end
if (tonumber(h[2]) or 1) > 1 then return {redis.call('HINCRBY', KEYS[1], 'n', -1)} end
if redis.call('EXISTS', KEYS[3]) == 0 then
  redis.call('DEL', KEYS[1])
  return {0, ''}
end
` + luaPrelude + luaQueue + `
clock()
dropDead()
return {0, handoff(ARGV[2])}
`)

// renewScript: KEYS lock. ARGV token, ttl ms. Returns 1 when renewed (the
// key now lives at least ttl more), 0 when not held.
var renewScript = rediscmd.NewScript(luaExtend + `
if redis.call('HGET', KEYS[1], 'o') == ARGV[1] then
  extend(ARGV[2])
  return 1
end
return 0
`)

// leaveScript: KEYS lock, fence, queue, queue deadlines. ARGV token, channel,
// ttl ms, "1" when the token is fresh (not given WithOwner), hand-off lease ms. A waiter that
// gives up leaves the queue; if the lock was already handed to its fresh
// token, it passes the lock on to the next waiter.
var leaveScript = rediscmd.NewScript(luaPrelude + luaQueue + `
clock()
dropDead()
local member = ARGV[3] .. ':' .. ARGV[1]
redis.call('ZREM', KEYS[3], member)
redis.call('ZREM', KEYS[4], member)
if ARGV[4] == '1' and redis.call('HGET', KEYS[1], 'o') == ARGV[1] then
  handoff(ARGV[2])
  return 1
end
return 0
`)

// ttlScript: KEYS lock. ARGV token. Returns the lock's PTTL (ms) when the
// token holds it, -1 otherwise.
var ttlScript = rediscmd.NewScript(`
if redis.call('HGET', KEYS[1], 'o') == ARGV[1] then
  return redis.call('PTTL', KEYS[1])
end
return -1
`)

// inspectScript: KEYS lock, queue. Returns {owner or ”, holds, fence or ”,
// pttl, queue length}.
var inspectScript = rediscmd.NewScript(`
local h = redis.call('HMGET', KEYS[1], 'o', 'n', 'f')
return {h[1] or '', tonumber(h[2] or '0'), h[3] or '', redis.call('PTTL', KEYS[1]), redis.call('ZCARD', KEYS[2])}
`)

// forceUnlockScript: KEYS lock, fence, queue, queue deadlines. ARGV
// channel, hand-off lease ms. Frees the lock whoever holds it: hands it to
// the first live waiter or deletes it; the fence counter stays. Returns
// {1 when it was held else 0, the hand-off message or ”}.
var forceUnlockScript = rediscmd.NewScript(luaPrelude + luaQueue + `
local held = redis.call('EXISTS', KEYS[1])
clock()
dropDead()
return {held, handoff(ARGV[1])}
`)
