//go:build !unix

package env

import "io/fs"

// ownedByMe: the system keeps no Unix owner; the cache directory is the
// user's own (os.UserCacheDir).
func ownedByMe(fs.FileInfo) bool { return true }
