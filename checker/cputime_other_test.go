//go:build !unix

package checker

import "time"

// cpuTime is not measured here: the benchmarks report 0 CPU seconds.
func cpuTime() time.Duration { return 0 }
