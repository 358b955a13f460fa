// Package reports renders the safety report of a finished lockproof run:
// the lock × fault matrix with the verdict on each property, what was
// expected and what differs, as Markdown (for a CI step summary), static
// self-contained HTML, JUnit XML and JSON; and compares two runs.
//
// A run directory holds summary.json (the contract of docs/DESIGN.md)
// and, per scenario, the directory of its history file with history.jsonl,
// check.json (checker.Result) and, for violations, porcupine.html.
//
// A report never calls a run safe while any verdict is unknown.
package reports

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/lockproof/lockproof/checker"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

// ErrBadRun is returned (wrapped) when a run directory cannot be reported:
// summary.json is missing or breaks the contract.
var ErrBadRun = errors.New("bad run directory")

// Run is a loaded run directory.
type Run struct {
	Dir       string
	Scenarios []*LoadedScenario
	// Cells are summary.json's cells (nil in files written before them).
	Cells []*contract.Cell
	// Shard is the part of a plan the run holds (`run --shard`); nil for
	// a whole plan.
	Shard *contract.Shard
	// Topology is the deployment the run ran on (contract.TopologyOf of
	// summary.json's topology: the Sentinel topology when it says none).
	Topology string
}

// LoadedScenario is one scenario of a run with what its directory holds.
type LoadedScenario struct {
	contract.Row
	// Judged: summary.json holds the row's judgment, as every row
	// lockproof writes does (as_expected, and the mismatches that make it
	// false): the report reads it. A row without one (a file written by
	// hand: no as_expected, or one that its mismatches and verdicts do not
	// explain) is judged, for the report alone, by package judge against
	// the prediction it records (judge.Recorded).
	Judged bool
	// ID names the scenario (its directory, e.g. "fenced-pause-client-1").
	ID string
	// Check is the checker's result from check.json; nil when it could not be read.
	Check *checker.Result
	// CheckPath and Visualization are relative to the run directory;
	// Visualization is "" when the scenario has no porcupine.html.
	CheckPath     string
	Visualization string
	// Problems lists what is wrong with the scenario: its files (each names
	// the file), or a failure of the scenario or its fault recorded in
	// summary.json. A scenario with problems is never reported as passing.
	Problems []string
	// Plot is the latency-over-time plot of the history; nil when unreadable.
	Plot *Plot
	// Page is where the scenario's own HTML page goes, relative to the run
	// directory: ScenarioPageFile in its directory.
	Page string
}

func validVerdict(v contract.Verdict) bool {
	switch v {
	case contract.OK, contract.Violated, contract.Unknown, contract.NA:
		return true
	}
	return false
}

// Load reads the run directory dir: summary.json, and each scenario's
// history.jsonl, check.json and porcupine.html. A missing or malformed
// summary.json is an error naming it (errors.Is(err, ErrBadRun)); problems
// with a scenario's own files are recorded in its Problems and shown in the
// report, so that one broken scenario does not hide the others.
func Load(dir string) (*Run, error) { return LoadWith(dir, LoadOptions{}) }

// LoadOptions tune LoadWith.
type LoadOptions struct {
	// SummaryOnly reads summary.json alone: no check.json, history or plot
	// (what Compare needs, and all a previous night's artifact may keep).
	SummaryOnly bool
	// Root, when set, is the run directory opened as an os.Root: every
	// file, summary.json too, is read through it, and dir only names the
	// files in errors (lockproof report --merge: nothing it reads may lead
	// out of a shard). The caller closes it.
	Root *os.Root

	_ struct{}
}

// LoadWith is Load with options.
func LoadWith(dir string, opts LoadOptions) (*Run, error) {
	sumPath := filepath.Join(dir, contract.SummaryFile)
	var data []byte
	var err error
	if opts.Root != nil {
		data, err = opts.Root.ReadFile(contract.SummaryFile)
		fullPath(err, sumPath)
	} else {
		data, err = os.ReadFile(sumPath)
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s: no such file (is %s the --out directory of lockproof run?)", ErrBadRun, sumPath, dir)
		}
		return nil, fmt.Errorf("%w: %v", ErrBadRun, err)
	}
	var sum contract.Summary
	if err := json.Unmarshal(data, &sum); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadRun, sumPath, err)
	}
	// Which rows hold their judgment: as_expected is always written
	// (no omitempty), so a row without it was not judged.
	var members struct {
		Scenarios []map[string]json.RawMessage `json:"scenarios"`
	}
	if err := json.Unmarshal(data, &members); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadRun, sumPath, err)
	}
	run := &Run{Dir: dir, Cells: sum.Cells, Shard: sum.Shard, Topology: contract.TopologyOf(sum.Topology)}
	// Every file a row names is read inside the run directory: a name or
	// a link that leads out of it is refused (review: report wrote, and
	// read, through scenario folders that were links).
	root := opts.Root
	if !opts.SummaryOnly && root == nil {
		if root, err = os.OpenRoot(dir); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadRun, err)
		}
		defer root.Close()
	}
	seen := map[string]int{}
	for i := range sum.Scenarios {
		s := sum.Scenarios[i]
		if s == nil {
			return nil, fmt.Errorf("%w: %s: scenario %d is null", ErrBadRun, sumPath, i)
		}
		if err := validateSummary(s); err != nil {
			return nil, fmt.Errorf("%w: %s: scenario %d (%s/%s seed %d): %v", ErrBadRun, sumPath, i, s.Lock, s.Fault, s.Seed, err)
		}
		_, judged := members.Scenarios[i]["as_expected"]
		judged = judged && s.AsExpected == (len(s.Mismatches) == 0 && !s.Unknown())
		sc := &LoadedScenario{Row: *s, Judged: judged}
		sdir := path.Dir(s.History)
		sc.ID = sdir
		if sdir == "." {
			// The page's name comes from the row's fields then: one
			// plain name in the run directory, or the row is refused
			// (review: lock "../outside/evil" wrote outside it).
			sc.ID = contract.ScenarioID(s.Lock, s.Fault, s.Seed)
			if !plainName(sc.ID) {
				return nil, fmt.Errorf("%w: %s: scenario %d: lock %q and fault %q name the file %q, not a plain name in the run directory",
					ErrBadRun, sumPath, i, s.Lock, s.Fault, sc.ID+".html")
			}
		}
		if j, dup := seen[sc.ID]; dup {
			return nil, fmt.Errorf("%w: %s: scenarios %d and %d share the directory %s", ErrBadRun, sumPath, j, i, sc.ID)
		}
		seen[sc.ID] = i
		sc.Page = path.Join(sdir, contract.ScenarioPageFile)
		if sdir == "." {
			sc.Page = sc.ID + ".html"
		}
		if opts.SummaryOnly {
			run.Scenarios = append(run.Scenarios, sc)
			continue
		}
		loadScenario(root, sdir, sc)
		run.Scenarios = append(run.Scenarios, sc)
	}
	return run, nil
}

// validateSummary checks a row and fills in "not checked" for the
// properties it predates.
func validateSummary(s *contract.Row) error {
	if s.Lock == "" {
		return errors.New("lock: missing")
	}
	if s.Fault == "" {
		return errors.New("fault: missing")
	}
	if s.History == "" {
		return errors.New("history: missing")
	}
	if !filepath.IsLocal(filepath.FromSlash(s.History)) {
		return fmt.Errorf("history: %q is not a path inside the run directory", s.History)
	}
	// A property this reader does not know (a newer file's) is left alone,
	// in the row as in expected; one it knows that the row lacks was added
	// after the file was written and reads "not checked" (docs/DESIGN.md).
	for _, id := range propertyNames() {
		v, ok := s.Verdicts[id]
		if !ok {
			if s.Verdicts == nil {
				s.Verdicts = contract.Verdicts{}
			}
			s.Verdicts[id] = contract.NotChecked
			continue
		}
		if !validVerdict(v) {
			return fmt.Errorf("%s: verdict %q (want ok, violated, unknown or n/a)", id, v)
		}
		if v := s.Expected[id]; v != "" && !validVerdict(v) {
			return fmt.Errorf("expected.%s: verdict %q (want ok, violated, unknown or n/a)", id, v)
		}
	}
	return nil
}

// fullPath makes a path error from a read inside a run directory's root
// name the file by its whole path, p.
func fullPath(err error, p string) {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		pe.Path = p
	}
}

// plainName reports whether name is one file name, neither a path nor a
// hidden file nor a special name.
func plainName(name string) bool {
	return name != "" && filepath.IsLocal(name) && !strings.ContainsAny(name, `/\:`) && !strings.HasPrefix(name, ".")
}

// loadScenario reads the files of one scenario inside root (the run
// directory), recording what is wrong.
func loadScenario(root *os.Root, sdir string, sc *LoadedScenario) {
	if sc.NotRun {
		return // nothing ran: no files to read, nothing to plot
	}
	if sc.Error != "" {
		sc.Problems = append(sc.Problems, "the scenario failed: "+sc.Error)
	}
	if sc.FaultError != "" {
		sc.Problems = append(sc.Problems, "its fault failed: "+sc.FaultError)
	}
	sc.CheckPath = path.Join(sdir, contract.CheckFile)
	checkPath := filepath.Join(root.Name(), filepath.FromSlash(sc.CheckPath))
	data, err := root.ReadFile(filepath.FromSlash(sc.CheckPath))
	fullPath(err, checkPath)
	switch {
	case err != nil:
		sc.Problems = append(sc.Problems, err.Error()) // names the file
	default:
		var res checker.Result
		if err := json.Unmarshal(data, &res); err != nil {
			sc.Problems = append(sc.Problems, fmt.Sprintf("%s: %v", checkPath, err))
			break
		}
		sc.Check = &res
		for _, id := range propertyNames() {
			switch pr := res.Of(id); {
			case pr == nil && sc.Verdicts[id] == contract.NotChecked:
				// Written before the property existed: both files lack it.
			case pr == nil:
				sc.Problems = append(sc.Problems, fmt.Sprintf("%s: no %s verdict", checkPath, id))
			case pr.Verdict != sc.Verdicts[id]:
				sc.Problems = append(sc.Problems, fmt.Sprintf("%s: %s is %s but %s says %s",
					checkPath, id, pr.Verdict, contract.SummaryFile, sc.Verdicts[id]))
			}
		}
	}
	vis := path.Join(sdir, contract.VisualizationFile)
	if _, err := root.Stat(filepath.FromSlash(vis)); err == nil {
		sc.Visualization = vis
	}
	histPath := filepath.Join(root.Name(), filepath.FromSlash(sc.History))
	plot, err := loadPlot(func() (io.ReadCloser, error) { return history.OpenIn(root, filepath.FromSlash(sc.History)) }, histPath, violationLines(sc.Check))
	if err != nil {
		sc.Problems = append(sc.Problems, err.Error())
		return
	}
	sc.Plot = plot
	// summary.json's ops may count fault lines (as check.json does) or not.
	if sc.Ops != 0 && plot.Total != sc.Ops && plot.Ops != sc.Ops {
		sc.Problems = append(sc.Problems, fmt.Sprintf("%s: %d ops but %s says %d", histPath, plot.Total, contract.SummaryFile, sc.Ops))
	}
}

// violationLines are the history lines involved in any violation.
func violationLines(res *checker.Result) map[int]string {
	lines := map[int]string{}
	if res == nil {
		return lines
	}
	for _, pr := range res.Props {
		for _, v := range pr.Violations {
			for _, l := range v.Lines {
				if _, ok := lines[l]; !ok {
					lines[l] = v.Rule + ": " + v.Explanation
				}
			}
		}
	}
	return lines
}

// readHistory wraps history.Scan for the plot, with the file named in errors.
func readHistory(open func() (io.ReadCloser, error), p string, fn func(history.Op) error) error {
	f, err := open()
	if err != nil {
		return err
	}
	defer f.Close()
	return history.Scan(f, p, fn)
}

// mdEscape makes s safe inside a Markdown table cell.
func mdEscape(s string) string {
	// Markdown's own syntax too: a lock named "[x](http://...)" or
	// "![x](...)" must not become a link or an image, nor `*` emphasis.
	r := strings.NewReplacer("|", `\|`, "\n", " ", "\r", " ", "<", "&lt;", ">", "&gt;",
		`\`, `\\`, "`", "\\`", "*", `\*`, "_", `\_`, "[", `\[`, "]", `\]`)
	return r.Replace(s)
}
