//go:build linux

package proc

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// state reads a process's state letter from /proc (R, S, T for stopped, Z...).
func state(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+2:])[0]
}

// TestSignals stops, thaws and kills a real child through its group.
func TestSignals(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = Attr()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() { _ = KillGroup(pid) }()
	if !Alive(pid) {
		t.Fatal("child not alive")
	}
	wait := func(want string) {
		t.Helper()
		for i := 0; i < 200 && state(t, pid) != want; i++ {
			time.Sleep(10 * time.Millisecond)
		}
		if got := state(t, pid); got != want {
			t.Fatalf("state %q, want %q", got, want)
		}
	}
	if err := StopGroup(pid); err != nil {
		t.Fatal(err)
	}
	wait("T")
	if err := ContGroup(pid); err != nil {
		t.Fatal(err)
	}
	wait("S")
	if err := StopGroup(pid); err != nil { // a stopped child must die too
		t.Fatal(err)
	}
	if err := KillGroup(pid); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("child still running after KillGroup")
	}
	if Alive(pid) {
		t.Error("Alive after the child was reaped")
	}
	if err := ContGroup(pid); !Gone(err) {
		t.Errorf("signal to a reaped child: %v, want Gone", err)
	}
}
