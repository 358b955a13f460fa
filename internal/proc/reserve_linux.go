package proc

import (
	"fmt"
	"syscall"
)

// ReservePort binds a TCP socket to 127.0.0.1:port (0 picks one) without
// listening on it, for a server that binds it with SO_REUSEADDR
// (redis-server, etcd: any Go listener); release closes the socket. Linux's automatic port choice (bind or listen on port 0,
// as FreePort and every other test process do) never picks a port another
// socket is bound to, while an explicit bind with SO_REUSEADDR (redis-server
// sets it) still succeeds beside a socket that is bound, has SO_REUSEADDR
// and does not listen. So the port stays the node's while it is down, and
// nothing changes for its clients: a connection to it is refused, as to a
// port nothing holds.
func ReservePort(port int) (int, func() error, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, nil, fmt.Errorf("reserve port %d: socket: %w", port, err)
	}
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		_ = syscall.Close(fd)
		return 0, nil, fmt.Errorf("reserve port %d: SO_REUSEADDR: %w", port, err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		_ = syscall.Close(fd)
		return 0, nil, fmt.Errorf("reserve port %d: bind: %w", port, err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		_ = syscall.Close(fd)
		return 0, nil, fmt.Errorf("reserve port %d: getsockname: %w", port, err)
	}
	in, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		_ = syscall.Close(fd)
		return 0, nil, fmt.Errorf("reserve port %d: unexpected address %T", port, sa)
	}
	return in.Port, func() error { return syscall.Close(fd) }, nil
}
