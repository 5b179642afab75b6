package retryhttp

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// packageDecls returns the top-level declarations of the package's
// non-test files.
func packageDecls(t *testing.T) []ast.Decl {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var decls []ast.Decl
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		decls = append(decls, f.Decls...)
	}
	return decls
}

// exportedNames are the package's exported names, methods as Type.Method.
func exportedNames(t *testing.T) []string {
	var names []string
	for _, d := range packageDecls(t) {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			if d.Recv == nil {
				names = append(names, d.Name.Name)
				continue
			}
			typ := d.Recv.List[0].Type
			if s, ok := typ.(*ast.StarExpr); ok {
				typ = s.X
			}
			if id, ok := typ.(*ast.Ident); ok && id.IsExported() {
				names = append(names, id.Name+"."+d.Name.Name)
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						names = append(names, s.Name.Name)
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() {
							names = append(names, n.Name)
						}
					}
				}
			}
		}
	}
	return names
}

// docs/api.md reviews every exported name: one that it does not list was
// added without saying why it exists beside the others.
func TestAPIPageNamesEveryExport(t *testing.T) {
	page, err := os.ReadFile("docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	names := exportedNames(t)
	if len(names) < 100 {
		t.Fatalf("found %d exported names; the parser missed some", len(names))
	}
	for _, n := range names {
		if !strings.Contains(string(page), "`"+n+"`") {
			t.Errorf("docs/api.md does not list %s", n)
		}
	}
}
