package chaos

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryFaultFileIsInTheCatalogue: each fault file (fault_<name>.go)
// declares the constructor of its Fault, and Catalogue calls it, so that
// a fault file left out of the catalogue fails here (a fault is its file,
// its row in contract's trait table and its call in Catalogue, which
// Go cannot find by itself without a registry the project forbids).
func TestEveryFaultFileIsInTheCatalogue(t *testing.T) {
	fset := token.NewFileSet()
	called := map[string]bool{}
	f, err := parser.ParseFile(fset, "faults.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == "Catalogue" {
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if c, ok := n.(*ast.CallExpr); ok {
					if id, ok := c.Fun.(*ast.Ident); ok {
						called[id.Name] = true
					}
				}
				return true
			})
		}
	}
	files, err := filepath.Glob("fault_*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		var ctors []string
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Type.Params.NumFields() != 0 || fn.Type.Results.NumFields() != 1 {
				continue
			}
			if id, ok := fn.Type.Results.List[0].Type.(*ast.Ident); ok && id.Name == "Fault" {
				ctors = append(ctors, fn.Name.Name)
			}
		}
		if len(ctors) == 0 {
			t.Errorf("%s declares no constructor of a Fault (func xFault() Fault)", path)
		}
		for _, c := range ctors {
			if !called[c] {
				t.Errorf("%s: %s is not in Catalogue (chaos/faults.go)", path, c)
			}
		}
	}
}
