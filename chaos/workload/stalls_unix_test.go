//go:build unix

package workload

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
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

// TestStallIsRecordedAsAWindow: the process stopped whole for 300ms (as a
// loaded machine may stop it) shows in the history as a stall window of
// its clients, on the history's clock, that the checker reads as a fault.
func TestStallIsRecordedAsAWindow(t *testing.T) {
	if !inOwnGroup(t) {
		return // the child ran the test
	}
	rec := history.NewRecorder(nil, history.Options{})
	stop := watchStalls(context.Background(), rec, []string{"c0-1", "c0-2"})
	time.Sleep(30 * time.Millisecond)
	before := rec.Now()
	cont := exec.Command("sh", "-c", fmt.Sprintf("sleep 0.3; kill -CONT %d", os.Getpid()))
	if err := cont.Start(); err != nil {
		t.Skip(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	_ = cont.Wait()
	time.Sleep(30 * time.Millisecond)
	stop()
	after := rec.Now()
	for _, o := range rec.Ops() {
		if o.Kind != history.Fault || contract.FaultKind(o.Name) != contract.FaultStall || o.Return-o.Call < int64(250*time.Millisecond) {
			continue // a stall of the loaded machine's, maybe
		}
		if o.Name != "stall c0-1 c0-2" || o.Call < before-int64(100*time.Millisecond) || o.Return > after || !o.Completed {
			t.Errorf("stall %+v, want one named for c0-1 and c0-2 within [%d, %d]", o, before, after)
		}
		if err := o.Validate(); err != nil {
			t.Error(err)
		}
		return
	}
	t.Fatalf("no stall of about 300ms in %+v", rec.Ops())
}
