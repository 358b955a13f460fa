//go:build unix

package env

import (
	"io/fs"
	"os"
	"syscall"
)

// ownedByMe: the file of fi is this process's user's.
func ownedByMe(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Getuid()
}
