// Package proc starts and signals the child processes lockproof runs
// (redis-server, redis-sentinel, child-process clients), with what each
// platform offers: on Linux a child runs in its own process group and dies
// with its parent (Pdeathsig); on other Unix systems it runs in its own group
// but can outlive a parent that crashes; on Windows there are no groups, no
// pause and no resume (ErrUnsupported), and a kill ends the process alone.
package proc

import "errors"

// ErrUnsupported is returned for an operation this platform does not have.
var ErrUnsupported = errors.New("not supported on this platform")
