// Package alone lets a test have the machine to itself among the tests
// that ask for it, across packages and test binaries: go test runs
// packages at once (one per core), and a test whose verdict needs the
// cores' time (32 clients churning on one key, a fair queue's hand-offs
// faster than a hand-off lease) fails for the machine, not the code,
// beside one that starts three JVMs. Each such test calls Take; the
// others go on beside them.
package alone

import (
	"os"
	"path/filepath"
	"testing"
)

// path is the lock file every test binary of the machine shares.
func path() string { return filepath.Join(os.TempDir(), "lockproof-alone.lock") }

// Take waits until no other test that took it holds it, and holds it
// until tb ends.
func Take(tb testing.TB) {
	tb.Helper()
	release, err := take(path())
	if err != nil {
		tb.Fatalf("alone: %v", err)
	}
	tb.Cleanup(release)
}
