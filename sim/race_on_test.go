//go:build race

package sim_test

// raceDetector: the race detector randomizes the scheduler's order of
// runnable goroutines (runtime.randomizeScheduler), so replays differ.
const raceDetector = true
