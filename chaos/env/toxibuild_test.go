package env

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
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

// toxiNameForTest is the file name BuildToxiproxy gives the server built
// from this source (the source's hash), computed as it does.
func toxiNameForTest(t *testing.T) string {
	t.Helper()
	h := sha256.New()
	for _, name := range []string{"main.go", "go.mod.txt", "go.sum.txt"} {
		b, err := toxiSource.ReadFile("toxiserver/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if name == "main.go" {
			b = []byte(strings.Replace(string(b), "//go:build ignore\n", "", 1))
		}
		fmt.Fprintf(h, "%s %d\n", name, len(b))
		h.Write(b)
	}
	fmt.Fprintf(h, "%s/%s\n", runtime.GOOS, runtime.GOARCH)
	return "toxiserver-" + hex.EncodeToString(h.Sum(nil))[:16]
}

// TestToxiCacheIsPrivate (issue 62.12): with no user cache directory, the
// server was cached in the shared temp directory under a name anyone can
// compute, and a file there was run unchecked. A file planted at that name
// (in the shared lockproof directory, or in this user's own cache directory
// but writable by others, a link, or another user's) is never returned:
// it is rebuilt instead (here the build is cancelled at once, so
// BuildToxiproxy fails rather than build). The cache directory it makes is
// 0700.
func TestToxiCacheIsPrivate(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the cache's ownership and modes are checked on Unix")
	}
	tmp := t.TempDir()
	t.Setenv(ToxiServerEnvVar, "")
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "")
	t.Setenv("TMPDIR", tmp)
	if _, err := os.UserCacheDir(); err == nil {
		t.Skip("os.UserCacheDir finds a directory without HOME and XDG_CACHE_HOME here")
	}
	name := toxiNameForTest(t)
	plant := func(dir string, mode os.FileMode) string {
		t.Helper()
		if err := os.MkdirAll(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\necho planted\n"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	check := func(what, planted string) {
		t.Helper()
		bin, err := BuildToxiproxy(cancelled)
		if err == nil && bin == planted {
			t.Errorf("%s: BuildToxiproxy returned the planted %s; want it rebuilt", what, planted)
		}
	}
	shared := plant(filepath.Join(tmp, "lockproof"), 0o755)
	check("a file in the shared temp directory's lockproof folder", shared)

	own := filepath.Join(tmp, "lockproof-"+strconv.Itoa(os.Getuid()))
	if err := os.RemoveAll(own); err != nil {
		t.Fatal(err)
	}
	check("no cache directory yet", "")
	if fi, err := os.Lstat(own); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("the cache directory made: %v, %v; want a directory of mode 0700 at %s", fi, err, own)
	}
	check("a file writable by others in the user's cache", plant(own, 0o777))
	if err := os.RemoveAll(filepath.Join(own, name)); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(shared, filepath.Join(own, name)); err != nil {
		t.Fatal(err)
	}
	check("a link in the user's cache", filepath.Join(own, name))
	if os.Getuid() == 0 {
		if err := os.RemoveAll(filepath.Join(own, name)); err != nil {
			t.Fatal(err)
		}
		p := plant(own, 0o755)
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		check("another user's file in the user's cache", p)
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(own, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		check("another user's cache directory", plant(own, 0o755))
	}
}
