package proc

import (
	"bytes"
	"strings"
	"sync"
)

// Tail keeps the last 4 KiB written to it: a child's stderr, quoted in the
// error that says the child failed. The zero value is ready; it is safe
// for concurrent use.
type Tail struct {
	mu  sync.Mutex
	b   []byte
	cut bool // bytes were dropped from the front
}

// tailMax is how much a Tail keeps.
const tailMax = 4096

// Write implements io.Writer.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > tailMax {
		t.b = t.b[len(t.b)-tailMax:]
		t.cut = true
	}
	return len(p), nil
}

// String returns what is kept, trimmed of surrounding space. When the
// front was dropped, the line cut in two is left out too (when a whole
// line follows it): half a line may hold half a secret (a password the
// child printed), which no redaction of the text would recognise.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.b
	if t.cut {
		if i := bytes.IndexByte(b, '\n'); i >= 0 && i+1 < len(b) {
			b = b[i+1:]
		}
	}
	return strings.TrimSpace(string(b))
}
