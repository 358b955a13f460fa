package checker

import (
	"runtime"
	"sync"
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

// peakSampler samples the live heap until stopped and returns its maximum.
type peakSampler struct {
	done chan struct{}
	wg   sync.WaitGroup
	max  uint64
}

func newPeakSampler() *peakSampler {
	s := &peakSampler{done: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			s.max = max(s.max, m.HeapAlloc)
			select {
			case <-s.done:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *peakSampler) stop() uint64 {
	close(s.done)
	s.wg.Wait()
	return s.max
}
