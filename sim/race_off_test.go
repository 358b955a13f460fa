//go:build !race

package sim_test

// raceDetector: see race_on_test.go.
const raceDetector = false
