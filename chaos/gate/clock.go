package gate

import (
	"sync/atomic"
	"time"
)

// Clock is a client's clock with an adjustable offset, beside its Gate:
// the clock the lock algorithms that read client time get through their
// dependencies (nemesis.ClockSkew sets the offset). Now is
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
