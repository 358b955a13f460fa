// Package mutant reads the catalogue of mutants of the shipped lock and its
// fenced resources (the repository's mutants/ directory) and applies them:
// each mutant is one realistic defect, written as exact search texts and
// their replacements in one file of the module, so that it applies to a
// copy of the source wherever the code around it moved, and refuses to
// apply, naming itself and the file, once the code it mutates changed.
// `lockproof mutants` builds each mutant and runs it through the
// simulation and the real-time matrix: the mutation score of the harness
// (docs/HARNESS.md, "Mutation score").
//
// A mutant file (mutants/<name>.mutant) holds header lines, then edits:
//
//	# a comment
//	file: lock/scripts.go
//	kind: lua
//	class: safety
//	what: the end script ends whatever hold the lock has (no owner check)
//	locks: fenced (the registry's locks that run the mutated code; default: fenced)
//	equivalent: why no history can show it (only for an equivalent mutant)
//	--- search
//	the exact text, as many lines as it takes
//	--- replace
//	what it becomes (no lines: deleted)
//	--- end
//
// Each line between the markers is taken as it is, tabs and spaces
// included; a block's text is its lines joined by newlines, without a
// newline after the last. A mutant may have several edits, applied in
// order; each search text must occur exactly once in the file as the
// edits before it left it.
package mutant

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Sentinel errors. Test with errors.Is.
var (
	// ErrCatalogue: a mutant file is malformed (the error names the file,
	// its line and the field).
	ErrCatalogue = errors.New("bad mutant catalogue")
	// ErrRotten: a mutant's search text is not in its file exactly once:
	// the code it mutates changed, and the mutant must be rewritten.
	ErrRotten = errors.New("the mutant no longer applies")
	// ErrSelect: a pattern of --mutants matches no mutant.
	ErrSelect = errors.New("no such mutant")
	// ErrUnsafePath: a path would lead out of the tree it belongs to.
	ErrUnsafePath = errors.New("path outside its tree")
)

// Ext is the extension of a mutant file; its name is the mutant's.
const Ext = ".mutant"

// Reserved is the name no mutant may take: `lockproof mutants` runs the
// unpatched lock under it, the control.
const Reserved = "control"

// Kinds of mutant: where the defect is written.
const (
	KindLua = "lua" // in a Lua script (held in a Go string)
	KindGo  = "go"  // in Go code
)

// Classes of mutant: what the defect is expected to break.
const (
	ClassSafety     = "safety"     // mutual exclusion or the fenced resource (G1, G2)
	ClassLiveness   = "liveness"   // a free lock granted, waiters served in order and in time (G3)
	ClassPromptness = "promptness" // a release hands the lock on within the lock's bound (G3)
	ClassClaims     = "claims"     // what the lock tells its holder: validity, loss notice (G4)
	ClassCalls      = "calls"      // calls return within their context; a closed client grants nothing (G5)
	ClassFootprint  = "footprint"  // what the lock leaves in Redis (G6)
)

// DefaultLock is the lock a mutant runs as when its file names none: the
// shipped mutex.
const DefaultLock = "fenced"

// Classes lists the classes, in the order the docs give them.
func Classes() []string {
	return []string{ClassSafety, ClassLiveness, ClassPromptness, ClassClaims, ClassCalls, ClassFootprint}
}

// Edit is one search text and its replacement.
type Edit struct {
	Search, Replace string
	// Line is the line of the mutant file where the edit begins.
	Line int
}

// Mutant is one defect of the catalogue.
type Mutant struct {
	// Name is the file's name without Ext: lowercase letters, digits and
	// dashes.
	Name string
	// File is the file it alters, relative to the module root, with
	// forward slashes.
	File string
	// Kind is KindLua or KindGo; Class one of Classes.
	Kind, Class string
	// What is the defect, in one line.
	What string
	// Equivalent, when set, says why no history can show the mutant:
	// it is run, but not counted in the score.
	Equivalent string
	// Locks are the registry's locks the verifiers run the mutant as
	// (header "locks:", comma-separated): the ones whose code it alters
	// (DefaultLock alone when the header is absent). A defect in the scripts
	// of the read-write lock shows in fenced-rw, not in fenced.
	Locks []string
	Edits []Edit
	// Source is the mutant file it was read from.
	Source string
}

// where is the mutant as errors name it.
func (m *Mutant) where() string { return fmt.Sprintf("mutant %s (%s)", m.Name, m.Source) }

var nameRE = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// Load reads every mutant file of dir (*.mutant), sorted by name. A file
// that is malformed is an error wrapping ErrCatalogue naming the file, its
// line and the field; so is a directory with none.
func Load(dir string) ([]*Mutant, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCatalogue, err)
	}
	var out []*Mutant
	var errs []error
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), Ext) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if !e.Type().IsRegular() {
			errs = append(errs, fmt.Errorf("%s: not a regular file (%w)", p, ErrCatalogue))
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: %w", ErrCatalogue, err))
			continue
		}
		m, err := Parse(p, b)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, m)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no %s files (%w)", dir, Ext, ErrCatalogue)
	}
	return out, nil
}

// Parse reads one mutant file (p names it in errors and gives the
// mutant's name).
func Parse(p string, b []byte) (*Mutant, error) {
	m := &Mutant{Name: strings.TrimSuffix(filepath.Base(p), Ext), Source: p}
	bad := func(line int, field, format string, a ...any) error {
		return fmt.Errorf("%s:%d: %s: %s (%w)", p, line, field, fmt.Sprintf(format, a...), ErrCatalogue)
	}
	if !nameRE.MatchString(m.Name) {
		return nil, bad(1, "name", "%q: a mutant's file name is its name, lowercase letters, digits and dashes", m.Name)
	}
	if m.Name == Reserved {
		return nil, bad(1, "name", "%q is the control's name (the unpatched lock): name the mutant after its defect", m.Name)
	}
	const (
		header = iota
		inSearch
		inReplace
		between
	)
	state := header
	seen := map[string]int{}
	var block []string
	var cur Edit
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSuffix(sc.Text(), "\r")
		switch state {
		case header, between:
			switch {
			case line == "--- search":
				state, block, cur = inSearch, nil, Edit{Line: n}
			case strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#"):
			case strings.HasPrefix(line, "--- "):
				return nil, bad(n, "edit", "%q: an edit begins with the line \"--- search\"", line)
			case state == between:
				return nil, bad(n, "edit", "%q: after \"--- end\" come only blank lines, comments and the next \"--- search\"", line)
			default:
				key, val, ok := strings.Cut(line, ":")
				key, val = strings.TrimSpace(key), strings.TrimSpace(val)
				if !ok || key == "" {
					return nil, bad(n, "header", "%q: want \"field: value\"", line)
				}
				if prev, dup := seen[key]; dup {
					return nil, bad(n, key, "given twice (first on line %d)", prev)
				}
				seen[key] = n
				switch key {
				case "file":
					m.File = val
				case "kind":
					m.Kind = val
				case "class":
					m.Class = val
				case "what":
					m.What = val
				case "locks":
					for _, l := range strings.Split(val, ",") {
						l = strings.TrimSpace(l)
						if !nameRE.MatchString(l) {
							return nil, bad(n, key, "%q: want comma-separated lock names of the registry (e.g. fenced,fenced-rw)", l)
						}
						if slices.Contains(m.Locks, l) {
							return nil, bad(n, key, "%q named twice", l)
						}
						m.Locks = append(m.Locks, l)
					}
				case "equivalent":
					m.Equivalent = val
					if val == "" {
						return nil, bad(n, key, "empty: say why no history can show the mutant")
					}
				default:
					return nil, bad(n, key, "unknown field (want file, kind, class, what, locks, equivalent)")
				}
			}
		case inSearch:
			if line == "--- replace" {
				cur.Search, block, state = strings.Join(block, "\n"), nil, inReplace
				continue
			}
			if line == "--- search" || line == "--- end" {
				return nil, bad(n, "edit", "%q inside the search text of the edit of line %d: want \"--- replace\" first", line, cur.Line)
			}
			block = append(block, line)
		case inReplace:
			if line == "--- end" {
				cur.Replace = strings.Join(block, "\n")
				m.Edits = append(m.Edits, cur)
				state = between
				continue
			}
			if line == "--- search" || line == "--- replace" {
				return nil, bad(n, "edit", "%q inside the replacement of the edit of line %d: want \"--- end\" first", line, cur.Line)
			}
			block = append(block, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, bad(n+1, "file", "%v", err)
	}
	if state == inSearch || state == inReplace {
		return nil, bad(n, "edit", "the edit of line %d has no \"--- end\"", cur.Line)
	}
	if m.Locks == nil {
		m.Locks = []string{DefaultLock}
	}
	for _, f := range []struct{ key, val string }{{"file", m.File}, {"kind", m.Kind}, {"class", m.Class}, {"what", m.What}} {
		if f.val == "" {
			return nil, bad(max(seen[f.key], 1), f.key, "missing or empty")
		}
	}
	if err := checkRel(m.File); err != nil {
		return nil, bad(seen["file"], "file", "%v", err)
	}
	if m.Kind != KindLua && m.Kind != KindGo {
		return nil, bad(seen["kind"], "kind", "%q: want %s or %s", m.Kind, KindLua, KindGo)
	}
	if !slices.Contains(Classes(), m.Class) {
		return nil, bad(seen["class"], "class", "%q: want one of %s", m.Class, strings.Join(Classes(), ", "))
	}
	if len(m.Edits) == 0 {
		return nil, bad(n, "edit", "no edit: a mutant has at least one \"--- search\" ... \"--- replace\" ... \"--- end\"")
	}
	for _, e := range m.Edits {
		switch {
		case strings.TrimSpace(e.Search) == "":
			return nil, bad(e.Line, "search", "empty search text")
		case e.Search == e.Replace:
			return nil, bad(e.Line, "replace", "the replacement is the search text: the edit changes nothing")
		}
	}
	return m, nil
}

// checkRel refuses a path that is not a clean relative path inside its
// tree (forward slashes, no "..", not absolute).
func checkRel(rel string) error {
	if rel == "" || strings.Contains(rel, `\`) || path.Clean(rel) != rel || !filepath.IsLocal(filepath.FromSlash(rel)) {
		return fmt.Errorf("%q: want a clean path relative to the module root, with forward slashes and no \"..\": %w", rel, ErrUnsafePath)
	}
	return nil
}

// Select returns the mutants whose names match one of patterns (comma
// separated names or path.Match globs; "" or "all": every one), in
// catalogue order. A pattern that matches none is an error wrapping
// ErrSelect naming it.
func Select(all []*Mutant, patterns string) ([]*Mutant, error) {
	patterns = strings.TrimSpace(patterns)
	if patterns == "" || patterns == "all" {
		return all, nil
	}
	pick := map[string]bool{}
	var errs []error
	for _, p := range strings.Split(patterns, ",") {
		p = strings.TrimSpace(p)
		if _, err := path.Match(p, ""); err != nil || p == "" {
			errs = append(errs, fmt.Errorf("%q is not a name or a glob (%w)", p, ErrSelect))
			continue
		}
		found := false
		for _, m := range all {
			if ok, _ := path.Match(p, m.Name); ok {
				pick[m.Name], found = true, true
			}
		}
		if !found {
			errs = append(errs, fmt.Errorf("%q matches none of the %d mutants: lockproof mutants --list lists them (%w)", p, len(all), ErrSelect))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var out []*Mutant
	for _, m := range all {
		if pick[m.Name] {
			out = append(out, m)
		}
	}
	return out, nil
}

// Apply returns src with the mutant's edits applied in order. An edit
// whose search text is not in the text exactly once is an error wrapping
// ErrRotten that names the mutant, its file and the edit's line.
func (m *Mutant) Apply(src []byte) ([]byte, error) {
	s := string(src)
	for _, e := range m.Edits {
		if n := strings.Count(s, e.Search); n != 1 {
			return nil, fmt.Errorf("%s:%d: mutant %s: %s: the search text occurs %d times, want exactly once: rewrite the mutant for the code as it is now (%w)",
				m.Source, e.Line, m.Name, m.File, n, ErrRotten)
		}
		s = strings.Replace(s, e.Search, e.Replace, 1)
	}
	return []byte(s), nil
}

// Applied is a mutant applied to a tree: Restore puts the file back.
type Applied struct {
	file     string
	original []byte
	mode     os.FileMode
}

// Restore writes the file back as it was.
func (a *Applied) Restore() error {
	if err := os.WriteFile(a.file, a.original, a.mode); err != nil {
		return fmt.Errorf("restore %s: %w", a.file, err)
	}
	return nil
}

// ApplyIn applies the mutant to its file in the tree root (a copy of the
// module), in place. The file must be a regular file reached through no
// symbolic link, so that the edit stays inside the tree.
func (m *Mutant) ApplyIn(root string) (*Applied, error) {
	p, err := FileIn(root, m.File)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.where(), err)
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.where(), err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.where(), err)
	}
	out, err := m.Apply(b)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(p, out, fi.Mode().Perm()); err != nil {
		return nil, fmt.Errorf("%s: %w", m.where(), err)
	}
	return &Applied{file: p, original: b, mode: fi.Mode().Perm()}, nil
}

// Check applies every mutant, in memory, to its file under root and
// returns the errors of those that do not apply (joined; nil when all
// do). It writes nothing.
func Check(root string, ms []*Mutant) error {
	var errs []error
	for _, m := range ms {
		p, err := FileIn(root, m.File)
		if err == nil {
			var b []byte
			if b, err = os.ReadFile(p); err == nil {
				_, err = m.Apply(b)
			}
		}
		if err != nil {
			if !errors.Is(err, ErrRotten) {
				err = fmt.Errorf("%s: %w", m.where(), err)
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// FileIn is rel (slash separated, relative) under root, refused unless it
// is a regular file reached through directories that are no symbolic
// links: a mutant must not write through a link out of the tree.
func FileIn(root, rel string) (string, error) {
	if err := checkRel(rel); err != nil {
		return "", err
	}
	p := root
	parts := strings.Split(rel, "/")
	for i, part := range parts {
		p = filepath.Join(p, part)
		fi, err := os.Lstat(p)
		if err != nil {
			return "", err
		}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			return "", fmt.Errorf("%s: a symbolic link: %w", p, ErrUnsafePath)
		case i < len(parts)-1 && !fi.IsDir():
			return "", fmt.Errorf("%s: not a directory", p)
		case i == len(parts)-1 && !fi.Mode().IsRegular():
			return "", fmt.Errorf("%s: not a regular file", p)
		}
	}
	return p, nil
}
