package lockproof_test

import (
	"cmp"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lockproof/lockproof/chaos"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/locker"
	"github.com/lockproof/lockproof/zoo"
)

// docTable is a generated table: the page that holds it and what makes it.
type docTable struct {
	page  string
	table func() string
}

// docTables are the tables the docs hold that the catalogues make: each
// between the lines "<!-- generated: NAME -->" and "<!-- end generated -->"
// of its page. A page whose table differs from what the catalogue makes
// fails TestDocsTablesMatchTheCatalogues; LOCKPROOF_UPDATE_DOCS=1 rewrites
// it. So the fault, lock and property tables cannot drift.
func docTables() map[string]docTable {
	return map[string]docTable{
		"faults":     {filepath.Join("docs", "HARNESS.md"), faultTable},
		"locks":      {filepath.Join("docs", "HARNESS.md"), lockTable},
		"properties": {filepath.Join("docs", "DESIGN.md"), propertyTable},
	}
}

// faultTable is the fault catalogue (chaos.Catalogue), one row per fault.
func faultTable() string {
	var b strings.Builder
	b.WriteString("| fault | runs on | default matrix | in the simulation | what it does |\n|---|---|---|---|---|\n")
	for _, f := range chaos.Catalogue() {
		var on, matrix []string
		for _, t := range contract.Topologies() {
			if f.NotRealTime == "" && f.RunsOn(t) {
				on = append(on, t)
				if f.InMatrixOn(t) {
					matrix = append(matrix, t)
				}
			}
		}
		where := strings.Join(on, ", ")
		if f.NotRealTime != "" {
			where = "the simulation alone"
		}
		simulated := "yes"
		if f.Simulate == nil {
			simulated = "no: " + f.NotSimulated
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", f.Name, where, cmp.Or(strings.Join(matrix, ", "), "no (when named)"), cell(simulated), cell(f.Doc))
	}
	return b.String()
}

// lockTable is the built-in registry (zoo.Builtin), one row per lock.
func lockTable() string {
	var b strings.Builder
	b.WriteString("| lock | profile | needs | what it is |\n|---|---|---|---|\n")
	reg := zoo.Builtin()
	for _, name := range reg.Names() {
		e, _ := reg.Lookup(name)
		var needs []string
		if e.Needs.Redlock {
			needs = append(needs, "independent masters")
		}
		if e.Needs.Store != "" {
			needs = append(needs, e.Needs.Store)
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", e.Name, cmp.Or(string(e.Profile), string(locker.ProfileFenced)), cmp.Or(strings.Join(needs, ", "), "Redis"), cell(e.Doc))
	}
	return b.String()
}

// propertyTable is contract.Properties, one row per property.
func propertyTable() string {
	var b strings.Builder
	b.WriteString("| id (summary.json) | name | guarantee | letter | says |\n|---|---|---|---|---|\n")
	for _, p := range contract.Properties() {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", p.ID, p.Name, p.Guarantee, p.Letter, cell(p.Summary))
	}
	return b.String()
}

// cell is s made safe for a Markdown table cell.
func cell(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ") }

// TestDocsTablesMatchTheCatalogues: each generated table in the docs is
// what its catalogue makes today (docTables).
func TestDocsTablesMatchTheCatalogues(t *testing.T) {
	update := os.Getenv("LOCKPROOF_UPDATE_DOCS") == "1"
	for name, d := range docTables() {
		b, err := os.ReadFile(d.page)
		if err != nil {
			t.Fatal(err)
		}
		begin, end := fmt.Sprintf("<!-- generated: %s -->\n", name), "<!-- end generated -->\n"
		i := strings.Index(string(b), begin)
		if i < 0 {
			t.Errorf("%s: no %q line: the %s table must be generated from its catalogue", d.page, strings.TrimSpace(begin), name)
			continue
		}
		j := strings.Index(string(b)[i:], end)
		if j < 0 {
			t.Errorf("%s: the %s table has no %q line", d.page, name, strings.TrimSpace(end))
			continue
		}
		have, want := string(b)[i+len(begin):i+j], d.table()
		if have == want {
			continue
		}
		if update {
			out := string(b)[:i+len(begin)] + want + string(b)[i+j:]
			if err := os.WriteFile(d.page, []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: the %s table rewritten", d.page, name)
			continue
		}
		t.Errorf("%s: the %s table is not what the catalogue makes; LOCKPROOF_UPDATE_DOCS=1 go test -run TestDocsTablesMatchTheCatalogues . rewrites it\nhave:\n%s\nwant:\n%s", d.page, name, have, want)
	}
}

// TestDocsLinksResolve: every relative link and image of the repository's
// Markdown pages names a file or directory that exists, read from the
// page's own directory (as GitHub and every renderer read it). HARNESS.md
// showed its screenshot as docs/example-report.png, from docs/: a link to
// docs/docs/, broken for every reader.
func TestDocsLinksResolve(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	var pages []string
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "runs" || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			pages = append(pages, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 5 {
		t.Fatalf("found %d Markdown pages: the walk is broken", len(pages))
	}
	checked := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		inFence := false
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				inFence = !inFence
			}
			if inFence {
				continue
			}
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				target, _, _ = strings.Cut(target, "#")
				if target == "" {
					continue
				}
				checked++
				if _, err := os.Stat(filepath.Join(filepath.Dir(page), filepath.FromSlash(target))); err != nil {
					t.Errorf("%s:%d: link %q: %v", page, i+1, m[1], err)
				}
			}
		}
	}
	if checked < 20 {
		t.Errorf("checked %d links: the pattern is broken", checked)
	}
}
