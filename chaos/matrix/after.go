package matrix

import "github.com/lockproof/lockproof/chaos"

// setFaultPoint sets the scenario's fault point: the command after whose
// reply the victim crashes (crash-client: chaos.Scenario.CrashAfter) or is
// paused (pause-client: chaos.Scenario.PauseAfter), or before whose sending
// it crashes (crash-client: chaos.Scenario.CrashBefore).
func setFaultPoint(sc *chaos.Scenario, after, before string) {
	switch sc.Fault {
	case chaos.FaultCrashClient:
		sc.CrashAfter, sc.CrashBefore = after, before
	case chaos.FaultPauseClient:
		sc.PauseAfter = after
	}
}
