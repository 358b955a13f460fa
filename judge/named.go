package judge

import "github.com/lockproof/lockproof/locker"

// Named is the prediction for the lock named lock in registry reg under
// fault on topology (PredictOn); a lock reg lacks gets none. It serves
// callers that hold names, not entries: a test of the built-in locks
// passes zoo.Builtin(), which keeps package zoo, a user's import, free of
// the judging (and of the checker's Porcupine behind it).
func Named(reg *locker.Registry, lock, fault, topology string) locker.Prediction {
	e, ok := reg.Lookup(lock)
	if !ok {
		return locker.NoPrediction("unknown lock: no prediction")
	}
	return PredictOn(e, fault, topology)
}
