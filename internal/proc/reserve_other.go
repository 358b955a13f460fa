//go:build !linux

package proc

import (
	"fmt"
	"net"
)

// ReservePort holds nothing where a bound, non-listening socket is not known to
// keep automatic port choice away while letting the server bind beside it
// (BSD sockets refuse the second bind without SO_REUSEPORT): the port is
// chosen as FreePort does, and a restart may find it taken.
func ReservePort(port int) (int, func() error, error) {
	if port != 0 {
		return port, func() error { return nil }, nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, nil, fmt.Errorf("find free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, func() error { return nil }, nil
}
