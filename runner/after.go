package runner

import "github.com/lockproof/lockproof/chaos"

// setFaultPoint sets the scenario's fault point: the command after whose
// reply the victim crashes (chaos.Scenario.CrashAfter) or is paused
// (chaos.Scenario.PauseAfter), or before whose sending it crashes
// (chaos.Scenario.CrashBefore), as the fault takes it (chaos.Fault Point).
func setFaultPoint(sc *chaos.Scenario, after, before string) {
	f, _ := chaos.Lookup(sc.Fault)
	switch f.Point {
	case chaos.PointAfterOrBefore:
		sc.CrashAfter, sc.CrashBefore = after, before
	case chaos.PointAfter:
		sc.PauseAfter = after
	}
}
