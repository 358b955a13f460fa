// Package tlatest gives tests the TLA+ trace validator on $TLA2TOOLS_JAR.
package tlatest

import (
	"testing"

	"github.com/lockproof/lockproof/tla"
)

// Need returns the validator on $TLA2TOOLS_JAR (tla.FromEnv). It skips t
// when the variable is unset (TLC is optional, as in tla/run.sh) and
// fails t when it names no TLC that can run.
func Need(t testing.TB) *tla.Validator {
	t.Helper()
	v, err := tla.FromEnv()
	switch {
	case err != nil:
		t.Fatal(err)
	case v == nil:
		t.Skip(tla.JarEnv + " not set: no TLC to run (see tla/README.md)")
	}
	return v
}
