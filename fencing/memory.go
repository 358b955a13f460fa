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
	m      map[string]Value
}

// NewMemory returns an empty fenced in-memory resource.
func NewMemory() *Memory { return &Memory{fenced: true, m: make(map[string]Value)} }

// NewUnfencedMemory returns an empty in-memory resource that accepts every write.
func NewUnfencedMemory() *Memory { return &Memory{m: make(map[string]Value)} }

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
	if r.fenced && !accepts(cur, w) {
		return &StaleError{Key: key, Token: w.Token, Owner: w.Owner, CurrentToken: cur.Token, CurrentOwner: cur.Owner}
	}
	r.m[key] = Value{Value: w.Value, Token: token, Owner: w.Owner, Written: true}
	return nil
}

// Read returns the last accepted write to key.
func (r *Memory) Read(ctx context.Context, key string) (Value, error) {
	if err := checkRead(key); err != nil {
		return Value{}, err
	}
	if err := ctx.Err(); err != nil {
		return Value{}, fmt.Errorf("read %q: %w", key, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[key], nil
}
