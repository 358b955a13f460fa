package reports

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// fixture is a run directory with: expected passes (fenced, two seeds in one
// cell), an expected violation (setnx under pause-client), an unexpected
// violation (lua under none), a missed expected violation (redlock under
// partition) and an unknown verdict (fenced under latency).
const fixture = "testdata/run"

func loadFixture(t *testing.T) *Report {
	t.Helper()
	run, err := Load(fixture)
	if err != nil {
		t.Fatal(err)
	}
	return Build(run)
}

// goldenProps is the file that lists, one ID a line, the properties the
// golden files were written with (-update rewrites it).
const goldenProps = "testdata/golden/properties"

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenProps, []byte(strings.Join(contract.PropertyIDs(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./reports -update to create it)", err)
	}
	got = withoutNewProperties(t, got)
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test ./reports -update rewrites it):\n--- got\n%s", path, got)
	}
}

// withoutNewProperties leaves out of got the mentions of the properties
// the contract gained after the golden files were written (goldenProps):
// their legend entry and their line in a JUnit case. The fixture predates
// them, so they read "not checked" and nothing else of the reports moves;
// adding a property is then no edit here (TestPropertiesCanGrow shows a new
// property in the reports of a copy of the module).
func withoutNewProperties(t *testing.T, got []byte) []byte {
	t.Helper()
	b, err := os.ReadFile(goldenProps)
	if err != nil {
		t.Fatalf("%v (run go test ./reports -update to create it)", err)
	}
	known := strings.Fields(string(b))
	for _, p := range contract.Properties() {
		if slices.Contains(known, p.ID) {
			continue
		}
		t.Logf("property %q is newer than the golden files: its mentions are left out of the comparison", p.ID)
		legend := []byte(p.Letter + " " + p.ID + " " + p.Guarantee)
		got = bytes.ReplaceAll(got, append([]byte(", "), legend...), nil)
		got = bytes.ReplaceAll(got, append(legend, ", "...), nil)
		got = bytes.ReplaceAll(got, []byte(p.ID+": "+string(contract.NotChecked)+"&#xA;"), nil)
	}
	return got
}

func TestMarkdownGolden(t *testing.T) {
	r := loadFixture(t)
	var buf bytes.Buffer
	if err := WriteMarkdown(&buf, r); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.md", buf.Bytes())
	md := buf.String()
	for _, want := range []string{
		"**FAIL**: 2 verdicts not as expected in 2 of 7 scenarios; 1 unknown",
		"| lua-none-1 | lease | violated, predicted holds: mutual-exclusion on key \"cart\", history lines 1,2:",
		"| redlock-partition-1 | lease | held, predicted breaks: no violation found",
		"| fenced-latency-1 | lease | key \"cart\" undecided: linearizability check timed out",
		"| **fenced** | held · as predicted | held · as predicted | L unknown · undecided |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
}

func TestJUnitGolden(t *testing.T) {
	r := loadFixture(t)
	var buf bytes.Buffer
	if err := WriteJUnit(&buf, r); err != nil {
		t.Fatal(err)
	}
	golden(t, "junit.xml", buf.Bytes())

	var suites junitSuites
	if err := xml.Unmarshal(buf.Bytes(), &suites); err != nil {
		t.Fatalf("junit.xml does not parse: %v", err)
	}
	if suites.Tests != 7 || suites.Failures != 2 || suites.Errors != 1 {
		t.Errorf("tests %d failures %d errors %d, want 7 2 1", suites.Tests, suites.Failures, suites.Errors)
	}
	cases := map[string]junitCase{}
	for _, s := range suites.Suites {
		for _, c := range s.Cases {
			cases[c.Classname+" "+c.Name] = c
		}
	}
	if c := cases["lockproof.lua none/seed-1"]; c.Failure == nil || c.Failure.Message != "lease violated, expected ok" {
		t.Errorf("unexpected violation: %+v, want a failure", c)
	}
	if c := cases["lockproof.redlock partition/seed-1"]; c.Failure == nil || c.Failure.Message != "lease ok, expected violated" {
		t.Errorf("missed violation: %+v, want a failure", c)
	}
	if c := cases["lockproof.fenced latency/seed-1"]; c.Error == nil || c.Failure != nil || c.Error.Message != "lease unknown" {
		t.Errorf("unknown verdict: %+v, want an error", c)
	}
	if c := cases["lockproof.setnx pause-client/seed-1"]; c.Failure != nil || c.Error != nil {
		t.Errorf("expected violation: %+v, want a pass", c)
	}
}

// htmlDoc parses the report as XML (it is well-formed) and collects hrefs, ids and SVGs.
type htmlDoc struct {
	hrefs map[string]bool
	ids   map[string]bool
	svgs  int
	// classes counts elements by class attribute per section id.
	classes map[string]map[string]int
}

func parseHTML(t *testing.T, data []byte) htmlDoc {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(data))
	d.Strict = true
	doc := htmlDoc{hrefs: map[string]bool{}, ids: map[string]bool{}, classes: map[string]map[string]int{}}
	section := ""
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("report.html is not well-formed: %v", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if se.Name.Local == "svg" {
			doc.svgs++
		}
		for _, a := range se.Attr {
			switch a.Name.Local {
			case "href":
				doc.hrefs[a.Value] = true
			case "id":
				doc.ids[a.Value] = true
				if se.Name.Local == "section" {
					section = a.Value
				}
			case "class":
				if doc.classes[section] == nil {
					doc.classes[section] = map[string]int{}
				}
				doc.classes[section][a.Value]++
			}
		}
	}
	return doc
}

// TestHTMLIndexAndPages: the index page is self-contained, carries no
// plot, links every scenario's page and every cell of the sheet; each
// scenario page links files that exist, and its plot marks violations,
// fault windows and ops that never returned.
func TestHTMLIndexAndPages(t *testing.T) {
	dir := copyRun(t, nil)
	run, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := Build(run)
	if err := WriteAll(dir, r); err != nil {
		t.Fatal(err)
	}
	index, err := os.ReadFile(filepath.Join(dir, contract.HTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	selfContained := func(name string, page []byte) {
		s := strings.ReplaceAll(string(page), `xmlns="http://www.w3.org/2000/svg"`, "")
		for _, banned := range []string{"http://", "https://", "<script", "<link "} {
			if strings.Contains(s, banned) {
				t.Errorf("%s is not self-contained: contains %q", name, banned)
			}
		}
	}
	selfContained(contract.HTMLFile, index)
	doc := parseHTML(t, index)
	if doc.svgs != 0 {
		t.Errorf("the index draws %d plots; plots belong on the scenario pages", doc.svgs)
	}
	for _, id := range []string{"unexpected", "unknown", "regressions", "sheet", "matrix"} {
		if !doc.ids[id] {
			t.Errorf("the index has no section %q", id)
		}
	}
	for _, c := range r.Cells {
		if a := anchor("c-", c.Lock+"-"+c.Fault); !doc.ids[a] {
			t.Errorf("cell %s × %s: no row %q in the guarantee sheet", c.Lock, c.Fault, a)
		}
	}
	for _, s := range r.Scenarios {
		if !doc.hrefs[s.Page] {
			t.Errorf("scenario %s: the index does not link its page %s", s.ID, s.Page)
		}
		page, err := os.ReadFile(filepath.Join(dir, s.Page))
		if err != nil {
			t.Fatalf("scenario %s: %v", s.ID, err)
		}
		selfContained(s.Page, page)
		pd := parseHTML(t, page)
		if pd.svgs != 1 {
			t.Errorf("%s: %d plots, want 1", s.Page, pd.svgs)
		}
		for h := range pd.hrefs {
			if _, err := os.Stat(filepath.Join(dir, filepath.Dir(s.Page), h)); err != nil {
				t.Errorf("%s links %s, which does not resolve: %v", s.Page, h, err)
			}
		}
		if !pd.hrefs[filepath.Base(s.History)] {
			t.Errorf("%s does not link its history", s.Page)
		}
		want := map[string]int{
			"lua-none-1":    2, // lines 1 and 2
			"fenced-none-1": 0,
		}
		if n, ok := want[s.ID]; ok && pd.classes[""]["violation"] != n {
			t.Errorf("%s marks %d ops as violations, want %d", s.Page, pd.classes[""]["violation"], n)
		}
		if s.ID == "setnx-pause-client-1" && pd.classes[""]["fault"] != 1 {
			t.Errorf("%s shades %d fault windows, want 1", s.Page, pd.classes[""]["fault"])
		}
		if s.ID == "fenced-latency-1" && pd.classes[""]["pending"] != 1 {
			t.Errorf("%s draws %d never-returned ops, want 1", s.Page, pd.classes[""]["pending"])
		}
	}
	for _, viz := range []string{"setnx-pause-client-1/porcupine.html", "lua-none-1/porcupine.html"} {
		page, _ := os.ReadFile(filepath.Join(dir, filepath.Dir(viz), contract.ScenarioPageFile))
		if !parseHTML(t, page).hrefs[filepath.Base(viz)] {
			t.Errorf("no link to the visualization %s", viz)
		}
	}
	// The words, not only colours: the unexpected verdicts are named.
	for _, want := range []string{"FAIL", "NOT as expected", "violated", "held", "lua-none-1"} {
		if !bytes.Contains(index, []byte(want)) {
			t.Errorf("the index lacks %q", want)
		}
	}
}

func TestJSONReport(t *testing.T) {
	r := loadFixture(t)
	var buf bytes.Buffer
	if err := WriteJSON(&buf, r); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Status != Fail || back.Counts != (Counts{Scenarios: 7, AsExpected: 4, NotAsExpected: 2, Unexpected: 2, Unknown: 1}) || len(back.Scenarios) != 7 {
		t.Errorf("report.json: status %s counts %+v, %d scenarios", back.Status, back.Counts, len(back.Scenarios))
	}
}

// copyRun copies the fixture into a temp dir and lets edit change summary.json.
func copyRun(t *testing.T, edit func(*contract.Summary)) string {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(fixture)); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		var s contract.Summary
		b, _ := os.ReadFile(filepath.Join(dst, contract.SummaryFile))
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		edit(&s)
		b, _ = json.Marshal(s)
		if err := os.WriteFile(filepath.Join(dst, contract.SummaryFile), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func keep(ids ...string) func(*contract.Summary) {
	return func(s *contract.Summary) {
		var out []*contract.Row
		for _, sc := range s.Scenarios {
			for _, id := range ids {
				if filepath.Dir(sc.History) == id {
					out = append(out, sc)
				}
			}
		}
		s.Scenarios = out
	}
}

func TestLoadBadRuns(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	_, err := Load(missing)
	if !errors.Is(err, ErrBadRun) || !strings.Contains(err.Error(), filepath.Join(missing, contract.SummaryFile)) {
		t.Errorf("missing dir: %v, want ErrBadRun naming summary.json", err)
	}

	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, contract.SummaryFile), []byte(`{"scenarios":[`), 0o644)
	_, err = Load(dir)
	if !errors.Is(err, ErrBadRun) || !strings.Contains(err.Error(), filepath.Join(dir, contract.SummaryFile)) {
		t.Errorf("malformed summary: %v, want ErrBadRun naming the file", err)
	}

	cases := []struct {
		name string
		edit func(*contract.Summary)
		want string
	}{
		{"bad verdict", func(s *contract.Summary) { s.Scenarios[0].Verdicts[contract.PropLease] = "safe" }, `lease: verdict "safe"`},
		{"bad expected", func(s *contract.Summary) { s.Scenarios[1].Expected[contract.PropResource] = "fine" }, `expected.resource: verdict "fine"`},
		{"missing lock", func(s *contract.Summary) { s.Scenarios[0].Lock = "" }, "lock: missing"},
		{"history outside the run", func(s *contract.Summary) { s.Scenarios[0].History = "../etc/passwd" }, "not a path inside the run directory"},
		{"absolute history", func(s *contract.Summary) { s.Scenarios[0].History = "/etc/passwd" }, "not a path inside the run directory"},
		{"shared directory", func(s *contract.Summary) { s.Scenarios[1].History = s.Scenarios[0].History }, "share the directory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := copyRun(t, c.edit)
			_, err := Load(dir)
			if !errors.Is(err, ErrBadRun) || !strings.Contains(err.Error(), contract.SummaryFile) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want ErrBadRun naming summary.json and %q", err, c.want)
			}
		})
	}
}

// TestReportStaysInsideTheRun (review, the tool made safe): report reads
// and writes nothing outside the run directory. A row whose history has
// no folder part names its page by its lock and fault: "../outside/evil"
// wrote outside/evil-none-1.html. A scenario folder that is a link to
// elsewhere is neither read nor written through.
func TestReportStaysInsideTheRun(t *testing.T) {
	dir := copyRun(t, func(s *contract.Summary) {
		s.Scenarios = s.Scenarios[:1]
		s.Scenarios[0].Lock, s.Scenarios[0].Fault, s.Scenarios[0].Seed = "../outside/evil", "none", 1
		s.Scenarios[0].History = "history.jsonl"
	})
	if err := os.MkdirAll(filepath.Join(dir, "..", "outside"), 0o755); err != nil {
		t.Fatal(err)
	}
	run, err := Load(dir)
	if err == nil {
		err = WriteAll(dir, Build(run))
	}
	if _, serr := os.Stat(filepath.Join(dir, "..", "outside", "evil-none-1.html")); serr == nil {
		t.Fatal("report wrote a page outside the run directory")
	}
	if !errors.Is(err, ErrBadRun) || !strings.Contains(err.Error(), `lock "../outside/evil"`) {
		t.Errorf("a row naming a page outside the run: %v, want ErrBadRun naming the lock", err)
	}

	// A scenario folder that is a link to a folder outside the run.
	dir = copyRun(t, keep("fenced-none-1"))
	outside := t.TempDir()
	if err := os.CopyFS(outside, os.DirFS(filepath.Join(dir, "fenced-none-1"))); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "fenced-none-1")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "fenced-none-1")); err != nil {
		t.Fatal(err)
	}
	run, err = Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if sc := run.Scenarios[0]; sc.Check != nil || len(sc.Problems) == 0 {
		t.Errorf("a scenario folder linked outside the run was read: problems %v", sc.Problems)
	}
	_ = WriteAll(dir, Build(run))
	if _, err := os.Stat(filepath.Join(outside, contract.ScenarioPageFile)); err == nil {
		t.Error("report wrote a page through a link outside the run directory")
	}
}

// Broken scenario files are shown, name the file, and make the run inconclusive.
func TestBrokenScenarioFiles(t *testing.T) {
	dir := copyRun(t, keep("fenced-none-1", "fenced-none-2", "fenced-pause-client-1"))
	os.Remove(filepath.Join(dir, "fenced-none-1", contract.CheckFile))
	os.WriteFile(filepath.Join(dir, "fenced-none-2", "history.jsonl"), []byte(`{"op":"fault"}`+"\n"), 0o644)
	b, _ := os.ReadFile(filepath.Join(dir, "fenced-pause-client-1", contract.CheckFile))
	b = bytes.Replace(b, []byte(`"verdict": "ok"`), []byte(`"verdict": "violated"`), 2) // disagrees with summary.json
	os.WriteFile(filepath.Join(dir, "fenced-pause-client-1", contract.CheckFile), b, 0o644)

	run, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := Build(run)
	if r.Status != Inconclusive || r.Counts.Problems != 3 {
		t.Fatalf("status %s with %d problems, want inconclusive with 3", r.Status, r.Counts.Problems)
	}
	want := map[string]string{
		"fenced-none-1":         filepath.Join(dir, "fenced-none-1", contract.CheckFile),
		"fenced-none-2":         filepath.Join(dir, "fenced-none-2", "history.jsonl") + ":1: name: missing",
		"fenced-pause-client-1": "but summary.json says ok",
	}
	for _, s := range r.Scenarios {
		if s.Status == Pass {
			t.Errorf("%s passes despite broken files", s.ID)
		}
		if len(s.Problems) == 0 || !strings.Contains(strings.Join(s.Problems, "\n"), want[s.ID]) {
			t.Errorf("%s problems %q, want one containing %q", s.ID, s.Problems, want[s.ID])
		}
	}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| fenced-pause-client-1 | files |") || strings.Contains(md.String(), "all 3 scenarios gave") {
		t.Errorf("markdown hides the broken files:\n%s", md.String())
	}
}

// A run whose only doubt is an unknown verdict is never reported safe.
func TestUnknownIsNeverSafe(t *testing.T) {
	run, err := Load(copyRun(t, keep("fenced-none-1", "fenced-latency-1")))
	if err != nil {
		t.Fatal(err)
	}
	r := Build(run)
	if r.Status != Inconclusive || !strings.Contains(r.Headline, "does not show the locks safe") {
		t.Errorf("status %s headline %q, want inconclusive", r.Status, r.Headline)
	}
	run, err = Load(copyRun(t, keep("fenced-none-1", "fenced-none-2", "setnx-pause-client-1")))
	if err != nil {
		t.Fatal(err)
	}
	if r := Build(run); r.Status != Pass ||
		r.Headline != "all 3 scenarios as predicted; violations, each predicted, in 1 of 2 cells: setnx × pause-client (resource 1/1)" {
		t.Errorf("status %s headline %q, want pass", r.Status, r.Headline)
	}
	if r := Build(&Run{}); r.Status != Inconclusive {
		t.Errorf("an empty run is %s, want inconclusive", r.Status)
	}
}

func TestCompare(t *testing.T) {
	old := loadFixture(t)
	newer := loadFixture(t)
	for _, s := range newer.Scenarios {
		switch s.ID {
		case "lua-none-1":
			s.Property("lease").Verdict = contract.OK
		case "fenced-none-2":
			s.Property("resource").Verdict = contract.Violated
		case "fenced-latency-1":
			s.Property("lease").Verdict = contract.OK
		}
	}
	// A violation that became unknown is inconclusive, not fixed.
	var lost string
	for i, s := range newer.Scenarios {
		if s.ID == "lua-none-1" || lost != "" {
			continue
		}
		if p := s.Property("resource"); p != nil && p.Verdict == contract.Violated && old.Scenarios[i].ID == s.ID &&
			old.Scenarios[i].Property("resource").Verdict == contract.Violated {
			p.Verdict, lost = contract.Unknown, scenarioKey(s)
		}
	}
	if lost == "" {
		t.Fatal("the fixture has no second violated resource verdict to lose")
	}
	newer.Scenarios = append(newer.Scenarios, &ScenarioReport{Lock: "getset", Fault: "clock-skew", Seed: 3})
	old.Scenarios = append(old.Scenarios, &ScenarioReport{Lock: "getset", Fault: "none", Seed: 1})
	d := Compare(old, newer)
	if len(d.Inconclusive) != 1 || d.Inconclusive[0].Scenario != lost || d.Inconclusive[0].Old != contract.Violated {
		t.Errorf("inconclusive %+v; want %s violated -> unknown", d.Inconclusive, lost)
	}
	if len(d.NewViolations) != 1 || d.NewViolations[0].Scenario != "fenced/none/seed-2" || d.NewViolations[0].Property != "resource" {
		t.Errorf("new violations %+v", d.NewViolations)
	}
	if len(d.Fixed) != 1 || d.Fixed[0].Scenario != "lua/none/seed-1" || d.Fixed[0].Old != contract.Violated {
		t.Errorf("fixed %+v", d.Fixed)
	}
	if len(d.Changed) != 1 || d.Changed[0].Scenario != "fenced/latency/seed-1" || d.Changed[0].Old != contract.Unknown {
		t.Errorf("changed %+v", d.Changed)
	}
	if fmt.Sprint(d.Added) != "[getset/clock-skew/seed-3]" || fmt.Sprint(d.Removed) != "[getset/none/seed-1]" {
		t.Errorf("added %v removed %v", d.Added, d.Removed)
	}
	var buf bytes.Buffer
	if err := WriteDiff(&buf, d); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## New violations (1)", "| fenced/none/seed-2 | resource | ok | violated | ok |", "## Fixed (1)", "## Changed verdicts (1)",
		"## New unknowns: the new run could not tell (1)"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("diff lacks %q:\n%s", want, buf.String())
		}
	}
	if d := Compare(old, old); len(d.NewViolations)+len(d.Fixed)+len(d.Changed)+len(d.Added)+len(d.Removed) != 0 {
		t.Errorf("a run compared with itself differs: %+v", d)
	}
}

// Big histories are sampled, but violations and never-returned ops are always drawn.
func TestPlotSampling(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	var ops []history.Op
	for i := range 20000 {
		ops = append(ops, history.Op{Client: "c", Kind: history.Renew, Key: "k", Call: int64(i) * 1000, Return: int64(i)*1000 + 500, Completed: true, Result: history.OK})
	}
	ops = append(ops, history.Op{Client: "d", Kind: history.Acquire, Key: "k", Call: 7, Result: history.Unknown})
	ops = append(ops, history.Op{Kind: history.Fault, Name: "partition", Call: 10})
	if err := history.WriteFile(path, ops); err != nil {
		t.Fatal(err)
	}
	p, err := loadPlot(func() (io.ReadCloser, error) { return history.Open(path) }, path, map[int]string{12345: "mutual-exclusion: x"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Total != 20002 || p.Ops != 20001 || len(p.Points) > maxPlotPoints+2 {
		t.Errorf("total %d, ops %d, %d points drawn, want 20002, 20001 and at most %d", p.Total, p.Ops, len(p.Points), maxPlotPoints+2)
	}
	var sawViolation, sawPending bool
	for _, pt := range p.Points {
		sawViolation = sawViolation || pt.Line == 12345 && pt.Violation != ""
		sawPending = sawPending || pt.Latency < 0
	}
	if !sawViolation || !sawPending {
		t.Errorf("violation drawn %v, pending drawn %v; want both", sawViolation, sawPending)
	}
	if len(p.Faults) != 1 || !p.Faults[0].Open || p.Faults[0].End != p.End {
		t.Errorf("faults %+v, want one open window to the end", p.Faults)
	}
	svg := p.SVG()
	if strings.Count(svg, `class="violation"`) != 1 || strings.Count(svg, "never lifted") != 1 {
		t.Errorf("svg does not mark the violation and the open fault")
	}
}

func TestWriteAll(t *testing.T) {
	dir := copyRun(t, nil)
	run, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteAll(dir, Build(run)); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{contract.MarkdownFile, contract.HTMLFile, contract.JUnitFile, contract.JSONFile} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s not written: %v", f, err)
		}
	}
	err = WriteAll(filepath.Join(dir, "missing-subdir"), Build(run))
	if err == nil || !strings.Contains(err.Error(), contract.MarkdownFile) {
		t.Errorf("write into a missing dir: %v, want an error naming the file", err)
	}
}

func TestOpsCountMismatch(t *testing.T) {
	dir := copyRun(t, func(s *contract.Summary) {
		s.Scenarios = s.Scenarios[:1]
		s.Scenarios[0].Ops = 999
	})
	run, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if p := run.Scenarios[0].Problems; len(p) != 1 || !strings.Contains(p[0], "8 ops but summary.json says 999") {
		t.Errorf("problems %q, want the ops mismatch", p)
	}
	if r := Build(run); r.Status != Inconclusive {
		t.Errorf("status %s, want inconclusive", r.Status)
	}
}

// TestFailedScenarioNeverPasses: a scenario whose run or fault failed
// (summary.json's error and fault_error) is inconclusive, whatever its
// verdicts say: the report once said "pass" for a pause that never paused.
func TestFailedScenarioNeverPasses(t *testing.T) {
	for _, field := range []string{"error", "fault_error"} {
		dir := copyRun(t, keep("fenced-none-1", "fenced-none-2"))
		p := filepath.Join(dir, contract.SummaryFile)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var sum map[string][]map[string]any
		if err := json.Unmarshal(b, &sum); err != nil {
			t.Fatal(err)
		}
		sum["scenarios"][1][field] = "wait for p0 to hold: context deadline exceeded"
		if b, err = json.Marshal(sum); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		run, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		r := Build(run)
		if r.Status != Inconclusive || r.Counts.Problems != 1 {
			t.Errorf("%s: status %s with %d problems, want inconclusive with 1", field, r.Status, r.Counts.Problems)
		}
		for _, s := range r.Scenarios {
			if failed := s.ID == "fenced-none-2"; failed == (s.Status == Pass) || failed != strings.Contains(strings.Join(s.Problems, ";"), "context deadline exceeded") {
				t.Errorf("%s: %s status %s, problems %q", field, s.ID, s.Status, s.Problems)
			}
		}
	}
}

// TestJUnitTimesAndSkipped: every testcase carries its scenario's wall time
// in seconds, and a scenario an interruption kept from running is skipped,
// neither a failure nor an error (the suites count it so).
func TestJUnitTimesAndSkipped(t *testing.T) {
	r := loadFixture(t)
	r.Scenarios[0].ElapsedMs = 1234
	r.Scenarios[0].Started = "2026-11-24T03:04:05.123456Z"
	r.Scenarios = append(r.Scenarios, &ScenarioReport{ID: "fenced-none-9", Lock: "fenced", Fault: "none", Seed: 9, NotRun: true, Status: Pass})
	var buf bytes.Buffer
	if err := WriteJUnit(&buf, r); err != nil {
		t.Fatal(err)
	}
	var suites junitSuites
	if err := xml.Unmarshal(buf.Bytes(), &suites); err != nil {
		t.Fatal(err)
	}
	var skipped, timed, suiteSkips int
	for _, s := range suites.Suites {
		suiteSkips += s.Skipped
		if s.Name == "lockproof/"+r.Scenarios[0].Lock && s.Timestamp != "2026-11-24T03:04:05" {
			t.Errorf("suite %s timestamp %q; want its first scenario's start, 2026-11-24T03:04:05", s.Name, s.Timestamp)
		}
		for _, c := range s.Cases {
			if c.Skipped != nil {
				skipped++
				if c.Failure != nil || c.Error != nil || c.Name != "none/seed-9" {
					t.Errorf("skipped case %+v", c)
				}
			}
			if c.Time == "1.234" {
				timed++
			}
		}
	}
	if skipped != 1 || suiteSkips != 1 || timed != 1 {
		t.Fatalf("skipped %d (suites say %d), cases timed 1.234s %d; want 1, 1, 1:\n%s", skipped, suiteSkips, timed, buf.String())
	}
	checkJUnitSchema(t, buf.Bytes())
}

// TestCompareCells: a predicted break found on fewer seeds than before is
// a rate drop, one found later (by half and 500ms at least) a slowdown;
// a cell that did not change is neither.
func TestCompareCells(t *testing.T) {
	build := func(found int, detect int64) *Report {
		run := &Run{}
		for seed := 1; seed <= 4; seed++ {
			for _, lock := range []string{"set-del", "lua"} {
				sc := &LoadedScenario{Row: contract.Row{Lock: lock, Fault: "pause-client", Seed: int64(seed),
					Verdicts: contract.Verdicts{contract.PropLease: contract.OK, contract.PropResource: contract.Violated, contract.PropLiveness: contract.NA},
					Expected: contract.Verdicts{contract.PropLease: contract.Violated, contract.PropResource: contract.Violated}}}
				if lock == "lua" {
					sc.Expected[contract.PropLease] = contract.OK
					sc.DetectMs = map[string]int64{"resource": 1500}
				}
				if lock == "set-del" && seed <= found {
					sc.Verdicts[contract.PropLease] = contract.Violated
					sc.DetectMs = map[string]int64{"lease": detect}
				}
				sc.ID = fmt.Sprintf("%s-pause-client-%d", lock, seed)
				run.Scenarios = append(run.Scenarios, sc)
			}
		}
		return Build(run)
	}
	d := Compare(build(4, 1000), build(2, 2000))
	if len(d.RateDrops) != 1 || d.RateDrops[0].Cell != "set-del × pause-client" || d.RateDrops[0].OldFound != 4 || d.RateDrops[0].NewFound != 2 {
		t.Errorf("rate drops %+v; want set-del × pause-client lease 4/4 -> 2/4", d.RateDrops)
	}
	if len(d.Slowdowns) != 1 || d.Slowdowns[0].Property != "lease" || *d.Slowdowns[0].NewMedianMs != 2000 {
		t.Errorf("slowdowns %+v; want set-del × pause-client lease 1s -> 2s", d.Slowdowns)
	}
	var buf bytes.Buffer
	if err := WriteDiff(&buf, d); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Detection rate drops (1)", "| set-del × pause-client | lease | 4/4 | 2/4 |", "## Detection slowdowns (1)"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("diff lacks %q:\n%s", want, buf.String())
		}
	}
	if d := Compare(build(4, 1000), build(4, 1300)); len(d.RateDrops)+len(d.Slowdowns) != 0 {
		t.Errorf("same rate, 300ms slower: %+v %+v; want no change", d.RateDrops, d.Slowdowns)
	}
}

// A trace the TLA+ model rejected fails the report, as it fails the run:
// the headline, "Not as expected", the Markdown and the JUnit say so.
func TestTraceRejectedFails(t *testing.T) {
	run, err := Load(copyRun(t, keep("fenced-none-1", "fenced-none-2", "setnx-pause-client-1")))
	if err != nil {
		t.Fatal(err)
	}
	for i := range run.Scenarios {
		sc := run.Scenarios[i]
		switch sc.ID {
		case "fenced-none-1":
			sc.Trace = contract.TraceAccepted
		case "fenced-none-2":
			sc.Trace, sc.TraceLine = contract.TraceRejected, 42
		}
	}
	r := Build(run)
	if r.Status != Fail || r.Counts.TraceValidated != 2 || r.Counts.TraceRejected != 1 || !strings.Contains(r.Headline, "1 traces rejected by the TLA+ model") {
		t.Errorf("status %s, counts %+v, headline %q; want fail with one rejected trace", r.Status, r.Counts, r.Headline)
	}
	is := unexpectedOf(r)
	if len(is) != 1 || is[0].Scenario.ID != "fenced-none-2" || !strings.Contains(is[0].Text, "line 42") {
		t.Errorf("not as expected: %+v", is)
	}
	var md, ju bytes.Buffer
	if err := WriteMarkdown(&md, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteJUnit(&ju, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| fenced-none-2 | trace |") || !strings.Contains(md.String(), "2 fenced-lock histories validated, 1 rejected") {
		t.Errorf("markdown:\n%s", md.String())
	}
	if !strings.Contains(ju.String(), `message="trace rejected by the model at line 42"`) {
		t.Errorf("junit has no failure for the rejected trace:\n%s", ju.String())
	}
}

// A seed whose fault failed proves nothing of the fault: its cell counts it
// as unknown, not as a violation found, as summary.json's cells leave it
// out of their seeds.
func TestFailedSeedIsNotTallied(t *testing.T) {
	run := &Run{}
	for seed := 1; seed <= 2; seed++ {
		sc := &LoadedScenario{Row: contract.Row{Lock: "set-del", Fault: "pause-client", Seed: int64(seed),
			Verdicts: contract.Verdicts{contract.PropLease: contract.OK, contract.PropResource: contract.OK, contract.PropLiveness: contract.NA}},
			ID: fmt.Sprintf("set-del-pause-client-%d", seed)}
		if seed == 2 {
			sc.Verdicts[contract.PropLease] = contract.Violated
			sc.FaultError = "the fault did not bite"
		}
		run.Scenarios = append(run.Scenarios, sc)
	}
	p := Build(run).CellOf("set-del", "pause-client").Property(contract.PropLease)
	if p.Held != 1 || p.Violated != 0 || p.Unknown != 1 || p.Rate != 0 {
		t.Fatalf("lease over the cell: %+v; want held 1, unknown 1 (the failed seed), violated 0", p)
	}
}

// A summary written by a lockproof with one more property loads: the
// reader takes the properties it knows and leaves the others alone.
func TestLoadLeavesUnknownPropertiesAlone(t *testing.T) {
	dir := t.TempDir()
	row := `{"lock":"fenced","fault":"none","seed":1,"ops":3,"lease":"ok","resource":"ok","liveness":"n/a","fairness":"violated",` +
		`"rejected":0,"expected":{"lease":"ok","fairness":"ok"},"history":"fenced-none-1/history.jsonl","as_expected":true,"duration_ms":3000,"ttl_ms":500}`
	if err := os.WriteFile(filepath.Join(dir, contract.SummaryFile), []byte(`{"scenarios":[`+row+`]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	run, err := LoadWith(dir, LoadOptions{SummaryOnly: true})
	if err != nil {
		t.Fatalf("a newer summary: %v", err)
	}
	sc := run.Scenarios[0]
	if sc.Verdicts[contract.PropLease] != contract.OK || sc.Verdicts[contract.PropLiveness] != contract.NA ||
		sc.Verdicts[contract.PropClaims] != contract.NotChecked || len(sc.Verdicts) != len(contract.Properties()) {
		t.Fatalf("verdicts %v; want the known ones (claims not checked: the row predates it)", sc.Verdicts)
	}
	// A known property's bad verdict is still refused, naming the field.
	bad := strings.Replace(row, `"lease":"ok","resource"`, `"lease":"fine","resource"`, 1)
	if err := os.WriteFile(filepath.Join(dir, contract.SummaryFile), []byte(`{"scenarios":[`+bad+`]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadWith(dir, LoadOptions{SummaryOnly: true}); !errors.Is(err, ErrBadRun) || !strings.Contains(err.Error(), `lease: verdict "fine"`) {
		t.Fatalf("a bad lease verdict: %v", err)
	}
}

// TestCompareTopologies: a run on a Redis Cluster compared with one on
// the Sentinel topology sets every cell side by side, those of one
// topology alone included; two runs of one topology get no such table.
func TestCompareTopologies(t *testing.T) {
	build := func(topology string, faults ...string) *Report {
		run := &Run{Topology: topology}
		for _, f := range faults {
			v := contract.OK
			if f == contract.FaultTakeover {
				v = contract.Violated
			}
			run.Scenarios = append(run.Scenarios, &LoadedScenario{Row: contract.Row{Lock: "fenced", Fault: f, Seed: 1,
				Verdicts: contract.Verdicts{contract.PropLease: v, contract.PropResource: contract.OK}}})
		}
		return Build(run)
	}
	sentinel := build(contract.TopologySentinel, contract.FaultNone, contract.FaultFailover)
	cluster := build(contract.TopologyCluster, contract.FaultNone, contract.FaultFailover, contract.FaultTakeover)
	if cluster.Topology != contract.TopologyCluster || sentinel.Topology != "" {
		t.Fatalf("report topologies %q and %q; want cluster and none", cluster.Topology, sentinel.Topology)
	}
	d := Compare(sentinel, cluster)
	if want := []string{contract.TopologySentinel, contract.TopologyCluster}; !slices.Equal(d.Topologies, want) {
		t.Fatalf("Topologies = %v; want %v", d.Topologies, want)
	}
	want := []Side{
		{Cell: "fenced × none", Old: "all held (1 seeds)", New: "all held (1 seeds)"},
		{Cell: "fenced × failover", Old: "all held (1 seeds)", New: "all held (1 seeds)"},
		{Cell: "fenced × takeover", Old: "—", New: "violated: lease 1/1"},
	}
	if !slices.Equal(d.Sides, want) {
		t.Fatalf("Sides = %+v\nwant %+v", d.Sides, want)
	}
	var b strings.Builder
	if err := WriteDiff(&b, d); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "| lock × fault | sentinel | cluster |") || !strings.Contains(b.String(), "| fenced × takeover | — | violated: lease 1/1 |") {
		t.Errorf("the diff does not set the topologies side by side:\n%s", b.String())
	}
	if d := Compare(cluster, cluster); len(d.Topologies) != 0 || len(d.Sides) != 0 {
		t.Errorf("one topology compared with itself: %v, %d sides", d.Topologies, len(d.Sides))
	}
}

// TestBackends: runs of a Redis topology and a consensus store's, set
// side by side lock by lock: each run's locks under their topology, every
// fault of either run a column, "—" where a fault did not run, what broke
// counted by seeds, and a cell not as predicted marked.
func TestBackends(t *testing.T) {
	build := func(topology, lock string, cells map[string]contract.Verdict, expected contract.Verdict) *Report {
		run := &Run{Topology: topology}
		for f, v := range cells {
			run.Scenarios = append(run.Scenarios, &LoadedScenario{Row: contract.Row{Lock: lock, Fault: f, Seed: 1,
				Verdicts: contract.Verdicts{contract.PropLease: contract.OK, contract.PropResource: v},
				Expected: contract.Verdicts{contract.PropResource: expected}}})
		}
		return Build(run)
	}
	redis := build(contract.TopologySentinel, "lua", map[string]contract.Verdict{contract.FaultPauseClient: contract.Violated, contract.FaultFailover: contract.OK}, contract.Violated)
	etcd := build(contract.TopologyEtcd, "etcd-mutex", map[string]contract.Verdict{contract.FaultPauseClient: contract.Violated, contract.FaultMinorityPartition: contract.Violated}, contract.OK)
	var b strings.Builder
	if err := WriteBackends(&b, []string{"redis-run", "etcd-run"}, []*Report{redis, etcd}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"| topology | lock | ",
		"| sentinel | lua | ",
		"| etcd | etcd-mutex | ",
		"resource 1/1 |",
		"resource 1/1 **(!)** |",
		"| — |",
		"- etcd (etcd-run): ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("WriteBackends lacks %q:\n%s", want, out)
		}
	}
	header := strings.Split(out, "\n")[4]
	for _, f := range []string{contract.FaultPauseClient, contract.FaultFailover, contract.FaultMinorityPartition} {
		if strings.Count(header, f) != 1 {
			t.Errorf("header %q: want one column for %s", header, f)
		}
	}
}

// TestLoadTopology: summary.json's topology reads as written, and a file
// without one (every file before the cluster topology) as the Sentinel
// topology.
func TestLoadTopology(t *testing.T) {
	run, err := LoadWith(fixture, LoadOptions{SummaryOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if run.Topology != contract.TopologySentinel {
		t.Errorf("a summary without topology reads %q; want %q", run.Topology, contract.TopologySentinel)
	}
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join(fixture, contract.SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	var sum map[string]any
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	sum["topology"] = contract.TopologyCluster
	if b, err = json.Marshal(sum); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, contract.SummaryFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if run, err = LoadWith(dir, LoadOptions{SummaryOnly: true}); err != nil {
		t.Fatal(err)
	}
	if run.Topology != contract.TopologyCluster || Build(run).Topology != contract.TopologyCluster {
		t.Errorf("topology %q (report %q); want cluster", run.Topology, Build(run).Topology)
	}
}

// TestMarkdownEscapesNames: names from summary.json (a lock, a fault, the
// topology) cannot make links, images or emphasis in report.md, nor
// break out of a code span (issue 47 item 11).
func TestMarkdownEscapesNames(t *testing.T) {
	for _, name := range []string{"[x](http://evil.example)", "![i](http://evil.example/p.png)", "*loud*", "a`b"} {
		got := mdEscape(name)
		for _, bad := range []string{"](", "[", "*l", "`b"} {
			if strings.Contains(got, bad) && !strings.Contains(got, `\`+bad[:1]) {
				t.Errorf("mdEscape(%q) = %q keeps %q", name, got, bad)
			}
		}
	}
	if got := mdEscape(`a\[b`); got != `a\\\[b` {
		t.Errorf(`mdEscape(a\[b) = %q: a backslash of the name must not escape the escape`, got)
	}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, &Report{Topology: "x` [l](http://evil.example) `"}); err != nil {
		t.Fatal(err)
	}
	if s := md.String(); strings.Contains(s, "[l](") || strings.Contains(s, "--topology x") {
		t.Errorf("an unknown topology is written raw:\n%s", s)
	}
}

// liveHeapReader serves n acquire ops as JSONL and measures the live heap
// (after a GC) every 100,000 ops: what the reader keeps, not its garbage.
type liveHeapReader struct {
	n, i int
	buf  []byte
	peak uint64
}

func (r *liveHeapReader) Read(p []byte) (int, error) {
	for len(r.buf) < len(p) && r.i < r.n {
		if r.i%100_000 == 0 {
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			r.peak = max(r.peak, ms.HeapAlloc)
		}
		r.buf = fmt.Appendf(r.buf, `{"client":"c%d","op":"acquire","key":"k","call":%d,"return":%d,"result":"fail","ttl_ms":500}`+"\n", r.i%7, r.i*1000, r.i*1000+500)
		r.i++
	}
	if len(r.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

func (r *liveHeapReader) Close() error { return nil }

// TestPlotMemoryIsBounded: a scenario's plot keeps a bounded sample of a
// history however long it is (issue 47 item 10: a history of about a
// million ops took near a gigabyte to report).
func TestPlotMemoryIsBounded(t *testing.T) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	r := &liveHeapReader{n: 1_000_000}
	p, err := loadPlot(func() (io.ReadCloser, error) { return r, nil }, "gen.jsonl", map[int]string{5: "rule"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Ops != r.n || len(p.Points) > maxPlotPoints+1 || len(p.Points) < maxPlotPoints/2 {
		t.Fatalf("%d ops, %d points; want %d ops sampled to at most %d points and the violation", p.Ops, len(p.Points), r.n, maxPlotPoints+1)
	}
	if !slices.ContainsFunc(p.Points, func(pt Point) bool { return pt.Line == 5 && pt.Violation == "rule" }) {
		t.Errorf("the op in a violation was not kept")
	}
	// The million ops as points alone would hold over 100 MB.
	if grew := int64(r.peak) - int64(base); grew > 16<<20 {
		t.Errorf("the live heap grew %d MiB while reading; want it bounded by the sample", grew>>20)
	}
}

// TestStallsAreReported: a row whose verdict a stall excused says so, with
// the stall's length, in the scenario's evidence, Markdown and JUnit.
func TestStallsAreReported(t *testing.T) {
	run, err := Load(copyRun(t, keep("fenced-none-1", "fenced-none-2")))
	if err != nil {
		t.Fatal(err)
	}
	for i := range run.Scenarios {
		if sc := run.Scenarios[i]; sc.ID == "fenced-none-1" {
			sc.Stalls = &contract.Stalls{Count: 2, LongestMs: 130,
				Excused: []contract.StallExcuse{{Property: contract.PropFairness, StallMs: 130}}}
		}
	}
	r := Build(run)
	var stalled *ScenarioReport
	for _, s := range r.Scenarios {
		if s.ID == "fenced-none-1" {
			stalled = s
		}
	}
	if stalled == nil {
		t.Fatal("no fenced-none-1")
	}
	if p := stalled.Property(contract.PropFairness); p == nil || p.StallMs != 130 || !strings.Contains(p.Evidence, "excused by a stall of 130ms") {
		t.Errorf("fairness outcome %+v, want it excused by a stall of 130ms", p)
	}
	var md, ju bytes.Buffer
	if err := WriteMarkdown(&md, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteJUnit(&ju, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "## Excused by stalls (1)") || !strings.Contains(md.String(), "| fenced-none-1 | stalls 2, longest 130ms; fairness excused by a stall of 130ms |") {
		t.Errorf("markdown:\n%s", md.String())
	}
	if !strings.Contains(ju.String(), "stalls: stalls 2, longest 130ms; fairness excused by a stall of 130ms") {
		t.Errorf("junit says nothing of the stall:\n%s", ju.String())
	}
}
