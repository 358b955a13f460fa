//go:build !unix

package proc

import (
	"os"
	"syscall"
)

// Attr is the SysProcAttr of a child: none here (no process groups).
func Attr() *syscall.SysProcAttr { return nil }

// StopGroup is unsupported: this platform cannot freeze a process.
func StopGroup(pid int) error { return ErrUnsupported }

// ContGroup is unsupported: this platform cannot freeze a process.
func ContGroup(pid int) error { return ErrUnsupported }

// KillGroup ends the process pid (there are no groups here).
func KillGroup(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}

// Alive reports whether a process pid exists.
func Alive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	_ = p.Release()
	return true
}

// Gone reports whether err says the process no longer exists.
func Gone(err error) bool { return err == os.ErrProcessDone }
