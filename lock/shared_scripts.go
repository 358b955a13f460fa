package lock

import "github.com/lockproof/lockproof/internal/rediscmd"

// The shared kinds (the read-write lock and the semaphore, shared.go) keep
// their holds in a hash at Keys.Lock, three fields per hold, each named by
// the id of the call that made it, as the mutex's records are:
//
//	h.<id>  "<expiry ms, server clock>|<mode>|<permits>|<fence>"
//	o.<id>  the owner token
//	d.<id>  the metadata (absent when there is none)
//
// mode is "r" (a read hold), "w" (a write hold) or "p" (permits of a
// semaphore). Unlike the mutex, every hold has an expiry of its own: a read
// hold of one owner must not keep another's alive, a permit of a crashed
// holder comes back within its own TTL, and a shorter nested hold that
// expires ends itself and nothing else (Redisson's reentrant write hold
// taken for a shorter time released the whole lock when it expired). The
// key's own TTL is the longest hold's: it only cleans up.
//
// Every script reads the server clock and drops the records whose expiry
// passed before it judges anything, so an expired hold counts for
// nothing, whoever looks. A record lives while its expiry is not before
// the clock's millisecond, as Redis keeps a key with PEXPIRE: the clock
// is read in whole milliseconds, rounded down, and a record taken for
// expired at its expiry's millisecond ended up to 1 ms short of its TTL
// (the simulation, fenced-sem seed 690 under eleven faults at once: a
// third holder beside a hold whose holder was told it stood). The request that ends a hold names its record
// (the release, the undo of a lost acquire, a waiter's leave), and the
// acquire of a call whose record exists only extends it: a request that
// lands twice, late or beside another is a no-op, as for the mutex, and a
// call's cleanup buries its id in Keys.Gone (luaBury) so that its late
// acquire takes nothing.
//
// The line (Keys.Queue, Keys.QueueDeadlines) holds one place per waiting
// call, "<mode><permits>#<call id>:<owner token>", scored by arrival. A
// call is admitted when its mode allows it beside the live holds and the
// places ahead of it (FIFO across modes):
//   - a write hold when no hold stands and nobody is ahead;
//   - a read hold when no write hold stands and no writer is ahead (a
//     reader that comes after a waiting writer waits behind it, so a
//     stream of readers cannot starve a writer);
//   - k permits when the permits out, the permits asked for by the places
//     ahead and k are at most the call's capacity N.
//
// A try (mode "t") is judged with the whole line ahead of it. An owner's
// call (reentrant "1") that finds the owner holding the lock enters at
// once, without looking at the line (waiting would deadlock behind a
// writer that waits for the owner): write to write, write to read (a
// downgrade) and read to read, sharing the fence of the owner's write
// hold (or of its newest read hold); read to write is refused ({-2}):
// two readers upgrading would wait for each other for good. A semaphore's
// permits are never reentrant: each acquire asks for its own.
//
// A change that may let somebody in (a hold ended, a place left) publishes
// "" on the channel when somebody is in line: every waiter of the key
// looks again (notifier.dispatch). A hold that expires publishes nothing:
// a waiter times its next look by the expiry of the holds that block it.

// luaShared defines, for the shared kinds' scripts: clock() (as
// luaPrelude's), load() (the live records of KEYS[1] into recs, dropping
// the expired ones), parse(v) (a record's fields), growExpire(key, ttl),
// and newFence(ttl) (luaFence).
const luaShared = luaClock + luaGrow + luaFence + `
local function parse(v)
  local e, m, k, f = string.match(v, '^(%d+)|(%a)|(%d+)|(%d+)$')
  return tonumber(e), m, tonumber(k), f
end
local recs = {}
local function load()
  local all = redis.call('HGETALL', KEYS[1])
  local by, dead = {}, {}
  for i = 1, #all, 2 do
    local k, v = all[i], all[i + 1]
    local t, id = string.sub(k, 1, 2), string.sub(k, 3)
    local r = by[id]
    if not r then
      r = {id = id}
      by[id] = r
    end
    if t == 'h.' then
      r.e, r.m, r.k, r.f = parse(v)
    elseif t == 'o.' then
      r.o = v
    elseif t == 'd.' then
      r.d = v
    end
  end
  for id, r in pairs(by) do
    if r.e and r.e >= now and r.o then
      recs[#recs + 1] = r
    else
      dead[#dead + 1] = 'h.' .. id
      dead[#dead + 1] = 'o.' .. id
      dead[#dead + 1] = 'd.' .. id
    end
  end
  if #dead > 0 then redis.call('HDEL', KEYS[1], unpack(dead)) end
  -- pairs() has no fixed order: sort, so that the reply does not depend on it.
  table.sort(recs, function(a, b) return a.id < b.id end)
end
local function holdsOf(tok)
  local n = 0
  for _, r in ipairs(recs) do
    if r.o == tok then n = n + 1 end
  end
  return n
end
`

// sharedAcquireScript: KEYS and ARGV 1–9 as acquireScript's (token, ttl ms,
// "w"/"t", queue ttl ms, reentrant, channel, metadata, the call's id,
// hand-off lease ms, unused); ARGV 10 the mode ("r", "w", "p"), 11 the
// permits asked for (1 for a read or write hold), 12 the capacity N (a
// semaphore's; 0 otherwise). Returns {1, fence, the owner's holds} when
// admitted, {0, ms until the earliest live hold expires (0: none stands,
// the line alone holds the call back)} when not (with the line's length
// third when the call joined it), {-2} when an owner holding
// only read holds asks to write (its place, if any, is left).
var sharedAcquireScript = rediscmd.NewScript(luaShared + `
if redis.call('ZSCORE', KEYS[5], ARGV[8]) then return {0, 0} end
clock()
load()
local dead = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, 100)
if #dead > 0 then
  redis.call('ZREM', KEYS[3], unpack(dead))
  redis.call('ZREM', KEYS[4], unpack(dead))
end
local tok, ttl, id, mode, k = ARGV[1], tonumber(ARGV[2]), ARGV[8], ARGV[10], tonumber(ARGV[11])
local member = mode .. k .. '#' .. id .. ':' .. tok
local function leave()
  if ARGV[3] == 'w' then
    redis.call('ZREM', KEYS[4], member)
    return redis.call('ZREM', KEYS[3], member) > 0
  end
  return false
end
local function add(m, f)
  local v = (now + ttl) .. '|' .. m .. '|' .. k .. '|' .. f
  if ARGV[7] ~= '' then
    redis.call('HSET', KEYS[1], 'h.' .. id, v, 'o.' .. id, tok, 'd.' .. id, ARGV[7])
  else
    redis.call('HSET', KEYS[1], 'h.' .. id, v, 'o.' .. id, tok)
  end
  growExpire(KEYS[1], ttl)
  recs[#recs + 1] = {id = id, o = tok, e = now + ttl, m = m, k = k, f = f}
end
for _, r in ipairs(recs) do
  if r.id == id then
    -- A repeat of a request that took (its reply was lost, or it was
    -- delivered twice): it extends its own hold and adds nothing.
    if r.o ~= tok then return {0, 0} end
    leave()
    if now + ttl > r.e then
      redis.call('HSET', KEYS[1], 'h.' .. id, (now + ttl) .. '|' .. r.m .. '|' .. r.k .. '|' .. r.f)
      growExpire(KEYS[1], ttl)
    end
    return {1, tonumber(r.f), holdsOf(tok)}
  end
end
if mode ~= 'p' and ARGV[5] == '1' then
  local wf, rf
  for _, r in ipairs(recs) do
    if r.o == tok then
      if r.m == 'w' then wf = r.f elseif not rf or tonumber(r.f) > tonumber(rf) then rf = r.f end
    end
  end
  if wf or rf then
    local left = leave()
    if mode == 'w' and not wf then
      -- Refused: a place it left may have held others back (a reader
      -- behind this writer): they look again.
      if left and redis.call('EXISTS', KEYS[3]) == 1 then
        redis.call('PUBLISH', ARGV[6], '')
      end
      return {-2}
    end
    local f = wf or rf
    add(mode, f)
    return {1, tonumber(f), holdsOf(tok)}
  end
end
local mine = redis.call('ZSCORE', KEYS[3], member)
local ahead
if mine then
  ahead = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. mine)
else
  ahead = redis.call('ZRANGE', KEYS[3], 0, -1)
end
local ok = true
if mode == 'w' then
  ok = #recs == 0 and #ahead == 0
elseif mode == 'r' then
  for _, r in ipairs(recs) do
    if r.m == 'w' then ok = false end
  end
  for _, m in ipairs(ahead) do
    if string.sub(m, 1, 1) == 'w' then ok = false end
  end
else
  local used = k
  for _, r in ipairs(recs) do used = used + r.k end
  for _, m in ipairs(ahead) do used = used + (tonumber(string.match(m, '^p(%d+)#')) or 0) end
  ok = used <= tonumber(ARGV[12])
end
if ok then
  local _, f = newFence(ttl)
  leave()
  add(mode, f)
  return {1, tonumber(f), holdsOf(tok)}
end
if ARGV[3] == 'w' then
  local qttl = tonumber(ARGV[4])
  redis.call('ZADD', KEYS[3], 'NX', us, member)
  redis.call('ZADD', KEYS[4], now + qttl, member)
  growExpire(KEYS[3], qttl)
  growExpire(KEYS[4], qttl)
end
local soonest = 0
for _, r in ipairs(recs) do
  if soonest == 0 or r.e - now < soonest then soonest = r.e - now end
end
if ARGV[3] == 'w' then return {0, soonest, redis.call('ZCARD', KEYS[3])} end
return {0, soonest}
`)

// sharedEndScript: KEYS and ARGV as endScript's (token, the hold's id,
// fence or "", bury ms or "", place or "", channel, hand-off lease ms). It
// buries the id first when asked, leaves the place, and ends the hold when
// its record stands, live, under this token (and fence, when given). An
// expired record is dropped and counts as not held. Returns {0, ""} when
// it ended a live hold, {-1} otherwise. When a hold ended or a place was
// left and somebody is in line, it publishes "" (everyone looks again).
var sharedEndScript = rediscmd.NewScript(luaShared + luaBury + `
clock()
if ARGV[4] ~= '' then bury(ARGV[2], ARGV[4]) end
local moved = false
if ARGV[5] ~= '' then
  if redis.call('ZREM', KEYS[3], ARGV[5]) > 0 then moved = true end
  redis.call('ZREM', KEYS[4], ARGV[5])
end
local res = {-1}
local h = redis.call('HMGET', KEYS[1], 'h.' .. ARGV[2], 'o.' .. ARGV[2])
if h[1] and h[2] == ARGV[1] then
  local e, _, _, f = parse(h[1])
  if ARGV[3] == '' or f == ARGV[3] then
    redis.call('HDEL', KEYS[1], 'h.' .. ARGV[2], 'o.' .. ARGV[2], 'd.' .. ARGV[2])
    if e and e >= now then
      res = {0, ''}
      moved = true
    end
  end
end
if moved and redis.call('EXISTS', KEYS[3]) == 1 then
  redis.call('PUBLISH', ARGV[6], '')
end
return res
`)

// sharedRenewScript: KEYS lock, gone; ARGV token, ttl ms, fence, the
// renewal's id, the hold's id (as renewScript's). Returns 1 when the hold
// stands and now lives at least ttl more (never less than it had), 0 when
// it is gone or expired, or the renewal is buried.
var sharedRenewScript = rediscmd.NewScript(luaShared + `
if redis.call('ZSCORE', KEYS[2], ARGV[4]) then return 0 end
local h = redis.call('HMGET', KEYS[1], 'h.' .. ARGV[5], 'o.' .. ARGV[5])
if not h[1] or h[2] ~= ARGV[1] then return 0 end
local e, m, k, f = parse(h[1])
if f ~= ARGV[3] then return 0 end
clock()
if not e or e < now then return 0 end
local ttl = tonumber(ARGV[2])
if now + ttl > e then
  redis.call('HSET', KEYS[1], 'h.' .. ARGV[5], (now + ttl) .. '|' .. m .. '|' .. k .. '|' .. f)
  growExpire(KEYS[1], ttl)
end
return 1
`)

// sharedTTLScript: KEYS lock; ARGV token, fence, the hold's id. Returns the
// ms the hold has left while it stands, -1 otherwise.
var sharedTTLScript = rediscmd.NewScript(luaShared + `
local h = redis.call('HMGET', KEYS[1], 'h.' .. ARGV[3], 'o.' .. ARGV[3])
if not h[1] or h[2] ~= ARGV[1] then return -1 end
local e, _, _, f = parse(h[1])
if f ~= ARGV[2] then return -1 end
clock()
if not e or e < now then return -1 end
return e - now
`)

// sharedReenterScript: KEYS lock, gone; ARGV token, fence, ttl ms, the new
// hold's id, metadata, the outer hold's id (as reenterScript's). A nested
// hold of the outer hold's mode and fence, while the outer hold stands.
// Returns the owner's live holds, 0 when the outer hold is gone or the
// new id is buried; a repeat that took extends its hold and adds nothing.
var sharedReenterScript = rediscmd.NewScript(luaShared + `
if redis.call('ZSCORE', KEYS[2], ARGV[4]) then return 0 end
clock()
load()
local outer, again
for _, r in ipairs(recs) do
  if r.id == ARGV[6] then outer = r end
  if r.id == ARGV[4] then again = r end
end
if not outer or outer.o ~= ARGV[1] or outer.f ~= ARGV[2] or outer.m == 'p' then return 0 end
local ttl = tonumber(ARGV[3])
if again then
  if again.o ~= ARGV[1] then return 0 end
  if now + ttl > again.e then
    redis.call('HSET', KEYS[1], 'h.' .. ARGV[4], (now + ttl) .. '|' .. again.m .. '|' .. again.k .. '|' .. again.f)
    growExpire(KEYS[1], ttl)
  end
  return holdsOf(ARGV[1])
end
local v = (now + ttl) .. '|' .. outer.m .. '|1|' .. outer.f
if ARGV[5] ~= '' then
  redis.call('HSET', KEYS[1], 'h.' .. ARGV[4], v, 'o.' .. ARGV[4], ARGV[1], 'd.' .. ARGV[4], ARGV[5])
else
  redis.call('HSET', KEYS[1], 'h.' .. ARGV[4], v, 'o.' .. ARGV[4], ARGV[1])
end
growExpire(KEYS[1], ttl)
recs[#recs + 1] = {id = ARGV[4], o = ARGV[1]}
return holdsOf(ARGV[1])
`)

// sharedHoldsScript: KEYS lock; ARGV token. The token's live holds.
var sharedHoldsScript = rediscmd.NewScript(luaShared + `
clock()
load()
return holdsOf(ARGV[1])
`)

// sharedInspectScript: KEYS lock, queue. Returns {the queue's length, then
// per live hold: id, owner, mode, permits, fence, ms left, metadata}.
var sharedInspectScript = rediscmd.NewScript(luaShared + `
clock()
load()
local out = {redis.call('ZCARD', KEYS[2])}
for _, r in ipairs(recs) do
  out[#out + 1] = r.id
  out[#out + 1] = r.o
  out[#out + 1] = r.m
  out[#out + 1] = r.k
  out[#out + 1] = r.f
  out[#out + 1] = r.e - now
  out[#out + 1] = r.d or ''
end
return out
`)
