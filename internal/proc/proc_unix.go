//go:build unix && !linux

package proc

import "syscall"

// Attr is the SysProcAttr of a child: its own process group. (Only Linux
// can have a child killed with its parent; here a parent that crashes
// leaves its children running.)
func Attr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
