package nemesis

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Clock is a client's clock with an adjustable offset: the clock the lock
// algorithms that read client time get through their dependencies. Now is
// the machine's time plus the offset (wall and monotonic readings both
// shifted). The zero value is an unskewed clock; it is safe for concurrent use.
type Clock struct {
	offset atomic.Int64
	reads  atomic.Int64
}

// Now returns the skewed time.
func (c *Clock) Now() time.Time {
	c.reads.Add(1)
	return time.Now().Add(c.Offset())
}

// Reads returns how many times Now was called.
func (c *Clock) Reads() int64 { return c.reads.Load() }

// Offset returns the current offset.
func (c *Clock) Offset() time.Duration { return time.Duration(c.offset.Load()) }

// SetOffset sets the offset (positive: the clock runs ahead).
func (c *Clock) SetOffset(d time.Duration) { c.offset.Store(int64(d)) }

// ClockSkew sets an offset on one client's clock until Stop.
type ClockSkew struct {
	Client string
	Clock  *Clock
	Offset time.Duration

	mu      sync.Mutex
	applied bool
	base    int64 // the clock's reads at Start
	reads   int64 // reads while skewed
}

// Name implements Fault.
func (f *ClockSkew) Name() string { return fmt.Sprintf("clock-skew %s %v", f.Client, f.Offset) }

// Start skews the clock.
func (f *ClockSkew) Start(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.base = f.Clock.Reads()
	f.Clock.SetOffset(f.Offset)
	f.applied = true
	return nil
}

// Stop sets the offset back to zero.
func (f *ClockSkew) Stop(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Clock.SetOffset(0)
	if f.applied {
		f.reads = f.Clock.Reads() - f.base
	}
	return nil
}
