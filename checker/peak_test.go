package checker

import (
	"runtime"
	"sync"
	"time"
)

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
