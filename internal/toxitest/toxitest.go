// Package toxitest builds lockproof's Toxiproxy server before a package's
// tests run: the first build takes half a minute of CPU (more with the
// other packages' tests beside it), longer than the deadline of a test
// that starts an environment, so each package whose tests start one calls
// Build from its TestMain, with a deadline of its own. One process builds
// at a time; the others wait for it (env.BuildToxiproxy).
package toxitest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/lockproof/lockproof/chaos/env"
)

// Build builds the server (or finds it built) within 10 minutes. A failure
// is printed, not fatal: the tests that need the server fail on their own,
// with the same error, and the others run.
func Build() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := env.BuildToxiproxy(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "toxitest:", err)
	}
}

// Main is a TestMain that builds the server, then runs the tests.
func Main(m *testing.M) {
	Build()
	os.Exit(m.Run())
}

// Server starts a Toxiproxy server (env.StartToxiproxy) for the test and
// stops it when the test ends, failing the test when that fails.
func Server(tb testing.TB) *env.ToxiServer {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	toxi, err := env.StartToxiproxy(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := toxi.Close(ctx); err != nil {
			tb.Errorf("close toxiproxy: %v", err)
		}
	})
	return toxi
}
