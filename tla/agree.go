package tla

import (
	"errors"
	"fmt"

	"github.com/lockproof/lockproof/contract"
)

// ErrDisagree is wrapped by Result.Disagreement: the model and the checker,
// two verifiers of one contract, judged one history differently.
var ErrDisagree = errors.New("the TLA+ model and the checker disagree")

// Disagreement compares the model's verdict (r) with the checker's
// verdicts on the same history's lease mutual exclusion (G1) and resource
// safety (G2), and returns an error wrapping ErrDisagree when one passes
// what the other refuses. Both read docs/DESIGN.md's rules; they differ
// only where tla/README.md ("Model and checker") says, and so:
//   - a resource violation is a rejection: the model's resource has one
//     state and FencingRule, as the checker's;
//   - a lease violation is a rejection, but for a history with a failover
//     window (r.Windowed): the model lets the ops that overlap it be
//     served by two masters, where the checker holds G1 to one;
//   - a rejection is a violation of G1 or G2, but for a bounded trace
//     (r.Bounded: trace.MaxAhead cut some event's lookahead, so the model
//     may have missed the order that takes it), and for a rejection at
//     what the lock said of its holders (r.Said): the model holds an
//     inspect's answer to the one state that all the history's other ops
//     allow, fences and order included, where the checker's inspect rules
//     (part of lease) hold each answer to the bounds of the holds alone,
//     so the model may refuse an answer they pass (two holds counted whose
//     fences differ, say), never pass one they refuse.
//
// An unknown verdict of the checker decides nothing, and neither does
// liveness, which the model does not describe. n/a reads as ok (nothing
// to check).
func (r Result) Disagreement(lease, resource contract.Verdict) error {
	if lease == contract.Unknown || resource == contract.Unknown {
		return nil
	}
	switch {
	case r.Accepted && resource == contract.Violated:
		return fmt.Errorf("%w: the model accepted the history, the checker found resource safety violated", ErrDisagree)
	case r.Accepted && lease == contract.Violated && !r.Windowed:
		return fmt.Errorf("%w: the model accepted the history, the checker found lease mutual exclusion violated (no failover window)", ErrDisagree)
	case !r.Accepted && !r.Bounded && !r.Said && lease != contract.Violated && resource != contract.Violated:
		return fmt.Errorf("%w: the model rejected the history at line %d, the checker found lease %s and resource %s", ErrDisagree, r.Line, lease, resource)
	}
	return nil
}
