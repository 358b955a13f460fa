package reports

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/judge"
	"github.com/lockproof/lockproof/locker"
)

// agreeRow is one row of the agreement run: a scenario judged as the
// matrix judges it (judge.Row, then judge.Cells), on files copied from a
// scenario of the fixture whose verdicts it shares.
type agreeRow struct {
	kind string // a mismatch kind (contract.Mismatch*), "as-expected" or "unknown"
	from string // the fixture scenario whose history and check.json it takes
	row  contract.Row
	exp  locker.Prediction
}

// predicting is the prediction that every property holds but wants, and
// that the fault bites (rejected > 0) when rejected.
func predicting(rejected bool, wants map[string]contract.Want) locker.Prediction {
	p := locker.AllHold()
	for id, w := range wants {
		p.Set(w, id)
	}
	p.Rejected = rejected
	return p
}

// agreeRows are the rows of the agreement run: as-expected rows (a cell
// of properties that held, one of a predicted break, one of a must-break
// found on one seed of two), a row of each mismatch kind the judge writes
// (verdict, unexcused, trace rejected, trace disagreeing, no-bite), and an
// unknown row. The verdicts are the fixture's files'.
func agreeRows() []agreeRow {
	v := func(lease, resource, liveness contract.Verdict) contract.Verdicts {
		return contract.Verdicts{contract.PropLease: lease, contract.PropResource: resource, contract.PropLiveness: liveness}
	}
	ok, bad, na, unk := contract.OK, contract.Violated, contract.NA, contract.Unknown
	none := map[string]contract.Want{}
	return []agreeRow{
		{"as-expected", "fenced-none-1", contract.Row{Lock: "fenced", Fault: "none", Seed: 1, Verdicts: v(ok, ok, na)}, predicting(false, none)},
		{"as-expected", "setnx-pause-client-1", contract.Row{Lock: "setnx", Fault: "pause-client", Seed: 1, Verdicts: v(ok, bad, na)},
			predicting(false, map[string]contract.Want{contract.PropResource: contract.WantViolated})},
		// A must-break property missed on seed 1 and found on seed 2: both as predicted.
		{"as-expected", "redlock-partition-1", contract.Row{Lock: "redlock", Fault: "partition", Seed: 1, Verdicts: v(ok, ok, na)},
			predicting(false, map[string]contract.Want{contract.PropLease: contract.WantViolated})},
		{"as-expected", "lua-none-1", contract.Row{Lock: "redlock", Fault: "partition", Seed: 2, Verdicts: v(bad, na, na)},
			predicting(false, map[string]contract.Want{contract.PropLease: contract.WantViolated})},
		{contract.MismatchVerdict, "lua-none-1", contract.Row{Lock: "lua", Fault: "none", Seed: 1, Verdicts: v(bad, na, na)}, predicting(false, none)},
		// The case: a key-loss run whose lease break the fault may
		// cause, outside every window of it.
		{contract.MismatchUnexcused, "lua-none-1", contract.Row{Lock: "lua", Fault: "key-loss", Seed: 1, Verdicts: v(bad, na, na),
			Unexcused: []string{"lease violated outside every window that excuses it (mutual-exclusion, lines 1,2; windows: key-loss)"}},
			predicting(false, map[string]contract.Want{contract.PropLease: contract.WantMay})},
		{contract.MismatchTrace, "fenced-none-2", contract.Row{Lock: "fenced", Fault: "failover", Seed: 1, Verdicts: v(ok, ok, na),
			Trace: contract.TraceRejected, TraceLine: 5}, predicting(false, none)},
		{contract.MismatchTrace, "fenced-none-1", contract.Row{Lock: "fenced", Fault: "restart", Seed: 1, Verdicts: v(ok, ok, na),
			Trace: contract.TraceAccepted, TraceDisagrees: "the model refuses line 5, which the checker accepts"}, predicting(false, none)},
		{contract.MismatchNoBite, "fenced-pause-client-1", contract.Row{Lock: "fenced", Fault: "pause-client", Seed: 1, Verdicts: v(ok, ok, na)},
			predicting(true, none)},
		{"unknown", "fenced-latency-1", contract.Row{Lock: "fenced", Fault: "latency", Seed: 1, Verdicts: v(unk, na, na)}, predicting(false, none)},
	}
}

// agreeRun writes a run directory of the rows of agreeRows whose kind is
// in kinds, judged as the matrix judges them, and returns it with its
// summary.
func agreeRun(t *testing.T, kinds ...string) (string, *contract.Summary) {
	t.Helper()
	dir := t.TempDir()
	var rows []*contract.Row
	var exps []locker.Prediction
	for _, a := range agreeRows() {
		if !slices.Contains(kinds, a.kind) {
			continue
		}
		r := a.row
		id := contract.ScenarioID(r.Lock, r.Fault, r.Seed)
		if err := os.CopyFS(filepath.Join(dir, id), os.DirFS(filepath.Join(fixture, a.from))); err != nil {
			t.Fatal(err)
		}
		r.History = path.Join(id, contract.HistoryFile)
		judge.Record(&r, a.exp)
		judge.Row(a.exp, &r)
		rows = append(rows, &r)
		exps = append(exps, a.exp)
	}
	sum := &contract.Summary{Scenarios: rows, Cells: judge.Cells(rows, exps)}
	b, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, contract.SummaryFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, sum
}

// judged is what summary.json and the exit code say of a run: the
// status of each row and cell, and of the run.
type judged struct {
	run   Status
	rows  map[string]Status // by scenario ID
	cells map[string]Status // by "lock × fault"
	// byCase maps a JUnit case ("lockproof.lock fault/seed-N") to its row.
	byCase map[string]string
}

func judgedOf(t *testing.T, sum *contract.Summary) judged {
	t.Helper()
	j := judged{rows: map[string]Status{}, cells: map[string]Status{}, byCase: map[string]string{}}
	switch code := sum.Status(); code {
	case contract.ExitOK:
		j.run = Pass
	case contract.ExitViolation:
		j.run = Fail
	case contract.ExitUnknown:
		j.run = Inconclusive
	default:
		t.Fatalf("summary status %d", code)
	}
	for _, r := range sum.Scenarios {
		s := Pass
		switch {
		case len(r.Mismatches) > 0:
			s = Fail
		case r.Unknown():
			s = Inconclusive
		}
		j.rows[r.ID()] = s
		j.byCase[fmt.Sprintf("lockproof.%s %s/seed-%d", r.Lock, r.Fault, r.Seed)] = r.ID()
		c := r.Lock + " × " + r.Fault
		if old, ok := j.cells[c]; !ok || s == Fail || s == Inconclusive && old == Pass {
			j.cells[c] = s
		}
	}
	for _, c := range sum.Cells {
		if len(c.Regressions) > 0 {
			j.cells[c.Lock+" × "+c.Fault] = Fail
		}
	}
	return j
}

// failing are the keys of m whose status is Fail, sorted.
func failing(m map[string]Status) []string {
	var out []string
	for k, s := range m {
		if s == Fail {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// TestReportsAgreeWithSummary (issues 61 and 64): every format of the
// report says of a run what summary.json and the exit code say, for every
// mismatch kind the judge writes: the run's status and headline word, the
// status of each scenario and of each lock × fault cell, the scenarios
// listed as not as predicted. A run whose only mismatch is of one kind is
// never a pass.
func TestReportsAgreeWithSummary(t *testing.T) {
	base := []string{"as-expected"}
	runs := map[string][]string{
		"every kind":  {"as-expected", "unknown", contract.MismatchVerdict, contract.MismatchUnexcused, contract.MismatchTrace, contract.MismatchNoBite},
		"as expected": base,
		"unknown":     append(slices.Clone(base), "unknown"),
	}
	for _, k := range []string{contract.MismatchVerdict, contract.MismatchUnexcused, contract.MismatchTrace, contract.MismatchNoBite} {
		runs["only "+k] = append(slices.Clone(base), k)
	}
	for _, name := range slices.Sorted(maps.Keys(runs)) {
		t.Run(name, func(t *testing.T) {
			dir, sum := agreeRun(t, runs[name]...)
			want := judgedOf(t, sum)
			run, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			r := Build(run)
			if err := WriteAll(dir, r); err != nil {
				t.Fatal(err)
			}
			read := func(f string) []byte {
				b, err := os.ReadFile(filepath.Join(dir, f))
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			agreeJSON(t, want, read(contract.JSONFile))
			agreeMarkdown(t, want, string(read(contract.MarkdownFile)))
			agreeHTML(t, want, string(read(contract.HTMLFile)))
			agreeJUnit(t, want, read(contract.JUnitFile))
			agreeCompare(t, want, r)
		})
	}
}

func agreeJSON(t *testing.T, want judged, b []byte) {
	t.Helper()
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if r.Status != want.run {
		t.Errorf("report.json: status %s (%q); summary.json exits as %s", r.Status, r.Headline, want.run)
	}
	rows := map[string]Status{}
	for _, s := range r.Scenarios {
		rows[s.ID] = s.Status
	}
	if !maps.Equal(rows, want.rows) {
		t.Errorf("report.json: scenarios %v; summary.json says %v", rows, want.rows)
	}
	cells := map[string]Status{}
	for _, c := range r.Cells {
		cells[c.Lock+" × "+c.Fault] = c.Status
	}
	if !maps.Equal(cells, want.cells) {
		t.Errorf("report.json: cells %v; summary.json says %v", cells, want.cells)
	}
}

// mdSection are the first cells of the rows of report.md's table under
// the heading that starts with title.
func mdSection(md, title string) []string {
	var out []string
	in := false
	for _, l := range strings.Split(md, "\n") {
		switch {
		case strings.HasPrefix(l, "## "):
			in = strings.HasPrefix(l, "## "+title)
		case in && strings.HasPrefix(l, "| ") && !strings.HasPrefix(l, "| scenario |"):
			out = append(out, strings.TrimSpace(strings.Split(l, "|")[1]))
		}
	}
	return out
}

func agreeMarkdown(t *testing.T, want judged, md string) {
	t.Helper()
	head := regexp.MustCompile(`(?m)^\*\*([^*]+)\*\*: `).FindStringSubmatch(md)
	if head == nil || head[1] != statusWord(want.run) {
		t.Errorf("report.md: headline %q; summary.json exits as %s (%s)", head, want.run, statusWord(want.run))
	}
	listed := slices.Compact(slices.Sorted(slices.Values(mdSection(md, "Not as expected"))))
	if w := failing(want.rows); !slices.Equal(listed, w) {
		t.Errorf("report.md lists %v not as predicted; summary.json: %v", listed, w)
	}
	// The matrix: "| **lock** | cell | cell |" under "| lock \ fault | f | f |".
	var faults []string
	cells := map[string]Status{}
	for _, l := range strings.Split(md, "\n") {
		cols := strings.Split(l, "|")
		if len(cols) < 3 {
			continue
		}
		cols = cols[1 : len(cols)-1]
		if strings.TrimSpace(cols[0]) == `lock \ fault` {
			faults = nil
			for _, f := range cols[1:] {
				faults = append(faults, strings.TrimSpace(f))
			}
			continue
		}
		lock, ok := strings.CutPrefix(strings.TrimSpace(cols[0]), "**")
		if !ok || faults == nil {
			continue
		}
		lock = strings.TrimSuffix(lock, "**")
		for i, c := range cols[1:] {
			c = strings.TrimSpace(c)
			if c == "" {
				continue
			}
			s := Pass
			switch {
			case strings.HasSuffix(c, "**FAIL**"):
				s = Fail
			case strings.HasSuffix(c, "undecided"):
				s = Inconclusive
			}
			cells[lock+" × "+faults[i]] = s
		}
	}
	if !maps.Equal(cells, want.cells) {
		t.Errorf("report.md: matrix cells %v; summary.json says %v", cells, want.cells)
	}
}

func agreeHTML(t *testing.T, want judged, page string) {
	t.Helper()
	if m := regexp.MustCompile(`<p class="headline (\w+)"><span class="word">([^<]*)</span>`).FindStringSubmatch(page); m == nil ||
		m[1] != string(want.run) || m[2] != statusWord(want.run) {
		t.Errorf("report.html: headline %q; summary.json exits as %s", m, want.run)
	}
	var listed []string
	for _, m := range regexp.MustCompile(`<tr class="fail"><td><a href="([^"#][^"]*)">([^<]+)</a>`).FindAllStringSubmatch(page, -1) {
		listed = append(listed, m[2])
	}
	listed = slices.Compact(slices.Sorted(slices.Values(listed)))
	if w := failing(want.rows); !slices.Equal(listed, w) {
		t.Errorf("report.html lists %v not as predicted; summary.json: %v", listed, w)
	}
	// Each seed of the matrix says its scenario's status in its title;
	// each cell's class is its status.
	words := map[string]Status{statusWord(Pass): Pass, statusWord(Fail): Fail, statusWord(Inconclusive): Inconclusive}
	rows, cells := map[string]Status{}, map[string]Status{}
	cellRE := regexp.MustCompile(`<td class="(\w+)"><span class="word">.*?</td>`)
	seedRE := regexp.MustCompile(`title="([^":]+): ([^"]+)"`)
	for _, c := range cellRE.FindAllStringSubmatch(page, -1) {
		for _, s := range seedRE.FindAllStringSubmatch(c[0], -1) {
			rows[s[1]] = words[s[2]]
			for _, r := range agreeRows() {
				if contract.ScenarioID(r.row.Lock, r.row.Fault, r.row.Seed) == s[1] {
					cells[r.row.Lock+" × "+r.row.Fault] = Status(c[1])
				}
			}
		}
	}
	if !maps.Equal(rows, want.rows) {
		t.Errorf("report.html: seeds %v; summary.json says %v", rows, want.rows)
	}
	if !maps.Equal(cells, want.cells) {
		t.Errorf("report.html: matrix cells %v; summary.json says %v", cells, want.cells)
	}
}

func agreeJUnit(t *testing.T, want judged, b []byte) {
	t.Helper()
	var suites junitSuites
	if err := xml.Unmarshal(b, &suites); err != nil {
		t.Fatal(err)
	}
	rows := map[string]Status{}
	for _, s := range suites.Suites {
		for _, c := range s.Cases {
			id, ok := want.byCase[c.Classname+" "+c.Name]
			if !ok {
				continue // a cell's detection-rate case
			}
			switch {
			case c.Failure != nil:
				rows[id] = Fail
			case c.Error != nil:
				rows[id] = Inconclusive
			default:
				rows[id] = Pass
			}
		}
	}
	if !maps.Equal(rows, want.rows) {
		t.Errorf("junit.xml: cases %v; summary.json says %v", rows, want.rows)
	}
	if n := len(failing(want.rows)); suites.Failures < n || (want.run == Fail) != (suites.Failures > 0) {
		t.Errorf("junit.xml: %d failures; summary.json has %d rows not as predicted and exits as %s", suites.Failures, n, want.run)
	}
}

// agreeCompare: the compare view (a run compared with itself, as a
// nightly compares with the previous night) names the scenarios of the
// new run not as predicted, and no other.
func agreeCompare(t *testing.T, want judged, r *Report) {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteDiff(&buf, Compare(r, r)); err != nil {
		t.Fatal(err)
	}
	var listed []string
	in := false
	for _, l := range strings.Split(buf.String(), "\n") {
		switch {
		case strings.HasPrefix(l, "## "):
			in = strings.HasPrefix(l, "## Not as predicted in the new run")
		case in && strings.HasPrefix(l, "| ") && !strings.HasPrefix(l, "| scenario |"):
			listed = append(listed, strings.TrimSpace(strings.Split(l, "|")[1]))
		}
	}
	listed = slices.Compact(slices.Sorted(slices.Values(listed)))
	if w := failing(want.rows); !slices.Equal(listed, w) {
		t.Errorf("compare view lists %v not as predicted in the new run; summary.json: %v\n%s", listed, w, buf.String())
	}
}
