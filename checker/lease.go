package checker

import "github.com/lockproof/lockproof/contract"

// checkLease decides G1 on a key: the lease model (Porcupine), the token
// rules and the inspect rules (what the lock said of the key's holders);
// on a key with modes, the rules rw-exclusion and permits (shared.go).
func (c *run) checkLease(k *keyOps) finding {
	if sharedKey(k) {
		return c.checkSharedLease(k)
	}
	v, undecided, vs := c.porcupineCheck(k.key, k.lease, contract.PropLeaseName)
	if v == contract.NA && len(k.lease) > 0 {
		v = contract.OK // only ops the model skips (failed attempts): nothing broke
	}
	vs = append(vs, c.tokenChecks(k)...)
	vs = append(vs, c.inspectChecks(k)...)
	if v == contract.NA && len(k.inspects) > 0 {
		v = contract.OK // the inspects were held to a key no lease op touched
	}
	return finding{verdict: v, undecided: undecided, violations: vs}
}
