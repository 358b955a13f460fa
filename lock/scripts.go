package lock

import "github.com/lockproof/lockproof/internal/rediscmd"

// The lock is a hash at Keys.Lock: o = owner token, n = hold count, f = fence,
// p = a hand-off not yet picked up (the id of the call at whose place it
// was given: only that call picks it up; "1" for a place without one),
// r = the WithOwner calls that added holds
// (their ids, space-separated, the newest last, at most holdIDs of them),
// w = "1" when somebody may be in line (absent or "0": nobody is).
// The Lua scripts below are the only code that writes it.
//
// w spares the usual release a command (the EXISTS on the queue): a call
// that joins the line while the lock is held or just handed sets it, and
// a grant sets it from the queue it leaves behind, so a held lock with
// somebody in line always says so (tla/LockQueue.tla: WaitFlag). It may
// say "1" with nobody left (a waiter that gave up or expired): the
// release then looks at the queue, as it did before w. A waiter put in
// line by anything but acquireScript (an operator's ZADD) is not seen by
// a release of a lock held with w unset: it is served when it retries,
// or when the lock expires, as after a lost hand-off message.

// The scripts share two blocks of helpers; neither runs a command itself, so
// a fast path pays only for the commands it needs. They expect KEYS lock,
// fence, queue, queue deadlines. Queue members are "<ttl ms>:<owner token>"
// (older clients), or "<ttl ms>#<call id>:<owner token>": each call
// has a place of its own, so an owner's new wait never takes over a place
// its earlier one left behind (a leave that timed out under load let the
// owner's next wait jump the line: ZADD NX kept the old score).
//
// luaPrelude, at the top of each script (after the fast path in release):
//   - clock sets us (µs, as a number and as the decimal string uss) and now
//     (ms) from the server clock (TIME).
//   - grant gives the lock to tok: fence = max(counter+1, server µs), read
//     and written by one SET ... PX ... GET in the usual case that the clock
//     is ahead, then HSET o, n, f (every field of the hash, so no DEL is
//     needed; the hash never exists when grant runs outside a hand-off)
//     and PEXPIRE. A hand-off (handed) also sets p, the mark of a
//     provisional hold that its owner's pickup confirms. r lists the ids
//     of the WithOwner attempts that added holds (rid; "" for none; see
//     luaHolds): undoScript takes such a hold back when the attempt's
//     reply was lost. The counter lives an hour (or two TTLs, if
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
// The pickup of a hand-off publishes "+<fence>/<ttl ms>": the waiters
// still in line learn that the new holder is alive and holds the lock for
// at least ttl, so none of them has to run a script to find out (review
// defect 8: every hand-off made every waiter look one hand-off lease
// later, work that grew with the line). The message has no ':', which
// older clients ignore.
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
local function grant(tok, ttl, handed, rid, md, w)
  if not us then clock() end
  local f, fs = us, uss
  local life = math.max(2 * tonumber(ttl), 3600000)
  local prev = tonumber(redis.call('SET', KEYS[2], fs, 'PX', life, 'GET') or '0') + 1
  if prev > f then
    f, fs = prev, string.format('%.0f', prev)
    redis.call('SET', KEYS[2], fs, 'PX', life)
  end
  if handed then
    redis.call('HSET', KEYS[1], 'o', tok, 'n', 1, 'f', fs, 'p', handed, 'r', '', 'm', '', 'w', w or '0')
  elseif md and md ~= '' and rid and rid ~= '' then
    redis.call('HSET', KEYS[1], 'o', tok, 'n', 1, 'f', fs, 'r', rid, 'm', md, 'm.' .. rid, md, 'w', w or '0')
  elseif md and md ~= '' then
    redis.call('HSET', KEYS[1], 'o', tok, 'n', 1, 'f', fs, 'r', '', 'm', md, 'w', w or '0')
  elseif w then
    redis.call('HSET', KEYS[1], 'o', tok, 'n', 1, 'f', fs, 'r', rid or '', 'w', w)
  else
    redis.call('HSET', KEYS[1], 'o', tok, 'n', 1, 'f', fs, 'r', rid or '')
  end
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

// luaHolds defines addHold(id): a WithOwner attempt (id; "" for none)
// added a hold (or picked up one handed to it), and its id joins r, so
// that undoScript can take exactly that hold back if the attempt's reply
// is lost. r keeps every such id, not the last one only: an owner's next
// acquire, sent while the lost one's undo was on its way, replaced it, and
// the orphan hold then outlived the owner's release (the simulation found
// it: a waiter's pickup lost at its deadline, a try-acquire as the same
// owner, its release, and the lock stayed held for the hand-off lease,
// the owner's next acquire getting the same fence again). A hold whose
// reply arrived keeps its id in r until the lock is freed (a release
// does not say which hold it ends); r keeps the newest holdIDs ids, so a
// long-lived reentrant owner does not grow the hash without bound, and an
// undo after that many newer holds of its owner finds nothing to take.
const luaHolds = `
local function addHold(id)
  if id == '' then return end
  local r = (redis.call('HGET', KEYS[1], 'r') or '') .. ' ' .. id
  local _, n = string.gsub(r, '%S+', '')
  if n > ` + holdIDs + ` then
    redis.call('HDEL', KEYS[1], 'm.' .. string.match(r, '^%s*(%S+)'))
    r = string.gsub(r, '^%s*%S+', '')
  end
  redis.call('HSET', KEYS[1], 'r', r)
end
local function setMeta(id, md)
  if md == '' then return end
  if id ~= '' then
    redis.call('HSET', KEYS[1], 'm', md, 'm.' .. id, md)
  else
    redis.call('HSET', KEYS[1], 'm', md)
  end
end
` + luaDrop

// luaDrop defines dropHold(r, id): the hold that call id added ends
// while others of its owner stay (a nested release, an undo): id leaves
// r (the hash's r as read), and its metadata (m.<id>) goes with it, m
// becoming the metadata of the newest hold left that has some ("" for
// none). Review defect 5 of round three: a nested hold's metadata
// outlived the hold in Inspect.
const luaDrop = `
local function dropHold(r, id)
  local i = r and id ~= '' and string.find(r, id, 1, true)
  if not i then return end
  r = string.sub(r, 1, math.max(i - 2, 0)) .. string.sub(r, i + #id)
  redis.call('HSET', KEYS[1], 'r', r)
  if redis.call('HDEL', KEYS[1], 'm.' .. id) == 1 then
    local md = ''
    for x in string.gmatch(r, '%S+') do
      md = redis.call('HGET', KEYS[1], 'm.' .. x) or md
    end
    redis.call('HSET', KEYS[1], 'm', md)
  end
end
`

// holdIDs is how many WithOwner attempt ids r keeps (luaHolds).
const holdIDs = "16"

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
    local ttl, cid, tok = string.match(head, '^(%d+)#?(%x*):(.+)$')
    if tok then
      local w = redis.call('EXISTS', KEYS[3]) == 1 and '1' or '0'
      local _, fs = grant(tok, math.min(tonumber(ttl), ho), cid ~= '' and cid or '1', '', nil, w)
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

// acquireScript: KEYS lock, fence, queue, queue deadlines, gone.
// ARGV token, ttl ms, mode ("w": join the queue on failure, "t": don't),
// (then, after the reentrant flag and channel below, the attempt's id for
// undoScript and buryScript; every attempt has one),
// queue ttl ms, reentrant ("1": same owner increments the hold count,
// unless it picks up a hand-off; "0": same owner is an idempotent retry,
// or a hand-off being picked up),
// channel, metadata ("": none; a reentrant acquire or a pickup without
// keeps the lock's), the call's id (its place in line: the same for
// every attempt of one call, so a retry keeps the place), hand-off lease
// ms.
// Returns {1, fence, holds} when acquired, {0, pttl of the lock} when not.
//
// First, an attempt that gave up and was cleaned up (its id is in gone:
// buryScript; the token stands in for a request without an id) takes
// nothing: a request of it that arrives after the cleanup would add a
// hold nobody takes back (the
// simulation found it: a server paused with a waiter's acquire in its
// buffer ran the waiter's undo first, from another connection, then the
// acquire, and the orphan hold kept the next waiter out for a TTL).
//
// Fast path: when neither the lock, nor the queue, nor the attempts
// buried in the last hour (gone) exist (uncontended), it grants at once
// (EXISTS, TIME, SET ... GET of the fence, HSET, PEXPIRE); one EXISTS
// answers for all three keys, so the check of gone costs nothing then.
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
if redis.call('EXISTS', KEYS[1], KEYS[3], KEYS[5]) == 0 then
  local f = grant(ARGV[1], ARGV[2], false, ARGV[7], ARGV[8])
  return {1, f, 1}
end
if redis.call('HEXISTS', KEYS[5], ARGV[7] ~= '' and ARGV[7] or ARGV[1]) == 1 then
  return {0, redis.call('PTTL', KEYS[1])}
end
` + luaQueue + luaExtend + luaHolds + `
clock()
dropDead()
local owner = redis.call('HGET', KEYS[1], 'o')
local member = ARGV[2] .. ':' .. ARGV[1]
if ARGV[9] ~= '' then member = ARGV[2] .. '#' .. ARGV[9] .. ':' .. ARGV[1] end
-- A hand-off not picked up is the call's whose place it was given at (p
-- is its call id; '1' for a place without one): another call of the
-- owner finds the lock taken. A hand-off by token let the owner's other
-- call take it while the waiting call's pickup was on its way, and the
-- waiting call, its place used up, fell behind those it had been ahead
-- of (found by the TLA+ model of the line by call, tla/LockLine.tla).
local pv = owner == ARGV[1] and redis.call('HGET', KEYS[1], 'p')
if owner == ARGV[1] and (not pv or pv == '1' or pv == ARGV[9]) then
  local n
  local picked = pv and true or false
  if picked then redis.call('HDEL', KEYS[1], 'p') end
  -- A call served here (a pickup, or a second wait of the owner served
  -- through reentrancy) leaves its place in line: a place left behind
  -- would later be handed the lock back, and the owner's next
  -- TryAcquire would take it while others wait (review defect 4 of
  -- round three).
  if ARGV[3] == 'w' then
    redis.call('ZREM', KEYS[3], member)
    redis.call('ZREM', KEYS[4], member)
  end
  if not picked and ARGV[5] == '1' then
    n = redis.call('HINCRBY', KEYS[1], 'n', 1)
  else
    -- the pickup of a hand-off (which confirms the provisional hold: a
    -- WithOwner waiter must not count twice), or an idempotent retry
    n = tonumber(redis.call('HGET', KEYS[1], 'n'))
  end
  addHold(ARGV[7])
  setMeta(ARGV[7], ARGV[8])
  extend(ARGV[2])
  local fs = redis.call('HGET', KEYS[1], 'f')
  if picked then
    -- the line learns that the hand-off was picked up, and for how long
    -- the lock is held at least: nobody has to look (review defect 8)
    redis.call('PUBLISH', ARGV[6], '+' .. fs .. '/' .. ARGV[2])
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
    local f = grant(ARGV[1], ARGV[2], false, ARGV[7], ARGV[8], w)
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
  -- RetryAfter is 0 then, not the hand-off lease just given to the head
  -- (review defect 7 of round three). A waiter still hears that lease.
  return {0, 0}
end
return {0, redis.call('PTTL', KEYS[1])}
`)

// undoScript: KEYS lock, fence, queue, queue deadlines. ARGV token, the
// attempt's id, channel, hand-off lease ms. A WithOwner acquire whose
// reply was lost may have added a hold nobody has a Lease for (review
// defect 11: an orphan hold only ForceUnlock removed): when the last hold
// was added by that attempt (its id is in r), it takes that hold back, as
// a release of it would, whatever holds the owner added since. Returns 1
// when it did, 0 otherwise (the attempt added nothing, or its hold is gone
// with the lock, or more than holdIDs newer holds pushed its id out).
var undoScript = rediscmd.NewScript(luaDrop + `
local h = redis.call('HMGET', KEYS[1], 'o', 'n', 'r')
if h[1] ~= ARGV[1] or not h[3] then return 0 end
if not string.find(h[3], ARGV[2], 1, true) then return 0 end
if (tonumber(h[2]) or 1) > 1 then
  dropHold(h[3], ARGV[2])
  redis.call('HINCRBY', KEYS[1], 'n', -1)
  return 1
end
if redis.call('EXISTS', KEYS[3]) == 0 then
  redis.call('DEL', KEYS[1])
  return 1
end
` + luaPrelude + luaQueue + `
clock()
dropDead()
handoff(ARGV[3])
return 1
`)

// releaseScript: KEYS lock, fence, queue, queue deadlines, gone. ARGV
// token, channel, fence ("": any), the id of the call that added the
// hold ("": none; it leaves r, so that an undo of it after a release
// whose reply was lost finds nothing to take back), hand-off lease ms.
// Returns {-1} when the hold is gone and its id buried (the release's
// reply was lost, and its cleanup already took the hold back, so this
// request landed late, after its sender gave up; a late release whose
// hold still stands, its id in r, ends that hold, as it was sent to; with the holds sharing owner
// and fence it would end another hold of the owner, an outer lease
// still valid: review defect 1 of round three), when the token does not
// hold the lock, or holds it under
// another fence (a newer hold of the same WithOwner token, taken after
// this lease was lost: review defect 4), {remaining holds}
// otherwise. At zero holds it hands the lock to the first waiter, publishing
// "<token>:<fence>" on the channel, and returns {0, that message}; with
// nobody waiting it deletes the lock and returns {0, ""}. The waiter gets a
// provisional lease (the hand-off lease, at most its TTL) that it confirms
// on pickup.
//
// Fast path: the last hold released with nobody in line (w unset) is
// HMGET, DEL; with w set, an EXISTS on the queue, and only when a queue
// exists does it read the clock and drop expired waiters before the
// hand-off. (Before w, every release paid the EXISTS: 4 commands a
// release, 11 an uncontended pair, 9 now.)
var releaseScript = rediscmd.NewScript(luaDrop + `
local h = redis.call('HMGET', KEYS[1], 'o', 'n', 'f', 'r', 'w')
if h[1] ~= ARGV[1] or (ARGV[3] ~= '' and h[3] ~= ARGV[3]) then return {-1} end
-- A hold whose id is in r stands: only an id r lacks (its hold taken
-- back, or pushed out by holdIDs newer ones) is looked up in gone, so
-- that the usual release pays no extra command.
if ARGV[4] ~= '' and not (h[4] and string.find(h[4], ARGV[4], 1, true)) and redis.call('HEXISTS', KEYS[5], ARGV[4]) == 1 then return {-1} end
if (tonumber(h[2]) or 1) > 1 then
  dropHold(h[4], ARGV[4])
  return {redis.call('HINCRBY', KEYS[1], 'n', -1)}
end
if h[5] ~= '1' or redis.call('EXISTS', KEYS[3]) == 0 then
  redis.call('DEL', KEYS[1])
  return {0, ''}
end
` + luaPrelude + luaQueue + `
clock()
dropDead()
return {0, handoff(ARGV[2])}
`)

// renewScript: KEYS lock, gone. ARGV token, ttl ms, fence, the
// renewal's id. Returns 1 when renewed (the key now lives at least ttl
// more), 0 when not held (or held under another fence: a newer hold of
// the same owner), or when the renewal is buried: its reply was lost,
// its sender gave up on it, and it landed late.
var renewScript = rediscmd.NewScript(luaExtend + `
if redis.call('HEXISTS', KEYS[2], ARGV[4]) == 1 then return 0 end
local h = redis.call('HMGET', KEYS[1], 'o', 'f')
if h[1] == ARGV[1] and h[2] == ARGV[3] then
  extend(ARGV[2])
  return 1
end
return 0
`)

// leaveScript: KEYS lock, fence, queue, queue deadlines, gone. ARGV
// token, channel, ttl ms, "1" when the token is fresh (not given
// WithOwner), the attempt's id, "c" when the cleanup of the call sends it
// ("": the call itself), the call's id (its place), hand-off lease ms. A leave of a call that is
// buried, sent by the call itself, landed after its cleanup (which
// sends its own): it only leaves the line, and passes on nothing, since
// a provisional hand-off to the owner now is a later call's (review
// defect 1 of round three). A waiter that
// gives up leaves the queue; if the lock was already handed to it, it passes
// the lock on to the next waiter: a fresh token holds nothing else, and an
// owner's hold still marked provisional (p) with this call's id is that
// hand-off, not picked up (an owner's confirmed hold, or a hand-off given
// at another call's place, is never touched: it is some other call's).
var leaveScript = rediscmd.NewScript(luaPrelude + luaQueue + `
clock()
dropDead()
local member = ARGV[3] .. ':' .. ARGV[1]
if ARGV[7] ~= '' then member = ARGV[3] .. '#' .. ARGV[7] .. ':' .. ARGV[1] end
redis.call('ZREM', KEYS[3], member)
redis.call('ZREM', KEYS[4], member)
if ARGV[6] ~= 'c' and redis.call('HEXISTS', KEYS[5], ARGV[5]) == 1 then return 0 end
local h = redis.call('HMGET', KEYS[1], 'o', 'p')
if h[1] == ARGV[1] and (ARGV[4] == '1' or h[2] == '1' or h[2] == ARGV[7]) then
  handoff(ARGV[2])
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

// ttlScript: KEYS lock. ARGV token, fence. Returns the lock's PTTL (ms)
// when the token holds it under that fence, -1 otherwise (a newer hold
// of the same owner is another lease's: review defect 6 of round three).
var ttlScript = rediscmd.NewScript(`
local h = redis.call('HMGET', KEYS[1], 'o', 'f')
if h[1] == ARGV[1] and h[2] == ARGV[2] then
  return redis.call('PTTL', KEYS[1])
end
return -1
`)

// inspectScript: KEYS lock, queue. Returns {owner or ”, holds, fence or ”,
// pttl, queue length, metadata or ”}.
var inspectScript = rediscmd.NewScript(`
local h = redis.call('HMGET', KEYS[1], 'o', 'n', 'f', 'm')
return {h[1] or '', tonumber(h[2] or '0'), h[3] or '', redis.call('PTTL', KEYS[1]), redis.call('ZCARD', KEYS[2]), h[4] or ''}
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

// reenterScript: KEYS lock, gone. ARGV token, fence, ttl ms, the call's id,
// metadata ("": keep the lock's). Lease.Reenter: a nested hold for the
// holder of the lease with this fence, and for nobody else. Returns the
// new hold count, or 0 when the token does not hold the lock under that
// fence (the outer lease was lost: the old way, WithOwner, took a fresh
// hold then, which no outer lease protects).
var reenterScript = rediscmd.NewScript(luaExtend + luaHolds + `
if redis.call('HEXISTS', KEYS[2], ARGV[4]) == 1 then return 0 end
local h = redis.call('HMGET', KEYS[1], 'o', 'f', 'p')
if h[1] ~= ARGV[1] or h[2] ~= ARGV[2] or h[3] then return 0 end
local n = redis.call('HINCRBY', KEYS[1], 'n', 1)
addHold(ARGV[4])
setMeta(ARGV[4], ARGV[5])
extend(ARGV[3])
return n
`)

// buryScript: KEYS gone. ARGV the attempt's id. The first step of the cleanup of an attempt that gave
// up with its outcome unknown: once it ran, a request of the attempt that
// reaches Redis later takes nothing (acquireScript, reenterScript), so the
// cleanup that follows (undo, release, leave) sees all the attempt ever
// did. Gone lives an hour past its last entry: longer than any request
// waits in a server's buffer here. Returns 1.
var buryScript = rediscmd.NewScript(`
redis.call('HSET', KEYS[1], ARGV[1], 1)
redis.call('PEXPIRE', KEYS[1], 3600000)
return 1
`)
