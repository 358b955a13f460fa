// Package keeprun gives a test that runs scenarios a run directory that
// outlives a failure: when the test fails, the scenarios the run judged
// not as predicted are told in the test's log (what differed, the lines of
// the history the check cites, the fault and stall windows), and the whole
// directory is copied under $LOCKPROOF_KEEP_FAILED when it is set (where a
// CI job uploads it). A verdict that broke once on a loaded runner can then
// be read, instead of rerun and hoped for. Only tests import it.
package keeprun

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/lockproof/lockproof/contract"
)

// EnvVar names the directory failed tests' run directories are copied
// under, one folder a test; unset, nothing is copied.
const EnvVar = "LOCKPROOF_KEEP_FAILED"

// Bounds of what a failure prints, so a long history cannot flood a CI log.
const (
	maxScenarios = 4   // scenarios told per failed test
	maxCited     = 12  // cited history lines per scenario
	maxWindows   = 16  // fault and stall lines per scenario
	maxLine      = 600 // bytes of one quoted line
)

// Dir returns a new run directory for tb, removed when the test ends; a
// failed test has it told and kept first (the package doc).
func Dir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "lockproof-test-run-*")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tellAll(tb, dir)
			keep(tb, dir)
		}
		_ = os.RemoveAll(dir)
	})
	return dir
}

// tellAll tells the run directory dir, or, when the test made its runs
// in folders of it (a run's --out must not exist beforehand), each of
// them that holds a summary.
func tellAll(tb testing.TB, dir string) {
	if _, err := os.Stat(filepath.Join(dir, "summary.json")); err == nil {
		Tell(tb, dir)
		return
	}
	ents, _ := os.ReadDir(dir)
	told := false
	for _, e := range ents {
		if _, err := os.Stat(filepath.Join(dir, e.Name(), "summary.json")); e.IsDir() && err == nil {
			Tell(tb, filepath.Join(dir, e.Name()))
			told = true
		}
	}
	if !told {
		tb.Logf("keeprun: %s holds no run's summary to tell", dir)
	}
}

// keep copies dir under $LOCKPROOF_KEEP_FAILED/<test name>, when set.
func keep(tb testing.TB, dir string) {
	root := os.Getenv(EnvVar)
	if root == "" {
		return
	}
	name := strings.NewReplacer("/", "_", " ", "_", ":", "_").Replace(tb.Name())
	dst := filepath.Join(root, name)
	for i := 2; ; i++ { // a test that fails twice (-count) keeps both
		if _, err := os.Lstat(dst); os.IsNotExist(err) {
			break
		}
		dst = filepath.Join(root, fmt.Sprintf("%s.%d", name, i))
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		tb.Logf("keeprun: %v", err)
		return
	}
	if err := os.CopyFS(dst, os.DirFS(dir)); err != nil {
		tb.Logf("keeprun: keep %s: %v", dir, err)
		return
	}
	tb.Logf("keeprun: the run directory is kept at %s", dst)
}

// Tell writes to tb's log, for each scenario of the run directory dir
// that is not as predicted (at most maxScenarios), what differed, the
// check's first violation of each property with the history lines it
// cites, and the run's fault and stall windows. A directory with no
// summary.json (a run that stopped early) is said to be so.
func Tell(tb testing.TB, dir string) {
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		tb.Logf("keeprun: %s has no summary to tell: %v", dir, err)
		return
	}
	var sum contract.Summary
	if err := json.Unmarshal(b, &sum); err != nil {
		tb.Logf("keeprun: %s/summary.json: %v", dir, err)
		return
	}
	told := 0
	for _, r := range sum.Scenarios {
		if r == nil || r.AsExpected {
			continue
		}
		if told++; told > maxScenarios {
			tb.Logf("keeprun: and more scenarios not as predicted (summary.json)")
			return
		}
		tb.Log(describe(dir, r))
	}
}

// describe is Tell's text of one scenario.
func describe(dir string, r *contract.Row) string {
	var out strings.Builder
	fmt.Fprintf(&out, "keeprun: %s × %s seed %d, not as predicted:", r.Lock, r.Fault, r.Seed)
	for _, m := range r.MismatchDetails {
		fmt.Fprintf(&out, "\n  %s", m.Text)
	}
	if r.Error != "" {
		fmt.Fprintf(&out, "\n  error: %s", cut(r.Error))
	}
	if r.History == "" {
		return out.String()
	}
	hist := filepath.Join(dir, filepath.FromSlash(r.History))
	cited, why := citedLines(filepath.Join(filepath.Dir(hist), "check.json"))
	for _, w := range why {
		fmt.Fprintf(&out, "\n  %s", cut(w))
	}
	lines, windows, err := readLines(hist, cited)
	if err != nil {
		fmt.Fprintf(&out, "\n  history %s: %v", r.History, err)
		return out.String()
	}
	for _, n := range cited {
		fmt.Fprintf(&out, "\n  line %d: %s", n, cut(lines[n]))
	}
	for i, w := range windows {
		if i == maxWindows {
			fmt.Fprintf(&out, "\n  ... and %d more fault and stall lines", len(windows)-i)
			break
		}
		fmt.Fprintf(&out, "\n  %s", cut(w))
	}
	return out.String()
}

// citedLines reads check.json's properties for their first violation
// each: its explanation, and the history lines it cites (sorted, at most
// maxCited).
func citedLines(path string) (lines []int, why []string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, []string{"no check.json: " + err.Error()}
	}
	var props map[string]json.RawMessage
	if err := json.Unmarshal(b, &props); err != nil {
		return nil, []string{"check.json: " + err.Error()}
	}
	seen := map[int]bool{}
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		var p struct {
			Verdict    string `json:"verdict"`
			Violations []struct {
				Rule        string `json:"rule"`
				Lines       []int  `json:"lines"`
				Explanation string `json:"explanation"`
			} `json:"violations"`
			Explanation string `json:"explanation"`
		}
		if json.Unmarshal(props[name], &p) != nil || p.Verdict == "" || p.Verdict == "ok" {
			continue
		}
		if len(p.Violations) == 0 {
			why = append(why, fmt.Sprintf("%s %s: %s", name, p.Verdict, p.Explanation))
			continue
		}
		v := p.Violations[0]
		why = append(why, fmt.Sprintf("%s %s (%s, %d violations): %s", name, p.Verdict, v.Rule, len(p.Violations), v.Explanation))
		for _, n := range v.Lines {
			if !seen[n] && len(seen) < maxCited {
				seen[n] = true
				lines = append(lines, n)
			}
		}
	}
	sort.Ints(lines)
	return lines, why
}

// readLines reads the history at path (plain or gzip) for the lines
// wanted (1-based) and every fault line ("op":"fault": injected faults
// and stalls), each as "line N: ...".
func readLines(path string, want []int) (map[int]string, []string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			return nil, nil, err
		}
		defer zr.Close()
		r = zr
	}
	wanted := map[int]bool{}
	for _, n := range want {
		wanted[n] = true
	}
	got := map[int]string{}
	var windows []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if wanted[n] {
			got[n] = line
		}
		if strings.Contains(line, `"op":"fault"`) {
			windows = append(windows, fmt.Sprintf("line %d: %s", n, line))
		}
	}
	return got, windows, sc.Err()
}

// cut shortens s to maxLine bytes, saying so.
func cut(s string) string {
	if len(s) <= maxLine {
		return s
	}
	return s[:maxLine] + fmt.Sprintf(" ... (%d bytes)", len(s))
}
