package proc

import (
	"strings"
	"sync"
)

// Tail keeps the last 4 KiB written to it: a child's stderr, quoted in the
// error that says the child failed. The zero value is ready; it is safe
// for concurrent use.
type Tail struct {
	mu sync.Mutex
	b  []byte
}

// Write implements io.Writer.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = t.b[len(t.b)-4096:]
	}
	return len(p), nil
}

// String returns what is kept, trimmed of surrounding space.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}
