package reports

import (
	"bytes"
	"encoding/xml"
	"io"
	"regexp"
	"slices"
	"strconv"
	"testing"
)

// junitElement is what the JUnit schema readers agree on for one element
// (xunit-plugin's junit-10.xsd, which Jenkins validates against; GitHub's
// test reporters read the same elements): the parents it may appear under,
// its attributes, and which of them are required.
type junitElement struct {
	parents  []string
	attrs    []string
	required []string
}

// junitSchema restates the schema's rules for the elements lockproof
// writes (and the ones it could: properties, system-err).
var junitSchema = map[string]junitElement{
	"testsuites": {parents: []string{""}, attrs: []string{"name", "time", "tests", "failures", "disabled", "errors"}},
	"testsuite": {parents: []string{"", "testsuites", "testsuite"}, attrs: []string{"name", "tests", "failures", "errors", "time",
		"disabled", "skipped", "skips", "timestamp", "hostname", "id", "package", "assertions", "file", "skip", "log", "url"},
		required: []string{"tests"}},
	"testcase": {parents: []string{"testsuite"}, attrs: []string{"name", "assertions", "time", "timestamp", "classname", "status",
		"class", "file", "line", "log", "group", "url"}, required: []string{"name"}},
	"failure":    {parents: []string{"testcase"}, attrs: []string{"type", "message"}},
	"error":      {parents: []string{"testcase"}, attrs: []string{"type", "message"}},
	"skipped":    {parents: []string{"testcase"}, attrs: []string{"type", "message"}},
	"system-out": {parents: []string{"testcase", "testsuite"}},
	"system-err": {parents: []string{"testcase", "testsuite"}},
	"properties": {parents: []string{"testsuite"}},
	"property":   {parents: []string{"properties"}, attrs: []string{"name", "value"}, required: []string{"name", "value"}},
}

// isoLocal is Ant's timestamp: ISO 8601 date and time without a zone.
var isoLocal = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$`)

// schemaT is the part of testing.T the schema check uses (a fake in the
// check's own test).
type schemaT interface {
	Helper()
	Errorf(format string, args ...any)
}

type fakeT struct{ failed bool }

func (f *fakeT) Helper()               {}
func (f *fakeT) Errorf(string, ...any) { f.failed = true }

// checkJUnitSchema fails t when data breaks junitSchema, when a count or
// time is not a number, or a timestamp not ISO 8601.
func checkJUnitSchema(t *testing.T, data []byte) {
	t.Helper()
	checkJUnitSchemaWith(t, data)
}

func checkJUnitSchemaWith(t schemaT, data []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(data))
	var stack []string
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Errorf("junit.xml: %v", err)
			return
		}
		switch el := tok.(type) {
		case xml.StartElement:
			name, parent := el.Name.Local, ""
			if len(stack) > 0 {
				parent = stack[len(stack)-1]
			}
			rule, ok := junitSchema[name]
			if !ok {
				t.Errorf("junit.xml: element <%s> is not in the schema", name)
			} else if !slices.Contains(rule.parents, parent) {
				t.Errorf("junit.xml: <%s> inside <%s>; the schema allows it in %v", name, parent, rule.parents)
			}
			have := map[string]bool{}
			for _, a := range el.Attr {
				k := a.Name.Local
				have[k] = true
				if !slices.Contains(rule.attrs, k) {
					t.Errorf("junit.xml: <%s %s=...> is not in the schema", name, k)
				}
				switch k {
				case "tests", "failures", "errors", "skipped", "disabled":
					if _, err := strconv.Atoi(a.Value); err != nil {
						t.Errorf("junit.xml: <%s %s=%q>: not a count", name, k, a.Value)
					}
				case "time":
					if _, err := strconv.ParseFloat(a.Value, 64); err != nil {
						t.Errorf("junit.xml: <%s time=%q>: not seconds", name, a.Value)
					}
				case "timestamp":
					if !isoLocal.MatchString(a.Value) {
						t.Errorf("junit.xml: <%s timestamp=%q>: not ISO 8601 (yyyy-mm-ddThh:mm:ss)", name, a.Value)
					}
				}
			}
			for _, k := range rule.required {
				if !have[k] {
					t.Errorf("junit.xml: <%s> lacks the required %s", name, k)
				}
			}
			stack = append(stack, name)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		}
	}
}

// TestJUnitSchema: the fixture's junit.xml and one with a regression and
// timestamps meet the schema; the checker itself catches what it must.
func TestJUnitSchema(t *testing.T) {
	r := loadFixture(t)
	for _, s := range r.Scenarios {
		s.Started = "2026-11-24T03:04:05Z"
	}
	r.Cells[0].Regressions = []string{"lease violated on 2 of 10 seeds, below the promised 90%"}
	var buf bytes.Buffer
	if err := WriteJUnit(&buf, r); err != nil {
		t.Fatal(err)
	}
	checkJUnitSchema(t, buf.Bytes())
	if !bytes.Contains(buf.Bytes(), []byte(`type="detection-regression"`)) {
		t.Errorf("a cell's regression is not a failing testcase:\n%s", buf.String())
	}
	for _, broken := range []string{
		`<testsuites skipped="1"></testsuites>`,
		`<testsuites><testsuite tests="1"><testcase name="a" timestamp="2026-11-24T03:04:05Z"/></testsuite></testsuites>`,
		`<testsuites><testsuite><testcase name="a"/></testsuite></testsuites>`,
		`<testsuites><testcase name="a"/></testsuites>`,
	} {
		ft := &fakeT{}
		checkJUnitSchemaWith(ft, []byte(broken))
		if !ft.failed {
			t.Errorf("the schema check accepts %s", broken)
		}
	}
}
