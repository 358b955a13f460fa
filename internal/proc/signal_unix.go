//go:build unix

package proc

import (
	"errors"
	"syscall"
)

// StopGroup freezes the process group of pid (SIGSTOP): its processes keep
// their sockets but run nothing.
func StopGroup(pid int) error { return syscall.Kill(-pid, syscall.SIGSTOP) }

// ContGroup thaws the process group of pid (SIGCONT).
func ContGroup(pid int) error { return syscall.Kill(-pid, syscall.SIGCONT) }

// KillGroup ends the process group of pid at once (SIGKILL), thawing it
// first: a stopped process must run to die.
func KillGroup(pid int) error {
	_ = syscall.Kill(-pid, syscall.SIGCONT)
	return syscall.Kill(-pid, syscall.SIGKILL)
}

// Alive reports whether a process pid exists (perhaps another user's).
func Alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Gone reports whether err says the process no longer exists.
func Gone(err error) bool { return errors.Is(err, syscall.ESRCH) }
