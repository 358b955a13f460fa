package fencedv2

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/fencing"
	"github.com/lockproof/lockproof/internal/rediscmd"
)

// Resource is package fencing's Redis resource as it was at commit 32451ad,
// frozen with the lock: it sends its commands on the go-redis client
// itself (Script.Run, Do, HMGet), so a client with ContextTimeoutEnabled
// false keeps a call running past its ctx until the client's read
// timeout (review defect 9, fixed in package fencing by its Sender). Do
// not fix it.
type Resource struct {
	rdb    redis.UniversalClient
	prefix string
	fenced bool
	write  *rediscmd.Script
	read   *rediscmd.Script
}

// writeScript and readScript are package fencing's, unchanged since.
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

// NewResource returns the old resource on rdb under prefix: fenced, or
// accepting every op.
func NewResource(rdb redis.UniversalClient, prefix string, fenced bool) *Resource {
	return &Resource{rdb: rdb, prefix: prefix, fenced: fenced, write: rediscmd.NewScript(writeScript), read: rediscmd.NewScript(readScript)}
}

// Write applies w to key if the fencing rule allows it (always, when unfenced).
func (r *Resource) Write(ctx context.Context, key string, w fencing.Write) error {
	if key == "" || r.fenced && (w.NoToken || w.Owner == "") {
		return fmt.Errorf("write %q: key, token or owner missing: %w", key, fencing.ErrInvalid)
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
		_, err := rediscmd.Do(ctx, r.rdb, "hset", r.prefix+key, "token", tok, "owner", w.Owner, "value", w.Value)
		return classify("write", key, err)
	}
	cmd, err := r.write.Run(ctx, r.rdb, []string{r.prefix + key}, tok, w.Owner, w.Value)
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

func staleError(op, key string, token uint64, owner string, res []any) *fencing.StaleError {
	se := &fencing.StaleError{Op: op, Key: key, Token: token, Owner: owner}
	if len(res) >= 3 {
		ct, _ := res[1].(string)
		se.CurrentToken, _ = strconv.ParseUint(ct, 10, 64)
		se.CurrentOwner, _ = res[2].(string)
	}
	return se
}

// ReadFenced reads key with a fencing token, raising the fence to it.
func (r *Resource) ReadFenced(ctx context.Context, key string, token uint64, owner string) (fencing.Value, error) {
	if !r.fenced {
		return r.Read(ctx, key)
	}
	if key == "" || owner == "" {
		return fencing.Value{}, fmt.Errorf("read %q: key or owner missing: %w", key, fencing.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return fencing.Value{}, fmt.Errorf("read %q: %w", key, err)
	}
	cmd, err := r.read.Run(ctx, r.rdb, []string{r.prefix + key}, strconv.FormatUint(token, 10), owner)
	if err != nil {
		return fencing.Value{}, classify("read", key, err)
	}
	res, err := cmd.Slice()
	if err != nil {
		return fencing.Value{}, classify("read", key, err)
	}
	if len(res) == 0 {
		return fencing.Value{}, fmt.Errorf("read %q: empty reply from script", key)
	}
	if ok, _ := res[0].(int64); ok != 1 {
		return fencing.Value{}, staleError("read", key, token, owner, res)
	}
	if len(res) != 3 {
		return fencing.Value{}, fmt.Errorf("read %q: script reply has %d elements, want 3", key, len(res))
	}
	v := fencing.Value{Token: token, Owner: owner}
	written, _ := res[1].(int64)
	v.Written = written == 1
	v.Value, _ = res[2].(string)
	return v, nil
}

// Read returns the state of key; it checks and changes nothing.
func (r *Resource) Read(ctx context.Context, key string) (fencing.Value, error) {
	if key == "" {
		return fencing.Value{}, fmt.Errorf("read: key is empty: %w", fencing.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return fencing.Value{}, fmt.Errorf("read %q: %w", key, err)
	}
	res, err := r.rdb.HMGet(ctx, r.prefix+key, "value", "token", "owner").Result()
	if err != nil {
		return fencing.Value{}, classify("read", key, err)
	}
	if len(res) != 3 {
		return fencing.Value{}, fmt.Errorf("read %q: HMGET reply has %d elements, want 3", key, len(res))
	}
	var v fencing.Value
	v.Value, v.Written = res[0].(string)
	v.Owner, _ = res[2].(string)
	if s, _ := res[1].(string); s != "" {
		t, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return fencing.Value{}, fmt.Errorf("read %q: stored token %q: %w", key, s, err)
		}
		v.Token = t
	}
	return v, nil
}

// classify wraps a client error as package fencing did: surely no effect,
// or an unknown outcome.
func classify(op, key string, err error) error {
	if err == nil {
		return nil
	}
	if rediscmd.SurelyNoEffect(err) {
		return fmt.Errorf("%s %q: %w", op, key, err)
	}
	return fmt.Errorf("%s %q: %w: %w", op, key, fencing.ErrUnknownOutcome, err)
}
