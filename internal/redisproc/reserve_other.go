//go:build !linux

package redisproc

// reserve holds nothing where a bound, non-listening socket is not known to
// keep automatic port choice away while letting redis-server bind beside it
// (BSD sockets refuse the second bind without SO_REUSEPORT): the port is
// chosen as FreePort does, and a restart may find it taken.
func reserve(port int) (int, func() error, error) {
	if port != 0 {
		return port, func() error { return nil }, nil
	}
	p, err := FreePort()
	return p, func() error { return nil }, err
}
