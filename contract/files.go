package contract

import "fmt"

// The files of a run directory (docs/DESIGN.md): summary.json at its root,
// one directory per scenario with its history, check and pages, and the
// rendered reports at the root.
const (
	SummaryFile       = "summary.json"
	HistoryFile       = "history.jsonl"
	CheckFile         = "check.json"
	VisualizationFile = "porcupine.html"
	ScenarioPageFile  = "scenario.html"
	MarkdownFile      = "report.md"
	HTMLFile          = "report.html"
	JUnitFile         = "junit.xml"
	JSONFile          = "report.json"
	// DetectFile is the table `lockproof run --detect` writes.
	DetectFile = "detect.md"
	// SimFile and RegressionsFile are what `lockproof sim --out` writes
	// beside summary.json: every seed counted, and the seeds to replay.
	SimFile         = "sim.json"
	RegressionsFile = "regressions.jsonl"
	// MutantsFile and MutantsTableFile are what `lockproof mutants`
	// writes: each mutant's verdicts and the score, and the same as a
	// Markdown table.
	MutantsFile      = "mutants.json"
	MutantsTableFile = "mutants.md"
)

// ScenarioID names a scenario and its directory in a run directory:
// <lock>-<fault>-<seed>.
func ScenarioID(lock, fault string, seed int64) string {
	return fmt.Sprintf("%s-%s-%d", lock, fault, seed)
}
