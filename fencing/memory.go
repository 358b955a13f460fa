package fencing

import (
	"context"
	"fmt"
	"sync"
)

// Memory is an in-process resource, fenced or not. It is safe for concurrent
// use. Create it with NewMemory or NewUnfencedMemory.
type Memory struct {
	fenced bool
	mu     sync.Mutex
	m      map[string]entry
}

// entry is the state of one key; set is false until a fenced resource
// accepted an op on it (its fence is unset).
type entry struct {
	v   Value
	set bool
}

// NewMemory returns an empty fenced in-memory resource.
func NewMemory() *Memory { return &Memory{fenced: true, m: make(map[string]entry)} }

// NewUnfencedMemory returns an empty in-memory resource that accepts every op.
func NewUnfencedMemory() *Memory { return &Memory{m: make(map[string]entry)} }

// Write applies w to key if the fencing rule allows it (always, when unfenced).
// A context already done is refused before anything happens.
func (r *Memory) Write(ctx context.Context, key string, w Write) error {
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
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.m[key]
	if r.fenced && !accepts(cur.v, cur.set, w.Token, w.Owner) {
		return &StaleError{Op: "write", Key: key, Token: w.Token, Owner: w.Owner, CurrentToken: cur.v.Token, CurrentOwner: cur.v.Owner}
	}
	r.m[key] = entry{v: Value{Value: w.Value, Token: token, Owner: w.Owner, Written: true}, set: true}
	return nil
}

// ReadFenced reads key with a fencing token: on a fenced resource it is
// accepted iff the fencing rule allows it, and then raises the fence to
// (token, owner) and returns the state after that; an unfenced resource
// just reads. A context already done is refused before anything happens.
func (r *Memory) ReadFenced(ctx context.Context, key string, token uint64, owner string) (Value, error) {
	if err := checkReadFenced(key, owner, r.fenced); err != nil {
		return Value{}, err
	}
	if !r.fenced {
		return r.Read(ctx, key)
	}
	if err := ctx.Err(); err != nil {
		return Value{}, fmt.Errorf("read %q: %w", key, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.m[key]
	if !accepts(cur.v, cur.set, token, owner) {
		return Value{}, &StaleError{Op: "read", Key: key, Token: token, Owner: owner, CurrentToken: cur.v.Token, CurrentOwner: cur.v.Owner}
	}
	cur.v.Token, cur.v.Owner, cur.set = token, owner, true
	r.m[key] = cur
	return cur.v, nil
}

// Read returns the state of key; it checks and changes nothing.
func (r *Memory) Read(ctx context.Context, key string) (Value, error) {
	if err := checkRead(key); err != nil {
		return Value{}, err
	}
	if err := ctx.Err(); err != nil {
		return Value{}, fmt.Errorf("read %q: %w", key, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[key].v, nil
}
