package alone

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// TestTakeExcludes: while one holder has the lock, a second waits, and
// gets it once the first lets go.
func TestTakeExcludes(t *testing.T) {
	p := filepath.Join(t.TempDir(), "l")
	first, err := take(p)
	if err != nil {
		t.Fatal(err)
	}
	var got atomic.Bool
	done := make(chan func())
	go func() {
		r, err := take(p)
		if err != nil {
			t.Error(err)
		}
		got.Store(true)
		done <- r
	}()
	time.Sleep(100 * time.Millisecond)
	if got.Load() {
		t.Fatal("a second holder took the lock while the first held it")
	}
	first()
	select {
	case r := <-done:
		r()
	case <-time.After(5 * time.Second):
		t.Fatal("the second holder never got the lock")
	}
	_ = os.Remove(p)
}
