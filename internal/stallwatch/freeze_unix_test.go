//go:build unix

package stallwatch

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// inOwnGroup runs the calling test again in a child process of its own
// process group and reports whether this is that child (which then runs
// the test's body). A process that stops itself (SIGSTOP) in the test
// binary's group can leave that group orphaned and stopped, for which the
// kernel sends SIGHUP (a go test run in the background of a shell that
// went on died so); alone in its group, under a parent of the same
// session, it is never orphaned.
func inOwnGroup(t *testing.T) bool {
	t.Helper()
	if os.Getenv("LOCKPROOF_FREEZE_CHILD") == "1" {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "LOCKPROOF_FREEZE_CHILD=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the test in a process group of its own: %v\n%s", err, out)
	}
	return false
}

// freezer returns a function that stops this process for about d: a
// shell it starts sends SIGCONT after d.
func freezer(t *testing.T) func(d time.Duration) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	if !inOwnGroup(t) {
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
