package workload

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fencing"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/locker"
)

func TestConfigErrorsNameTheField(t *testing.T) {
	reg, err := locker.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	with := func(c Config) Config { c.Lock, c.Locks = "fenced", reg; return c }
	for _, tc := range []struct {
		cfg   Config
		field string
	}{
		{with(Config{Keys: -1}), "Keys"},
		{with(Config{Clients: -2}), "Clients"},
		{with(Config{TTL: time.Microsecond}), "TTL"},
		{with(Config{Hold: -time.Second}), "Hold"},
		// No lock or registry of the workload's own: the caller says.
		{Config{Locks: reg}, "Lock"},
		{Config{Lock: "fenced"}, "Locks"},
	} {
		_, err := tc.cfg.withDefaults()
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%+v: %v; want ErrConfig naming %s", tc.cfg, err, tc.field)
		}
	}
	c, err := with(Config{}).withDefaults()
	if err != nil || c.Keys != 1 || c.Clients != 3 || c.TTL <= 0 || c.OpTimeout <= 0 {
		t.Fatalf("defaults = %+v, %v", c, err)
	}
}

func TestResultMapping(t *testing.T) {
	lock := []struct {
		err  error
		want history.Result
	}{
		{nil, history.OK},
		{fmt.Errorf("x: %w", locker.ErrNotAcquired), history.Fail},
		{fmt.Errorf("x: %w", locker.ErrNotHeld), history.Fail},
		{fmt.Errorf("x: %w", locker.ErrUnknownOutcome), history.Unknown},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), history.Unknown},
		{errors.New("dial refused"), history.Fail},
	}
	for _, tc := range lock {
		if got, err := lockResult(tc.err); err != nil || got != tc.want {
			t.Errorf("lockResult(%v) = %s, %v; want %s", tc.err, got, err, tc.want)
		}
	}
	if _, err := lockResult(locker.ErrInvalid); err == nil {
		t.Error("lockResult(ErrInvalid): want an error (a harness bug), not a result")
	}
	res := []struct {
		err  error
		want history.Result
	}{
		{nil, history.OK},
		{&fencing.StaleError{Key: "k"}, history.Rejected},
		{fmt.Errorf("x: %w", fencing.ErrUnknownOutcome), history.Unknown},
		{errors.New("closed"), history.Unknown},
	}
	for _, tc := range res {
		if got := resourceResult(tc.err); got != tc.want {
			t.Errorf("resourceResult(%v) = %s; want %s", tc.err, got, tc.want)
		}
	}
}

// TestParseMix: --mix names override the defaults one by one; a bad name,
// value or share is an error naming it; String reads back.
func TestParseMix(t *testing.T) {
	m, err := ParseMix("blocking=1, reenter=0")
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultMix()
	want.Blocking, want.Reenter = 1, 0
	if m != want {
		t.Fatalf("ParseMix = %+v; want %+v", m, want)
	}
	if back, err := ParseMix(m.String()); err != nil || back != m {
		t.Fatalf("ParseMix(String()) = %+v, %v; want %+v", back, err, m)
	}
	if m, err := ParseMix(""); err != nil || m != DefaultMix() {
		t.Fatalf("empty mix: %+v, %v; want the default", m, err)
	}
	for in, name := range map[string]string{"blocking=2": "blocking", "nap=0.5": "nap", "renew=x": "renew", "cancel": "cancel", "long-work=-0.1": "long-work"} {
		if _, err := ParseMix(in); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), name) {
			t.Errorf("ParseMix(%q) = %v; want ErrConfig naming %s", in, err, name)
		}
	}
}
