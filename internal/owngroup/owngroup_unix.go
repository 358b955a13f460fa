//go:build unix

// Package owngroup runs a test again in a child process of its own process
// group, for tests that stop their own process (SIGSTOP): in the test
// binary's group that can leave the group orphaned and stopped, and the
// kernel then sends SIGHUP (a go test run in the background of a shell
// that went on died so); alone in its group, under a parent of the same
// session, the child is never orphaned.
package owngroup

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// envVar marks the child.
const envVar = "LOCKPROOF_FREEZE_CHILD"

// Child runs the calling test again in a child process of its own process
// group and reports whether this is that child (which then runs the test's
// body); in the parent it fails the test when the child did.
func Child(t *testing.T) bool {
	t.Helper()
	if os.Getenv(envVar) == "1" {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), envVar+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the test in a process group of its own: %v\n%s", err, out)
	}
	return false
}
