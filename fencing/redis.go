package fencing

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/internal/rediscmd"
)

// DefaultPrefix is the prefix of the Redis keys of a resource when
// RedisOptions.Prefix is empty.
const DefaultPrefix = "fencing:"

// RedisOptions configures a Redis-backed resource.
type RedisOptions struct {
	// Prefix is put before every resource key; "" means DefaultPrefix.
	Prefix string
}

// writeScript compares the token of a write with the fence and writes,
// atomically. Tokens travel as decimal strings and are compared as such
// (length first), which is exact for all of uint64 where Lua numbers
// (doubles) would not be.
//
// KEYS[1] = the hash; ARGV = token, owner, value.
// Returns {1} when accepted, {0, token, owner} of the fence when refused.
const writeScript = `
local cur = redis.call('HMGET', KEYS[1], 'token', 'owner')
local t, o = cur[1], cur[2]
if t then
  local nt = ARGV[1]
  if #nt < #t or (#nt == #t and nt < t) then return {0, t, o or ''} end
  if nt == t and ARGV[2] ~= o then return {0, t, o or ''} end
end
redis.call('HSET', KEYS[1], 'token', ARGV[1], 'owner', ARGV[2], 'value', ARGV[3])
return {1}
`

// readScript compares the token of a fenced read with the fence and, when
// accepted, raises the fence to it and returns the value, atomically. Same
// token comparison as writeScript.
//
// KEYS[1] = the hash; ARGV = token, owner.
// Returns {1, written (0 or 1), value} when accepted, {0, token, owner} of
// the fence when refused.
const readScript = `
local cur = redis.call('HMGET', KEYS[1], 'token', 'owner', 'value')
local t, o, v = cur[1], cur[2], cur[3]
if t then
  local nt = ARGV[1]
  if #nt < #t or (#nt == #t and nt < t) then return {0, t, o or ''} end
  if nt == t and ARGV[2] ~= o then return {0, t, o or ''} end
end
if t ~= ARGV[1] or o ~= ARGV[2] then
  redis.call('HSET', KEYS[1], 'token', ARGV[1], 'owner', ARGV[2])
end
if v then return {1, 1, v} end
return {1, 0, ''}
`

// Redis is a resource stored in Redis: each key is a hash holding the value
// of the last accepted write and the fence (token and owner). The fenced
// flavour compares and writes, or compares and raises the fence on a fenced
// read, in one Lua script each; the unfenced one writes with one HSET and
// reads with one HMGET.
//
// It is meant for a Redis other than the lock's: fencing must hold when the
// lock's Redis fails over. Give the client ContextTimeoutEnabled so that
// context deadlines bound each call.
type Redis struct {
	// send sends every command once, within its ctx even when rdb has
	// ContextTimeoutEnabled false (straight to rdb, a 200ms ctx would wait
	// out a 5s read timeout).
	send   *rediscmd.Sender
	prefix string
	fenced bool
	write  *rediscmd.Script
	read   *rediscmd.Script
}

// NewRedis returns a fenced resource stored through rdb.
func NewRedis(rdb redis.UniversalClient, opts RedisOptions) (*Redis, error) {
	return newRedis(rdb, opts, true)
}

// NewUnfencedRedis returns a resource stored through rdb that accepts every op.
func NewUnfencedRedis(rdb redis.UniversalClient, opts RedisOptions) (*Redis, error) {
	return newRedis(rdb, opts, false)
}

func newRedis(rdb redis.UniversalClient, opts RedisOptions, fenced bool) (*Redis, error) {
	if rdb == nil {
		return nil, fmt.Errorf("new redis resource: client is nil: %w", ErrInvalid)
	}
	p := opts.Prefix
	if p == "" {
		p = DefaultPrefix
	}
	return &Redis{send: rediscmd.NewSender(rdb), prefix: p, fenced: fenced,
		write: rediscmd.NewScript(writeScript), read: rediscmd.NewScript(readScript)}, nil
}

// Write applies w to key if the fencing rule allows it (always, when unfenced).
func (r *Redis) Write(ctx context.Context, key string, w Write) error {
	if err := checkWrite(key, w, r.fenced); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("write %q: %w", key, err)
	}
	token := w.Token
	if w.NoToken {
		token = 0
	}
	tok := strconv.FormatUint(token, 10)
	if !r.fenced {
		_, err := r.send.Do(ctx, "hset", r.prefix+key, "token", tok, "owner", w.Owner, "value", w.Value)
		return classify("write", key, err)
	}
	// Sent once: resent after a lost reply, an applied write could be
	// refused as stale (the fence moved on meanwhile) or applied twice.
	cmd, err := r.send.RunCmd(ctx, r.write, []string{r.prefix + key}, tok, w.Owner, w.Value)
	if err != nil {
		return classify("write", key, err)
	}
	res, err := cmd.Slice()
	if err != nil {
		return classify("write", key, err)
	}
	if len(res) == 0 {
		return fmt.Errorf("write %q: empty reply from script", key)
	}
	if ok, _ := res[0].(int64); ok == 1 {
		return nil
	}
	return staleError("write", key, w.Token, w.Owner, res)
}

// staleError builds the error of a refusal from a script's {0, token, owner} reply.
func staleError(op, key string, token uint64, owner string, res []any) *StaleError {
	se := &StaleError{Op: op, Key: key, Token: token, Owner: owner}
	if len(res) >= 3 {
		ct, _ := res[1].(string)
		se.CurrentToken, _ = strconv.ParseUint(ct, 10, 64)
		se.CurrentOwner, _ = res[2].(string)
	}
	return se
}

// ReadFenced reads key with a fencing token: on a fenced resource one Lua
// script checks the fencing rule and, when it allows the read, raises the
// fence to (token, owner) and returns the state after that; an unfenced
// resource just reads.
func (r *Redis) ReadFenced(ctx context.Context, key string, token uint64, owner string) (Value, error) {
	if err := checkReadFenced(key, owner, r.fenced); err != nil {
		return Value{}, err
	}
	if !r.fenced {
		return r.Read(ctx, key)
	}
	if err := ctx.Err(); err != nil {
		return Value{}, fmt.Errorf("read %q: %w", key, err)
	}
	cmd, err := r.send.RunCmd(ctx, r.read, []string{r.prefix + key}, strconv.FormatUint(token, 10), owner)
	if err != nil {
		return Value{}, classify("read", key, err)
	}
	res, err := cmd.Slice()
	if err != nil {
		return Value{}, classify("read", key, err)
	}
	if len(res) == 0 {
		return Value{}, fmt.Errorf("read %q: empty reply from script", key)
	}
	if ok, _ := res[0].(int64); ok != 1 {
		return Value{}, staleError("read", key, token, owner, res)
	}
	if len(res) != 3 {
		return Value{}, fmt.Errorf("read %q: script reply has %d elements, want 3", key, len(res))
	}
	v := Value{Token: token, Owner: owner}
	written, _ := res[1].(int64)
	v.Written = written == 1
	v.Value, _ = res[2].(string)
	return v, nil
}

// Read returns the state of key; it checks and changes nothing.
func (r *Redis) Read(ctx context.Context, key string) (Value, error) {
	if err := checkRead(key); err != nil {
		return Value{}, err
	}
	if err := ctx.Err(); err != nil {
		return Value{}, fmt.Errorf("read %q: %w", key, err)
	}
	cmd, err := r.send.Do(ctx, "hmget", r.prefix+key, "value", "token", "owner")
	if err != nil {
		return Value{}, classify("read", key, err)
	}
	res, err := cmd.Slice()
	if err != nil {
		return Value{}, classify("read", key, err)
	}
	if len(res) != 3 {
		return Value{}, fmt.Errorf("read %q: HMGET reply has %d elements, want 3", key, len(res))
	}
	var v Value
	v.Value, v.Written = res[0].(string)
	v.Owner, _ = res[2].(string)
	if s, _ := res[1].(string); s != "" {
		t, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return Value{}, fmt.Errorf("read %q: stored token %q: %w", key, s, err)
		}
		v.Token = t
	}
	return v, nil
}

// classify wraps a client error. An error reply from Redis, a failed dial, a
// closed client or an exhausted pool mean the command did not take effect;
// any other failure (timeout, lost connection, context done while waiting)
// may have happened after the command was sent, so the outcome is unknown.
func classify(op, key string, err error) error {
	if err == nil {
		return nil
	}
	if rediscmd.SurelyNoEffect(err) {
		return fmt.Errorf("%s %q: %w", op, key, err)
	}
	return fmt.Errorf("%s %q: %w: %w", op, key, ErrUnknownOutcome, err)
}
