// Package testlong says whether the tests run at their nightly breadth.
//
// The test command (README, "Test"; docs/EXTENDING.md) fits a coffee break: where a test's
// breadth costs minutes of CPU that its first part already spends on the
// same question (the checker's model differential on more random
// histories, for one), it takes a smaller share by default and the whole
// with LOCKPROOF_LONG=1, which the nightly workflow sets. A test that
// shrinks says so where it does, and by how much.
package testlong

import "os"

// EnvVar turns the nightly breadth on when set to anything but "" or "0".
const EnvVar = "LOCKPROOF_LONG"

// On reports whether the tests run at their nightly breadth.
func On() bool {
	v := os.Getenv(EnvVar)
	return v != "" && v != "0"
}
