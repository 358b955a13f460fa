package docker

import (
	"bytes"
	stdlog "log"
	"log/slog"
	"os"
	"strings"
	"testing"

	tclog "github.com/testcontainers/testcontainers-go/log"
)

// TestRouteBanner: testcontainers' default logger (stderr) is routed to
// the environment's slog at Debug, where `lockproof run` keeps it out of
// its output; a logger the user set is left alone.
func TestRouteBanner(t *testing.T) {
	saved := tclog.Default()
	t.Cleanup(func() { tclog.SetDefault(saved) })

	var got bytes.Buffer
	log := slog.New(slog.NewTextHandler(&got, &slog.HandlerOptions{Level: slog.LevelDebug}))
	tclog.SetDefault(stdlog.New(os.Stderr, "", stdlog.LstdFlags)) // testcontainers' own default
	routeBanner(log)
	tclog.Printf("Connected to docker: %s", "banner")
	if s := got.String(); !strings.Contains(s, "level=DEBUG") || !strings.Contains(s, "Connected to docker: banner") {
		t.Errorf("testcontainers' default logger not routed to slog at Debug: slog got %q", s)
	}

	var mine bytes.Buffer
	user := stdlog.New(&mine, "", 0)
	tclog.SetDefault(user)
	got.Reset()
	routeBanner(log)
	tclog.Printf("hello")
	if mine.String() != "hello\n" || got.Len() != 0 {
		t.Errorf("the user's own logger was replaced: it got %q, slog got %q", mine.String(), got.String())
	}
}

// TestAvailableRoutesBanner: the probe that picks an environment (Check,
// through Available) is the first Docker call of a run, and it routes
// testcontainers' banner too: `lockproof run` on a machine without
// redis-server printed it before saying what Docker lacked.
func TestAvailableRoutesBanner(t *testing.T) {
	saved := tclog.Default()
	t.Cleanup(func() { tclog.SetDefault(saved) })
	tclog.SetDefault(stdlog.New(os.Stderr, "", stdlog.LstdFlags)) // testcontainers' own default
	Available(t.Context())                                        // whether an engine answers or not
	if l, ok := tclog.Default().(*stdlog.Logger); ok && l.Writer() == os.Stderr {
		t.Error("Available left testcontainers' logger on stderr: its banner reaches the run's output")
	}
}
