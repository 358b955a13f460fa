package contract

import (
	"errors"
	"fmt"
	"strings"
)

// Point is a fault point: where in a client's commands a pause or a crash
// strikes. After names the command right after whose reply it strikes;
// Before the command right before whose sending it strikes (a crash only:
// nothing of that command is sent). At most one is set. The zero Point
// leaves the moment to the fault (while the victim holds its lock).
//
// It is the one fault-point type: a lock's locker.Entry states its own
// (FaultPoint), the runner's Spec, chaos.Scenario and the client faults of
// package nemesis carry it, and summary.json records it as "after" and
// "before".
type Point struct {
	After, Before string

	_ struct{} // fields by name only
}

// LeaseCheckPoint is the point of the workload's own code (gate.Gate.Pass)
// between a holder's check of its lease and its write: a pause right after
// it (After LeaseCheckPoint) is the GC pause of the literature, whatever
// the lock: the woken holder writes on a stale check.
const LeaseCheckPoint = "check"

// ErrBadPoint is returned (wrapped) for a Point that names no command where
// one is needed, or both After and Before.
var ErrBadPoint = errors.New("bad fault point")

// IsZero reports whether p is the zero Point (the fault's own moment).
func (p Point) IsZero() bool { return p.After == "" && p.Before == "" }

// String is "after NAME", "before NAME", or "" for the zero Point: how
// fault names and reports spell it.
func (p Point) String() string {
	switch {
	case p.After != "":
		return "after " + p.After
	case p.Before != "":
		return "before " + p.Before
	}
	return ""
}

// Check reports whether p is well formed: not both After and Before, and
// command names without blanks (a gate matches one command name).
func (p Point) Check() error {
	if p.After != "" && p.Before != "" {
		return fmt.Errorf("%w: after %q and before %q exclude each other", ErrBadPoint, p.After, p.Before)
	}
	for _, name := range []string{p.After, p.Before} {
		if strings.ContainsAny(name, " \t\n") {
			return fmt.Errorf("%w: %q is not one command name", ErrBadPoint, name)
		}
	}
	return nil
}
