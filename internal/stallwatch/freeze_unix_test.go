//go:build unix

package stallwatch

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/lockproof/lockproof/internal/owngroup"
)

// freezer returns a function that stops this process for about d: a
// shell it starts sends SIGCONT after d.
func freezer(t *testing.T) func(d time.Duration) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	if !owngroup.Child(t) {
		return nil // the child ran the test
	}
	return func(d time.Duration) {
		cmd := exec.Command("sh", "-c", fmt.Sprintf("sleep %.3f; kill -CONT %d", d.Seconds(), os.Getpid()))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(os.Getpid(), syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
	}
}
