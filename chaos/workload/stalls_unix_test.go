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
	"github.com/lockproof/lockproof/internal/owngroup"
)

// TestStallIsRecordedAsAWindow: the process stopped whole for 300ms (as a
// loaded machine may stop it) shows in the history as a stall window of
// its clients, on the history's clock, that the checker reads as a fault.
func TestStallIsRecordedAsAWindow(t *testing.T) {
	if !owngroup.Child(t) {
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
