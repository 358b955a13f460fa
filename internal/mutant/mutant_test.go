package mutant_test

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	luaparse "github.com/yuin/gopher-lua/parse"

	"github.com/lockproof/lockproof/internal/mutant"
	"github.com/lockproof/lockproof/internal/testlong"
)

// root is the module root, where the catalogue's files live.
const root = "../.."

func catalogue(t *testing.T) []*mutant.Mutant {
	t.Helper()
	ms, err := mutant.Load(filepath.Join(root, "mutants"))
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// TestCatalogueApplies: the catalogue holds at least 40 mutants of lock/
// and fencing/, of both kinds and every class, and each applies to the
// source as it is now (its search texts found exactly once: a mutant the
// code moved away from fails here, named with its file), changes what its
// kind says (a Lua script, or Go code and no script), and leaves a file
// that still parses: Go by go/parser, and every Lua script the file
// makes (its string constants and the arguments of NewScript, with the
// constants they are made of) by gopher-lua's parser. Type errors are
// TestMutantsCompile's (nightly).
func TestCatalogueApplies(t *testing.T) {
	ms := catalogue(t)
	if len(ms) < 40 {
		t.Errorf("%d mutants, want at least 40", len(ms))
	}
	kinds, classes := map[string]int{}, map[string]int{}
	for _, m := range ms {
		kinds[m.Kind]++
		classes[m.Class]++
		if !strings.HasPrefix(m.File, "lock/") && !strings.HasPrefix(m.File, "fencing/") {
			t.Errorf("%s: alters %s: the catalogue is of lock/ and fencing/", m.Name, m.File)
		}
	}
	for _, k := range []string{mutant.KindLua, mutant.KindGo} {
		if kinds[k] == 0 {
			t.Errorf("no mutant of kind %s", k)
		}
	}
	for _, c := range []string{mutant.ClassSafety, mutant.ClassLiveness, mutant.ClassPromptness, mutant.ClassClaims, mutant.ClassFootprint} {
		if classes[c] == 0 {
			t.Errorf("no mutant of class %s", c)
		}
	}
	if err := mutant.Check(root, ms); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		orig, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(m.File)))
		if err != nil {
			t.Fatal(err)
		}
		mut, err := m.Apply(orig)
		if err != nil {
			t.Fatal(err)
		}
		shared, err := packageConsts(filepath.Dir(filepath.Join(root, filepath.FromSlash(m.File))), filepath.Base(m.File))
		if err != nil {
			t.Fatal(err)
		}
		before, err := scripts(m.File, orig, shared)
		if err != nil {
			t.Fatalf("%s: the source itself: %v", m.File, err)
		}
		after, err := scripts(m.File, mut, shared)
		if err != nil {
			t.Errorf("%s (%s): the mutated file does not parse: %v", m.Name, m.Source, err)
			continue
		}
		changed := false
		for name, src := range after {
			if before[name] != src {
				changed = true
			}
			if luaErr(before[name]) == nil {
				if err := luaErr(src); err != nil {
					t.Errorf("%s (%s): Lua script %s does not parse: %v", m.Name, m.Source, name, err)
				}
			}
		}
		switch {
		case m.Kind == mutant.KindLua && !changed:
			t.Errorf("%s (%s): kind lua, and no Lua script of %s changes", m.Name, m.Source, m.File)
		case m.Kind == mutant.KindGo && changed:
			t.Errorf("%s (%s): kind go, and a Lua script of %s changes", m.Name, m.Source, m.File)
		}
	}
}

// luaErr is the error of gopher-lua's parser on src.
func luaErr(src string) error {
	_, err := luaparse.Parse(strings.NewReader(src), "script")
	return err
}

// packageConsts are the constants of the package's other files in dir
// (but skip, and tests): a script of one file is often built from Lua
// helpers of another (lock/shared_scripts.go from lock/scripts.go's).
func packageConsts(dir, skip string) (map[string]ast.Expr, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]ast.Expr{}
	for _, e := range ents {
		n := e.Name()
		if n == skip || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, n), nil, 0)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
				for _, s := range g.Specs {
					vs := s.(*ast.ValueSpec)
					for i, id := range vs.Names {
						if i < len(vs.Values) {
							out[id.Name] = vs.Values[i]
						}
					}
				}
			}
		}
	}
	return out, nil
}

// scripts parses a Go file and returns the strings it makes at the top
// level from string literals: each constant's, and each argument of a
// call in a variable's value (rediscmd.NewScript's), by name; shared are
// constants of the package's other files it may build them from.
func scripts(name string, src []byte, shared map[string]ast.Expr) (map[string]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), name, src, 0)
	if err != nil {
		return nil, err
	}
	consts := maps.Clone(shared)
	vars := map[string]ast.Expr{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || (g.Tok != token.CONST && g.Tok != token.VAR) {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if i >= len(vs.Values) {
					continue
				}
				if g.Tok == token.CONST {
					consts[n.Name] = vs.Values[i]
				} else if call, ok := vs.Values[i].(*ast.CallExpr); ok && len(call.Args) == 1 {
					vars[n.Name] = call.Args[0]
				}
			}
		}
	}
	var eval func(ast.Expr) (string, bool)
	eval = func(e ast.Expr) (string, bool) {
		switch e := e.(type) {
		case *ast.BasicLit:
			if e.Kind != token.STRING {
				return "", false
			}
			s, err := strconv.Unquote(e.Value)
			return s, err == nil
		case *ast.Ident:
			if c, ok := consts[e.Name]; ok {
				return eval(c)
			}
		case *ast.BinaryExpr:
			if e.Op == token.ADD {
				a, ok1 := eval(e.X)
				b, ok2 := eval(e.Y)
				return a + b, ok1 && ok2
			}
		case *ast.ParenExpr:
			return eval(e.X)
		}
		return "", false
	}
	out := map[string]string{}
	for _, m := range []map[string]ast.Expr{consts, vars} {
		for n, e := range m {
			if s, ok := eval(e); ok {
				out[n] = s
			}
		}
	}
	return out, nil
}

// TestParseRefusesBadFiles: a malformed mutant file is refused with its
// file, line and field named.
func TestParseRefusesBadFiles(t *testing.T) {
	good := "file: lock/scripts.go\nkind: lua\nclass: safety\nwhat: x\n--- search\na\n--- replace\nb\n--- end\n"
	for _, c := range []struct {
		name, file, body, want string
	}{
		{"no file", "m.mutant", strings.Replace(good, "file: lock/scripts.go\n", "", 1), "m.mutant:1: file: "},
		{"escapes", "m.mutant", strings.Replace(good, "lock/scripts.go", "../etc/passwd", 1), "m.mutant:1: file: "},
		{"absolute", "m.mutant", strings.Replace(good, "lock/scripts.go", "/etc/passwd", 1), "m.mutant:1: file: "},
		{"kind", "m.mutant", strings.Replace(good, "kind: lua", "kind: rust", 1), "m.mutant:2: kind: "},
		{"class", "m.mutant", strings.Replace(good, "class: safety", "class: speed", 1), "m.mutant:3: class: "},
		{"twice", "m.mutant", strings.Replace(good, "what: x\n", "what: x\nwhat: y\n", 1), "m.mutant:5: what: given twice"},
		{"unknown", "m.mutant", "owner: me\n" + good, "m.mutant:1: owner: unknown field"},
		{"no end", "m.mutant", strings.TrimSuffix(good, "--- end\n"), "m.mutant:8: edit: the edit of line 5 has no"},
		{"no edit", "m.mutant", "file: lock/scripts.go\nkind: lua\nclass: safety\nwhat: x\n", "m.mutant:4: edit: no edit"},
		{"same", "m.mutant", strings.Replace(good, "\nb\n", "\na\n", 1), "m.mutant:5: replace: "},
		{"empty search", "m.mutant", strings.Replace(good, "--- search\na\n", "--- search\n", 1), "m.mutant:5: search: empty"},
		{"text after end", "m.mutant", good + "stray\n", "m.mutant:10: edit: "},
		{"name", "Bad_Name.mutant", good, "Bad_Name.mutant:1: name: "},
		{"reserved", "control.mutant", good, "control.mutant:1: name: "},
		{"bad lock", "m.mutant", strings.Replace(good, "what: x\n", "what: x\nlocks: fenced, Fenced_RW\n", 1), "m.mutant:5: locks: \"Fenced_RW\""},
		{"lock twice", "m.mutant", strings.Replace(good, "what: x\n", "what: x\nlocks: fenced-rw,fenced-rw\n", 1), "m.mutant:5: locks: \"fenced-rw\" named twice"},
		{"empty equivalent", "m.mutant", strings.Replace(good, "what: x\n", "what: x\nequivalent:\n", 1), "m.mutant:5: equivalent: empty"},
	} {
		_, err := mutant.Parse(c.file, []byte(c.body))
		if err == nil || !errors.Is(err, mutant.ErrCatalogue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an ErrCatalogue naming %q", c.name, err, c.want)
		}
	}
	m, err := mutant.Parse("dir/ok-1.mutant", []byte("# a comment\n"+good+"\n# next\n--- search\n\tx\n\n--- replace\n--- end\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m.Locks, []string{mutant.DefaultLock}) {
		t.Errorf("a mutant that names no lock runs as %v, want [%s]", m.Locks, mutant.DefaultLock)
	}
	m2, err := mutant.Parse("dir/ok-2.mutant", []byte(strings.Replace(good, "what: x\n", "what: x\nlocks: fenced-rw, fenced-sem\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m2.Locks, []string{"fenced-rw", "fenced-sem"}) {
		t.Errorf("locks: fenced-rw, fenced-sem parsed as %v", m2.Locks)
	}
	if m.Name != "ok-1" || len(m.Edits) != 2 || m.Edits[0].Search != "a" || m.Edits[1].Search != "\tx\n" || m.Edits[1].Replace != "" || m.Edits[1].Line != 13 {
		t.Errorf("parsed %+v", m)
	}
}

// TestApplyRefusesRot: a search text found twice or not at all is
// refused, naming the mutant's file, its edit's line and the file it
// alters; nothing is written.
func TestApplyRefusesRot(t *testing.T) {
	m, err := mutant.Parse("cat/rot.mutant", []byte("file: lock/x.go\nkind: go\nclass: safety\nwhat: x\n--- search\nfoo\n--- replace\nbar\n--- end\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{"nothing here", "foo foo"} {
		_, err := m.Apply([]byte(src))
		if !errors.Is(err, mutant.ErrRotten) || !strings.Contains(err.Error(), "cat/rot.mutant:5") || !strings.Contains(err.Error(), "lock/x.go") {
			t.Errorf("%q: %v; want ErrRotten naming cat/rot.mutant:5 and lock/x.go", src, err)
		}
	}
	tree := t.TempDir()
	if err := os.MkdirAll(filepath.Join(tree, "lock"), 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(tree, "lock", "x.go")
	if err := os.WriteFile(file, []byte("foo foo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := mutant.Check(tree, []*mutant.Mutant{m}); !errors.Is(err, mutant.ErrRotten) {
		t.Errorf("Check: %v, want ErrRotten", err)
	}
	if _, err := m.ApplyIn(tree); !errors.Is(err, mutant.ErrRotten) {
		t.Errorf("ApplyIn: %v, want ErrRotten", err)
	}
	if b, _ := os.ReadFile(file); string(b) != "foo foo" {
		t.Errorf("a refused mutant changed the file: %q", b)
	}
	if err := os.WriteFile(file, []byte("a foo b"), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := m.ApplyIn(tree)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(file); string(b) != "a bar b" {
		t.Errorf("applied: %q", b)
	}
	if err := a.Restore(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(file); string(b) != "a foo b" {
		t.Errorf("restored: %q", b)
	}
}

// TestApplyStaysInTheTree: a mutant never writes through a symbolic link
// out of the tree it is applied to.
func TestApplyStaysInTheTree(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "x.go"), []byte("foo"), 0o644); err != nil {
		t.Fatal(err)
	}
	tree := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(tree, "lock")); err != nil {
		t.Skipf("no symbolic links here: %v", err)
	}
	m, err := mutant.Parse("link.mutant", []byte("file: lock/x.go\nkind: go\nclass: safety\nwhat: x\n--- search\nfoo\n--- replace\nbar\n--- end\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.ApplyIn(tree); !errors.Is(err, mutant.ErrUnsafePath) {
		t.Errorf("through a link: %v, want ErrUnsafePath", err)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "x.go")); string(b) != "foo" {
		t.Errorf("the file outside the tree was changed: %q", b)
	}
}

// TestSelect: names and globs pick mutants in catalogue order; a pattern
// that matches none is named.
func TestSelect(t *testing.T) {
	ms := catalogue(t)
	got, err := mutant.Select(ms, "fencing-*, end-no-owner-check")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range got {
		names = append(names, m.Name)
	}
	if !slices.Contains(names, "end-no-owner-check") || !slices.IsSorted(names) || len(names) < 3 {
		t.Errorf("selected %v", names)
	}
	for _, n := range names {
		if ok, _ := path.Match("fencing-*", n); !ok && n != "end-no-owner-check" {
			t.Errorf("selected %s", n)
		}
	}
	if _, err := mutant.Select(ms, "end-*,nosuch"); !errors.Is(err, mutant.ErrSelect) || !strings.Contains(err.Error(), `"nosuch"`) {
		t.Errorf("unknown name: %v", err)
	}
	if _, err := mutant.Select(ms, "[x"); !errors.Is(err, mutant.ErrSelect) {
		t.Errorf("bad glob: %v", err)
	}
	if all, _ := mutant.Select(ms, "all"); len(all) != len(ms) {
		t.Errorf("all: %d of %d", len(all), len(ms))
	}
}

// TestCopyTree: the copy holds the tree's regular files, and leaves out
// .git, run directories, the paths to skip and symbolic links.
func TestCopyTree(t *testing.T) {
	src := t.TempDir()
	write := func(rel, body string) {
		p := filepath.Join(src, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/x\n")
	write("lock/a.go", "package lock\n")
	write(".git/config", "x")
	write("runs/old/"+mutant.RunMarker, "{}")
	write("runs/old/summary.json", "{}")
	write("out/mutants.json", "{}")
	if err := os.Symlink(os.TempDir(), filepath.Join(src, "link")); err != nil {
		t.Logf("no symbolic link: %v", err)
	}
	dst := t.TempDir()
	if err := mutant.CopyTree(t.Context(), src, dst, filepath.Join(src, "out")); err != nil {
		t.Fatal(err)
	}
	for rel, want := range map[string]bool{"go.mod": true, "lock/a.go": true, ".git/config": false, "runs/old/summary.json": false,
		"out/mutants.json": false, "link": false} {
		_, err := os.Lstat(filepath.Join(dst, filepath.FromSlash(rel)))
		if (err == nil) != want {
			t.Errorf("%s in the copy: %v, want %v", rel, err == nil, want)
		}
	}
	if got := mutant.ModuleRoot(filepath.Join(src, "lock"), "example.com/x"); got != src {
		t.Errorf("ModuleRoot = %q, want %q", got, src)
	}
	if got := mutant.ModuleRoot(src, "example.com/other"); got != "" {
		t.Errorf("ModuleRoot of another module = %q", got)
	}
}

// TestMutantsCompile applies every mutant to a copy of the module and
// compiles the package it alters. At about 9s a mutant on 2 cores (the
// lock's package and its dependents' export data), it runs at the nightly
// breadth only (LOCKPROOF_LONG=1); TestCatalogueApplies checks every
// search text and the syntax in every run.
func TestMutantsCompile(t *testing.T) {
	if !testlong.On() {
		t.Skipf("compiles every mutant (minutes): %s=1", testlong.EnvVar)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	ms := catalogue(t)
	dst := t.TempDir()
	if err := mutant.CopyTree(t.Context(), root, dst); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		a, err := m.ApplyIn(dst)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(t.Context(), goBin, "build", "-buildvcs=false", "./"+path.Dir(m.File))
		cmd.Dir = dst
		cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(dst, "go.work"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s (%s) does not compile: %v\n%s", m.Name, m.Source, err, out)
		}
		if err := a.Restore(); err != nil {
			t.Fatal(err)
		}
	}
}
