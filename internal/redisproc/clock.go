package redisproc

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"time"
)

// ErrNoClockShim is returned by ClockBehind when datefudge (Debian package
// "datefudge") is not installed: without it a node's clock cannot be set
// apart from the host's.
var ErrNoClockShim = errors.New("datefudge.so not found (apt-get install datefudge)")

// clockShims are where Debian and Ubuntu install datefudge's preload
// library, per architecture; the glob covers the multiarch directories.
var clockShims = []string{
	"/usr/lib/*/datefudge/datefudge.so",
	"/usr/lib/datefudge/datefudge.so",
}

// ClockShim returns the path of datefudge's preload library, or an error
// wrapping ErrNoClockShim.
func ClockShim() (string, error) {
	for _, pattern := range clockShims {
		if m, _ := filepath.Glob(pattern); len(m) > 0 {
			return m[0], nil
		}
	}
	return "", ErrNoClockShim
}

// ClockBehind returns the Config.Env that makes a redis-server's wall clock
// (TIME, key expiry, everything read through gettimeofday, clock_gettime
// CLOCK_REALTIME and time) run d behind the host's, by preloading datefudge.
// Its monotonic clock is untouched, so its timers run as usual. datefudge
// shifts by whole seconds: d must be a positive multiple of a second.
//
// Why datefudge and not libfaketime: libfaketime's initialisation recurses
// with the jemalloc that Debian's redis-server links (it hangs or aborts at
// start); datefudge reads no clock and allocates nothing at start.
func ClockBehind(d time.Duration) ([]string, error) {
	if d <= 0 || d%time.Second != 0 {
		return nil, fmt.Errorf("clock skew %v: want a positive whole number of seconds (datefudge shifts by seconds)", d)
	}
	shim, err := ClockShim()
	if err != nil {
		return nil, err
	}
	return []string{"DATEFUDGE=" + strconv.FormatInt(int64(d/time.Second), 10), "LD_PRELOAD=" + shim}, nil
}
