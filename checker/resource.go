package checker

import "github.com/lockproof/lockproof/contract"

// checkResource decides G2 on a key: the register model (Porcupine) and the direct rules.
func (c *run) checkResource(k *keyOps) finding {
	v, undecided, vs := c.porcupineCheck(k.key, k.resource, contract.PropResourceName)
	if v == contract.NA && len(k.resource) > 0 {
		v = contract.OK // only ops the model skips (refused ones): nothing broke
	}
	return finding{verdict: v, undecided: undecided, violations: append(vs, c.resourceDirect(k)...)}
}
