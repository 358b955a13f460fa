package checker

import "github.com/lockproof/lockproof/contract"

// checkLiveness decides G3 on a key: crashed holders and waiters.
func (c *run) checkLiveness(k *keyOps) finding {
	var vs []Violation
	var checked bool
	if sharedKey(k) {
		vs, checked = c.sharedLiveness(k)
	} else {
		vs, checked = c.liveness(k)
	}
	wv, wchecked := c.waiterLiveness(k)
	f := finding{verdict: contract.NA, violations: append(vs, wv...)}
	if checked || wchecked {
		f.verdict = contract.OK
	}
	return f
}
