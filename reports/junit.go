package reports

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// The JUnit XML that Jenkins (xunit's junit-10.xsd), GitHub test
// reporters and Ant read: testsuites holds no skipped count, times are
// seconds, timestamps ISO 8601 without a zone (UTC here, as Ant writes
// them). junit_schema_test.go checks the output against those rules.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name      string      `xml:"name,attr"`
	Tests     int         `xml:"tests,attr"`
	Failures  int         `xml:"failures,attr"`
	Errors    int         `xml:"errors,attr"`
	Skipped   int         `xml:"skipped,attr"`
	Time      string      `xml:"time,attr"`
	Timestamp string      `xml:"timestamp,attr,omitempty"`
	Cases     []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"` // seconds
	Timestamp string        `xml:"timestamp,attr,omitempty"`
	Skipped   *junitSkipped `xml:"skipped,omitempty"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

// junitSkipped marks a scenario an interruption kept from running: it
// neither passed nor failed.
type junitSkipped struct {
	Message string `xml:"message,attr"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// WriteJUnit renders the report as JUnit XML: one test suite per lock, one
// test case per scenario. A scenario not as predicted (its row's
// mismatches) is a failure; an unknown verdict, a failed scenario or
// broken files (with nothing unexpected) is an error.
func WriteJUnit(w io.Writer, r *Report) error {
	out := junitSuites{Name: "lockproof"}
	var total int64
	for _, lock := range r.Locks {
		suite := junitSuite{Name: "lockproof/" + lock}
		var suiteMs int64
		first := ""
		for _, s := range r.Scenarios {
			if s.Lock != lock {
				continue
			}
			suiteMs += s.ElapsedMs
			if s.Started != "" && (first == "" || s.Started < first) {
				first = s.Started
			}
			c := junitCase{Name: fmt.Sprintf("%s/seed-%d", s.Fault, s.Seed), Classname: "lockproof." + lock,
				Time: seconds(s.ElapsedMs), Timestamp: junitTime(s.Started)}
			if s.NotRun {
				c.Skipped = &junitSkipped{Message: "not run: the run was interrupted before this scenario"}
				suite.Skipped++
				suite.Tests++
				suite.Cases = append(suite.Cases, c)
				continue
			}
			var errs, details []string
			for _, p := range s.Properties {
				line := fmt.Sprintf("%s: %s", p.Property, p.Verdict)
				if p.Expected != "" {
					line += fmt.Sprintf(" (expected %s)", p.Expected)
				}
				if p.Evidence != "" {
					line += ": " + p.Evidence
				}
				details = append(details, line)
				if p.Outcome == Undecided {
					errs = append(errs, p.Property+" unknown")
				}
			}
			// A failure is what the judge found not as predicted (the
			// row's mismatches), as the exit code counts it.
			var fails []string
			for _, m := range s.Mismatches {
				fails = append(fails, m.Text)
				if m.Property == "" || s.Property(m.Property) == nil {
					details = append(details, mismatchText(s, m))
				}
			}
			for _, pr := range s.Problems {
				errs = append(errs, "broken file")
				details = append(details, pr)
			}
			if n := s.StallNote(); n != "" {
				details = append(details, "stalls: "+n)
			}
			details = append(details, "history: "+s.History)
			if s.Visualization != "" {
				details = append(details, "visualization: "+s.Visualization)
			}
			text := strings.Join(details, "\n")
			switch s.Status {
			case Fail:
				c.Failure = &junitProblem{Message: strings.Join(fails, "; "), Type: "unexpected-verdict", Text: text}
				suite.Failures++
			case Inconclusive:
				if len(errs) == 0 {
					errs = append(errs, "undecided")
				}
				c.Error = &junitProblem{Message: strings.Join(dedupe(errs), "; "), Type: "unknown-verdict", Text: text}
				suite.Errors++
			default:
				c.SystemOut = text
			}
			suite.Tests++
			suite.Cases = append(suite.Cases, c)
		}
		// A cell that finds a predicted break too rarely fails as a test
		// of its own: no single seed's case is at fault.
		for _, cell := range r.Cells {
			if cell.Lock != lock || len(cell.Regressions) == 0 {
				continue
			}
			suite.Cases = append(suite.Cases, junitCase{Name: cell.Fault + "/detection-rate", Classname: "lockproof." + lock, Time: seconds(0),
				Failure: &junitProblem{Message: strings.Join(cell.Regressions, "; "), Type: "detection-regression",
					Text: "seeds: " + strings.Join(cell.Scenarios, ", ")}})
			suite.Tests++
			suite.Failures++
		}
		suite.Time, suite.Timestamp = seconds(suiteMs), junitTime(first)
		total += suiteMs
		out.Tests += suite.Tests
		out.Failures += suite.Failures
		out.Errors += suite.Errors
		out.Suites = append(out.Suites, suite)
	}
	out.Time = seconds(total)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return fmt.Errorf("write junit report: %w", err)
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("write junit report: %w", err)
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return fmt.Errorf("write junit report: %w", err)
	}
	return nil
}

// seconds renders milliseconds as JUnit's time: seconds, three decimals.
func seconds(ms int64) string { return strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64) }

// junitTime renders an RFC 3339 time as JUnit's timestamp: ISO 8601 in
// UTC without a zone, as Ant writes it ("" stays "": not recorded).
func junitTime(rfc3339 string) string {
	t, err := time.Parse(time.RFC3339Nano, rfc3339)
	if err != nil {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05")
}

func dedupe(ss []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// WriteJSON renders the report as indented JSON (report.json).
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("write json report: %w", err)
	}
	return nil
}
