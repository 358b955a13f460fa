//go:build unix

package checker

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user+system) the process used so far: on a
// shared machine it says more than the wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
