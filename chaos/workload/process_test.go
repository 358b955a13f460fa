package workload

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/lineproto"
	"github.com/lockproof/lockproof/locker"
)

// procState reads a process's state letter (R, S, T for stopped, Z) from /proc.
func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+2:])[0]
}

// TestLockProcessFollowsItsClient: a client whose lock runs in a process of
// its own (package lineproto) takes that process along when its gate
// changes: a pause freezes it (SIGSTOP), a resume thaws it, a crash kills
// it. Without this, pause-client would freeze only the harness's half of
// the client, and the lock's own timers would run on.
func TestLockProcessFollowsItsClient(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc to read process states from")
	}
	srv := redistest.Start(t)
	p := filepath.Join(t.TempDir(), "lock.sh")
	if err := os.WriteFile(p, []byte(`while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed 's/^{"id":\([0-9]*\).*/\1/')
  case $line in
  *'"op":"hello"'*) echo "{\"id\":$id,\"result\":\"ok\",\"version\":1,\"ops\":[\"acquire\"]}";;
  *) echo "{\"id\":$id,\"result\":\"ok\"}";;
  esac
done
`), 0o755); err != nil {
		t.Fatal(err)
	}
	e, err := lineproto.Entry(lineproto.Config{Name: "sh-lock", Command: []string{"sh", p}, Profile: locker.ProfileNone})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := locker.NewRegistry(e)
	if err != nil {
		t.Fatal(err)
	}
	dial := func(string) func(ctx context.Context, network, addr string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext
	}
	w, err := NewOn(Config{Lock: "sh-lock", Locks: reg, Clients: 1}, dial, srv.Addr, srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	c := w.Clients[0]
	pid := c.Locker().(locker.Process).Pid()
	if pid == 0 {
		t.Fatal("the lock's process does not run")
	}
	waitState := func(want func(string) bool, what string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !want(procState(pid)) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d is %q; want it %s", pid, procState(pid), what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	c.Gate.Pause()
	waitState(func(s string) bool { return s == "T" }, "stopped after the gate paused")
	c.Gate.Resume()
	waitState(func(s string) bool { return s != "T" && s != "" }, "running after the gate resumed")
	// A pause armed at a point of the workload strikes the process too.
	c.Gate.PauseAfter("check")
	passed := make(chan error, 1)
	go func() { passed <- c.Gate.Pass(context.Background(), "check") }()
	waitState(func(s string) bool { return s == "T" }, "stopped once the pause after the lease check struck")
	c.Gate.Resume()
	if err := <-passed; err != nil {
		t.Fatal(err)
	}
	waitState(func(s string) bool { return s != "T" && s != "" }, "running after the gate resumed")
	c.Gate.Crash()
	waitState(func(s string) bool { return s == "" }, "gone after the gate crashed")
	// The process is reaped (its /proc entry gone) inside cmd.Wait, a
	// moment before the Locker's reader marks it exited: wait for that
	// within the same bound.
	deadline := time.Now().Add(5 * time.Second)
	for c.Locker().(locker.Process).Pid() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the Locker still gives a pid 5s after its process was killed")
		}
		time.Sleep(time.Millisecond)
	}
}
