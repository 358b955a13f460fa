package lock

import "github.com/lockproof/lockproof/internal/rediscmd"

// The lock is a hash at Keys.Lock with one record per hold:
//
//	o     the owner token
//	f     the fence
//	n     how many hold records there are
//	s     a sequence that orders the holds (for metadata; absent until
//	      a second hold: the first is number 0)
//	p     the id of the call a hand-off was given to, until that call
//	      picks it up (a provisional hold)
//	w     "1" when somebody may be in line (absent or "0": nobody is)
//	h.<id> one field per hold, named by the id of the call that made
//	      it: "<seq>|<metadata>"
//
// Every hold (an outer one, a nested one by Reenter or a second acquire
// WithOwner, a hand-off) is its own record, so that every request that
// ends a hold names it: a release, the undo of an acquire whose reply was
// lost, the give-back of an acquire too few replicas acknowledged and a
// waiter's leave are one script, endScript, "end hold <id>", which does
// nothing when that record is absent. A second, late or concurrent
// delivery of any of them is a no-op by construction, and no request can
// end a hold that is not its own. The lock is freed when its last record
// ends; a hand-off deletes the hash before it writes the next holder's,
// so nothing of the previous holder survives it.
//
// A request that makes a record (an acquire, a reentry) and whose reply
// was lost may still be on its way when its cleanup runs: the cleanup
// buries the call's id (Keys.Gone, a sorted set scored by each id's own
// expiry, an hour after its bury, trimmed at every bury), in the same
// script that ends its hold and leaves its place, so a request of the call
// that lands later takes nothing. Buried ids expire one by one: the set
// holds the ids buried in the last hour, never more.
//
// The Lua scripts below are the only code that writes these keys;
// tla/LockHolds.tla models them, and tla/README.md maps every branch to
// its action.
//
// w spares the usual release a command (the EXISTS on the queue): a call
// that joins the line while the lock is held or just handed sets it, and
// a grant sets it from the queue it leaves behind, so a held lock with
// somebody in line always says so (tla/LockQueue.tla: WaitFlag). It may
// say "1" with nobody left (a waiter that gave up or expired): the
// release then looks at the queue.
//
// The scripts expect KEYS lock, fence, queue, queue deadlines, gone.
// Queue members are "<ttl ms>#<call id>:<owner token>": each call has a
// place of its own, so an owner's new wait never takes over a place its
// earlier one left behind.
//
// luaPrelude:
//   - clock sets us (µs, as a number and as the decimal string uss) and now
//     (ms) from the server clock (TIME).
//   - grant gives the lock to tok as the hold id: fence = max(counter+1,
//     server µs), read and written by one SET ... PX ... GET in the usual
//     case that the clock is ahead, then one HSET of every field (the
//     first hold is number 0, so s waits for a second) and PEXPIRE. A hand-off (handed) also sets p, the mark of a provisional
//     hold that the call's pickup confirms. The counter lives an hour (or
//     two TTLs, if longer) past the last grant: a lock name used once does
//     not leave a key behind for good, and fences stay monotonic, because
//     a fence is never more than a few µs ahead of the server clock that
//     issued it, so once the counter is gone the clock alone is above
//     every earlier fence (unless the server's clock stepped back by an
//     hour).
//
// The scripts need Redis >= 6.2 (SET ... GET). They read TIME before
// writing, which Redis replicates correctly since 5.0 (effects replication
// is the default). Each redis.call costs a few µs of server time, and
// string.format more than a concatenation: the uncontended paths keep
// both to a minimum, and define the helpers they do not need only past
// their fast path.
const luaPrelude = luaClock + luaFence + `
local function grant(tok, ttl, id, md, handed, w)
  if not us then clock() end
  local f, fs = newFence(ttl)
  if handed then
    redis.call('DEL', KEYS[1])
    redis.call('HSET', KEYS[1], 'o', tok, 'n', 1, 'f', fs, 'p', id, 'h.' .. id, '0|', 'w', w or '0')
  elseif w then
    redis.call('HSET', KEYS[1], 'o', tok, 'n', 1, 'f', fs, 'h.' .. id, '0|' .. md, 'w', w)
  else
    redis.call('HSET', KEYS[1], 'o', tok, 'n', 1, 'f', fs, 'h.' .. id, '0|' .. md)
  end
  redis.call('PEXPIRE', KEYS[1], ttl)
  return f, fs
end
`

// luaClock defines clock() (see luaPrelude), shared by every kind's scripts.
const luaClock = `
local us, uss, now
local function clock()
  local t = redis.call('TIME')
  uss = t[1] .. string.sub('00000' .. t[2], -6)
  us = tonumber(uss)
  now = math.floor(us / 1000)
end
`

// luaFence defines newFence(ttl): the next fence of the key, as a number
// and as a decimal string (see luaPrelude's grant); needs clock().
const luaFence = `
local function newFence(ttl)
  local f, fs = us, uss
  local life = math.max(2 * tonumber(ttl), 3600000)
  local prev = tonumber(redis.call('SET', KEYS[2], fs, 'PX', life, 'GET') or '0') + 1
  if prev > f then
    f, fs = prev, string.format('%.0f', prev)
    redis.call('SET', KEYS[2], fs, 'PX', life)
  end
  return f, fs
end
`

// luaGrow defines growExpire(key, ttl): key lives at least ttl ms more,
// never less than it had.
const luaGrow = `
local function growExpire(key, ttl)
  if redis.call('PTTL', key) < tonumber(ttl) then
    redis.call('PEXPIRE', key, ttl)
  end
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

// luaAddHold defines addHold(id, md): a nested hold's record joins the
// held lock (its owner's), numbered by the lock's sequence; it returns
// the new count.
const luaAddHold = `
local function addHold(id, md)
  local s = redis.call('HINCRBY', KEYS[1], 's', 1)
  redis.call('HSET', KEYS[1], 'h.' .. id, s .. '|' .. md)
  return redis.call('HINCRBY', KEYS[1], 'n', 1)
end
`

// luaBury defines bury(id, life): id joins the buried ids (KEYS[5]) for
// life ms (Client.buryLife: an hour, or two of the call's TTLs if longer,
// longer than any request waits in a server's buffer here and than the
// cleanup keeps trying); those whose time has passed leave. The key lives
// as long as its latest id. Needs clock().
const luaBury = `
local function bury(id, life)
  life = tonumber(life)
  redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now)
  redis.call('ZADD', KEYS[5], now + life, id)
  if redis.call('PTTL', KEYS[5]) < life then
    redis.call('PEXPIRE', KEYS[5], life)
  end
end
`

// luaQueue: every script that loads it passes the hand-off lease (ms) as
// its last ARGV.
//   - dropDead drops waiters whose place expired (a crashed waiter cannot
//     block the queue for long).
//   - handoff grants the lock to the first waiter's call (a provisional
//     hold, the hand-off lease at most its TTL, that the call confirms on
//     pickup) and publishes "<token>:<fence>" on chan; it deletes the lock
//     when nobody waits.
//
// The pickup of a hand-off publishes "+<fence>/<ttl ms>": the waiters
// still in line learn that the new holder is alive and holds the lock for
// at least ttl, so none of them has to run a script to find out.
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
    local ttl, cid, tok = string.match(head, '^(%d+)#(%x+):(.+)$')
    if tok then
      local w = redis.call('EXISTS', KEYS[3]) == 1 and '1' or '0'
      local _, fs = grant(tok, math.min(tonumber(ttl), ho), cid, '', true, w)
      local msg = tok .. ':' .. fs
      redis.call('PUBLISH', chan, msg)
      return msg
    end
  end
end
` + luaGrow

// acquireScript: KEYS lock, fence, queue, queue deadlines, gone.
// ARGV token, ttl ms, mode ("w": join the queue on failure, "t": don't),
// queue ttl ms, reentrant ("1": an owner's call adds a hold of its own
// to the owner's; "0": the call's token is its own), channel, metadata,
// the call's id (its hold's name and its place in line), hand-off lease
// ms. Returns {1, fence, holds} when acquired ({1, fence, holds, µs since
// the hand-off} when the call picked one up), {0, pttl of the lock} when
// not ({0, pttl, the line's length} when the call joined the line).
//
// A buried call (its id in gone: its cleanup ran) takes nothing: this
// request landed after its sender gave up.
//
// Fast path: when neither the lock, nor the queue, nor buried ids exist
// (uncontended), it grants at once (EXISTS, TIME, SET ... GET of the
// fence, HSET, PEXPIRE); one EXISTS answers for all three keys.
// Otherwise it reads the clock, drops expired waiters, and then:
//   - the owner's lock with a record of this call: the pickup of a
//     hand-off given to it (p is its id: p goes, the lock gets the call's
//     full TTL and its metadata, the line hears of it), or a repeat of a
//     request that already took (the TTL is extended);
//   - the owner's lock, no hand-off pending, a reentrant call: a nested
//     hold of its own;
//   - a free lock: granted when nobody waits or the call is first in
//     line; otherwise handed to the head of the line (a provisional
//     lease: a head that died in line holds it up for one hand-off lease);
//   - else taken: the call joins the line (w) or fails (t).
//
// The fence is max(counter+1, server time in µs): it strictly increases on one
// master, and after a failover that lost the counter it still exceeds every
// earlier fence as long as the servers' clocks agree within the failover time.
var acquireScript = rediscmd.NewScript(luaPrelude + `
if redis.call('EXISTS', KEYS[1], KEYS[3], KEYS[5]) == 0 then
  local f = grant(ARGV[1], ARGV[2], ARGV[8], ARGV[7])
  return {1, f, 1}
end
if redis.call('ZSCORE', KEYS[5], ARGV[8]) then
  return {0, redis.call('PTTL', KEYS[1])}
end
` + luaQueue + luaExtend + luaAddHold + `
clock()
dropDead()
local h = redis.call('HMGET', KEYS[1], 'o', 'p', 'h.' .. ARGV[8])
local owner = h[1]
local member = ARGV[2] .. '#' .. ARGV[8] .. ':' .. ARGV[1]
if owner == ARGV[1] and (h[3] or (not h[2] and ARGV[5] == '1')) then
  -- A call served here (a pickup, or an owner's call served through
  -- its hold) leaves its place in line: a place left behind would later
  -- be handed the lock back.
  if ARGV[3] == 'w' then
    redis.call('ZREM', KEYS[3], member)
    redis.call('ZREM', KEYS[4], member)
  end
  local n
  local picked = h[3] and h[2] == ARGV[8]
  if h[3] then
    if picked then
      redis.call('HDEL', KEYS[1], 'p')
      redis.call('HSET', KEYS[1], 'h.' .. ARGV[8], string.match(h[3], '^%d+') .. '|' .. ARGV[7])
    end
    n = tonumber(redis.call('HGET', KEYS[1], 'n'))
  else
    n = addHold(ARGV[8], ARGV[7])
  end
  extend(ARGV[2])
  local fs = redis.call('HGET', KEYS[1], 'f')
  if picked then
    redis.call('PUBLISH', ARGV[6], '+' .. fs .. '/' .. ARGV[2])
    -- The fence of a hand-off is the server's clock (µs) as it handed
    -- the lock over: the pickup tells its age (Hooks.Event, EventHandoff).
    return {1, tonumber(fs), n, us - tonumber(fs)}
  end
  return {1, tonumber(fs), n}
end
local handed = false
if not owner then
  local head = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
  if head == nil or head == member then
    local w
    if head then
      redis.call('ZREM', KEYS[3], member)
      redis.call('ZREM', KEYS[4], member)
      if redis.call('EXISTS', KEYS[3]) == 1 then w = '1' end
    end
    local f = grant(ARGV[1], ARGV[2], ARGV[8], ARGV[7], false, w)
    return {1, f, 1}
  end
  handed = handoff(ARGV[6]) ~= ''
end
if ARGV[3] == 'w' then
  local qttl = tonumber(ARGV[4])
  redis.call('ZADD', KEYS[3], 'NX', us, member)
  redis.call('ZADD', KEYS[4], now + qttl, member)
  if owner or handed then redis.call('HSET', KEYS[1], 'w', '1') end
  growExpire(KEYS[3], qttl)
  growExpire(KEYS[4], qttl)
end
if handed and ARGV[3] ~= 'w' then
  -- The lock was free, with others first in line: TakenError's
  -- RetryAfter is 0 then, not the hand-off lease just given to the head.
  return {0, 0}
end
if ARGV[3] == 'w' then
  -- A waiter is told the line's length with it (Hooks.Event, EventJoin).
  return {0, redis.call('PTTL', KEYS[1]), redis.call('ZCARD', KEYS[3])}
end
return {0, redis.call('PTTL', KEYS[1])}
`)

// endScript: KEYS lock, fence, queue, queue deadlines, gone. ARGV token,
// the hold's id, fence ("": any), how long to bury the id first (ms; "":
// don't),
// the call's place in line ("": none), channel, hand-off lease ms.
//
// It ends hold <id>: the one request for a release, the undo of an
// acquire whose reply was lost, the give-back of an unacknowledged
// acquire, and a waiter's leave (with its place). It buries the id first
// when asked (a call whose own requests may still land), then leaves the
// place, then ends the record when the token holds the lock (under the
// fence, when given) and the record exists; otherwise it does nothing
// more. A second, late or concurrent delivery finds no record. At the last
// record the lock is freed: handed to the first waiter (publishing
// "<token>:<fence>"), or deleted when nobody waits.
//
// Returns {-1} when no such hold stood, {holds left} after a nested hold,
// {0, hand-off message or ""} when the lock was freed.
//
// Fast path (a release): the last hold released with nobody in line (w
// unset) is HMGET, DEL; with w set, an EXISTS on the queue, and only when
// a queue exists does it read the clock and drop expired waiters before
// the hand-off.
var endScript = rediscmd.NewScript(`
local h = redis.call('HMGET', KEYS[1], 'o', 'n', 'f', 'w', 'h.' .. ARGV[2])
local mine = h[1] == ARGV[1] and h[5] and (ARGV[3] == '' or h[3] == ARGV[3])
if ARGV[4] == '' and ARGV[5] == '' then
  if not mine then return {-1} end
  if (tonumber(h[2]) or 1) > 1 then
    redis.call('HDEL', KEYS[1], 'h.' .. ARGV[2])
    return {redis.call('HINCRBY', KEYS[1], 'n', -1)}
  end
  if h[4] ~= '1' or redis.call('EXISTS', KEYS[3]) == 0 then
    redis.call('DEL', KEYS[1])
    return {0, ''}
  end
end
` + luaPrelude + luaQueue + luaBury + `
clock()
if ARGV[4] ~= '' then bury(ARGV[2], ARGV[4]) end
if ARGV[5] ~= '' then
  redis.call('ZREM', KEYS[3], ARGV[5])
  redis.call('ZREM', KEYS[4], ARGV[5])
end
if not mine then return {-1} end
if (tonumber(h[2]) or 1) > 1 then
  redis.call('HDEL', KEYS[1], 'h.' .. ARGV[2])
  return {redis.call('HINCRBY', KEYS[1], 'n', -1)}
end
dropDead()
return {0, handoff(ARGV[6])}
`)

// renewScript: KEYS lock, gone. ARGV token, ttl ms, fence, the renewal's
// id, the hold's id. Returns 1 when renewed (the key now lives at least
// ttl more), 0 when the hold is not there (ended, or the lock expired or
// is another's), or when the renewal is buried: its reply was lost, its
// sender gave up on it, and it landed late.
var renewScript = rediscmd.NewScript(luaExtend + `
if redis.call('ZSCORE', KEYS[2], ARGV[4]) then return 0 end
local h = redis.call('HMGET', KEYS[1], 'o', 'f', 'h.' .. ARGV[5])
if h[1] == ARGV[1] and h[2] == ARGV[3] and h[3] then
  extend(ARGV[2])
  return 1
end
return 0
`)

// holdsScript: KEYS lock. ARGV token. Returns the token's hold count: 0
// when it does not hold the lock, or holds only a hand-off it has not
// picked up (p).
var holdsScript = rediscmd.NewScript(`
local h = redis.call('HMGET', KEYS[1], 'o', 'n', 'p')
if h[1] ~= ARGV[1] or h[3] then return 0 end
return tonumber(h[2]) or 1
`)

// ttlScript: KEYS lock. ARGV token, fence, the hold's id. Returns the
// lock's PTTL (ms) while that hold stands, -1 otherwise.
var ttlScript = rediscmd.NewScript(`
local h = redis.call('HMGET', KEYS[1], 'o', 'f', 'h.' .. ARGV[3])
if h[1] == ARGV[1] and h[2] == ARGV[2] and h[3] then
  return redis.call('PTTL', KEYS[1])
end
return -1
`)

// inspectScript: KEYS lock, queue. Returns {owner or ”, holds, fence or ”,
// pttl, queue length, metadata or ”}: the metadata of the newest hold
// that has some, none while a hand-off is not picked up.
var inspectScript = rediscmd.NewScript(`
local all = redis.call('HGETALL', KEYS[1])
local h, md, seq = {}, '', -1
for i = 1, #all, 2 do
  local k, v = all[i], all[i + 1]
  if string.sub(k, 1, 2) == 'h.' then
    local s, m = string.match(v, '^(%d+)|(.*)$')
    if m and m ~= '' and tonumber(s) > seq then md, seq = m, tonumber(s) end
  else
    h[k] = v
  end
end
if h.p then md = '' end
return {h.o or '', tonumber(h.n or '0'), h.f or '', redis.call('PTTL', KEYS[1]), redis.call('ZCARD', KEYS[2]), md}
`)

// forceUnlockScript: KEYS lock, fence, queue, queue deadlines. ARGV
// channel, the fence of the hold to free ("": read it), hand-off lease
// ms. Frees the lock held under that fence, whoever holds it: hands it to
// the first live waiter or deletes it; the fence counter stays. Without a
// fence it frees nothing and returns the fence it read: the operator's
// call then sends the fence it saw, so that a request of it that lands
// late, or twice, frees nothing but that one holder's lock. Returns {1
// when it freed the lock else 0, the hand-off message or the fence read}.
var forceUnlockScript = rediscmd.NewScript(luaPrelude + luaQueue + `
local f = redis.call('HGET', KEYS[1], 'f')
if ARGV[2] == '' then return {0, f or ''} end
if f ~= ARGV[2] then return {0, ''} end
clock()
dropDead()
return {1, handoff(ARGV[1])}
`)

// reenterScript: KEYS lock, gone. ARGV token, fence, ttl ms, the new
// hold's id, metadata, the outer hold's id. Lease.Reenter: a nested hold
// for the holder of the outer hold, while that hold stands, and for
// nobody else. Returns the new hold count, or 0 when the outer hold is
// gone (the outer lease was lost: a fresh hold then would be one no
// outer lease protects) or the new id is buried. A repeat of a reentry
// that took returns the count and adds nothing.
var reenterScript = rediscmd.NewScript(luaExtend + luaAddHold + `
if redis.call('ZSCORE', KEYS[2], ARGV[4]) then return 0 end
local h = redis.call('HMGET', KEYS[1], 'o', 'f', 'p', 'h.' .. ARGV[6], 'h.' .. ARGV[4], 'n')
if h[1] ~= ARGV[1] or h[2] ~= ARGV[2] or h[3] or not h[4] then return 0 end
if h[5] then
  extend(ARGV[3])
  return tonumber(h[6])
end
local n = addHold(ARGV[4], ARGV[5])
extend(ARGV[3])
return n
`)

// buryScript: KEYS lock, fence, queue, queue deadlines, gone (only gone is
// touched). ARGV the id, how long (ms). A renewal whose reply was lost is
// buried: it extends nothing when it lands later. Returns 1.
var buryScript = rediscmd.NewScript(`
local t = redis.call('TIME')
local now = math.floor(tonumber(t[1] .. string.sub('00000' .. t[2], -6)) / 1000)
` + luaBury + `
bury(ARGV[1], ARGV[2])
return 1
`)
