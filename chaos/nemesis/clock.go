package nemesis

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/lockproof/lockproof/chaos/gate"
)

// ClockSkew sets an offset on one client's clock until Stop.
type ClockSkew struct {
	Client string
	Clock  *gate.Clock
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
