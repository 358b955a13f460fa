package env

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestBuildLockWaitsForTheBuilder: while another process holds the build's
// lock, a second caller waits, and returns when the built file appears
// (without taking the lock); it gives up at its deadline; and a lock left
// by a builder that died (older than any build) is broken.
func TestBuildLockWaitsForTheBuilder(t *testing.T) {
	dir := t.TempDir()
	lock, bin := filepath.Join(dir, "x.lock"), filepath.Join(dir, "x")
	unlock, err := lockFile(context.Background(), lock, bin)
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err = lockFile(ctx, lock, bin)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second caller while the lock is held: %v; want it to wait until its deadline", err)
	}

	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := lockFile(ctx, lock, bin)
		got <- err
	}()
	time.Sleep(200 * time.Millisecond)
	if err := os.WriteFile(bin, []byte("built"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiter once the file is built: %v", err)
	}
	if _, err := os.Stat(lock); err != nil {
		t.Fatalf("the waiter took or removed the builder's lock: %v", err)
	}
	unlock()
	if _, err := os.Stat(lock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("unlock left the lock: %v", err)
	}

	// A builder that died: its lock is older than any build.
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(lock, old, old); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	unlock, err = lockFile(ctx, lock, filepath.Join(dir, "never"))
	if err != nil {
		t.Fatalf("a stale lock: %v; want it broken", err)
	}
	unlock()
}
