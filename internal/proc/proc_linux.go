//go:build linux

package proc

import "syscall"

// Attr is the SysProcAttr of a child: its own process group (so that a
// signal reaches what it forks too), killed when its parent dies.
func Attr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
