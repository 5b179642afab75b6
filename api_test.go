package retryhttp

import (
	"fmt"
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
	if len(names) < 60 {
		t.Fatalf("found %d exported names; the parser missed some", len(names))
	}
	for _, n := range names {
		if !strings.Contains(string(page), "`"+n+"`") {
			t.Errorf("docs/api.md does not list %s", n)
		}
	}
}

// exportedFields are the exported fields of the package's exported struct
// types, as Type.Field.
func exportedFields(t *testing.T) []string {
	var fields []string
	for _, d := range packageDecls(t) {
		g, ok := d.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, s := range g.Specs {
			ts, ok := s.(*ast.TypeSpec)
			if !ok || !ts.Name.IsExported() {
				continue
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				continue
			}
			for _, f := range st.Fields.List {
				for _, n := range f.Names {
					if n.IsExported() {
						fields = append(fields, ts.Name.Name+"."+n.Name)
					}
				}
			}
		}
	}
	return fields
}

// The API stays small: at most 105 exported names and 70 exported fields,
// and docs/api.md says how many there are.
func TestAPISize(t *testing.T) {
	names, fields := len(exportedNames(t)), len(exportedFields(t))
	if names > 105 || fields > 70 {
		t.Errorf("%d exported names and %d exported fields; the bound is 105 and 70", names, fields)
	}
	page, err := os.ReadFile("docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(page)), " ")
	if want := fmt.Sprintf("There are %d exported names and %d exported fields", names, fields); !strings.Contains(text, want) {
		t.Errorf("docs/api.md does not say %q", want)
	}
}
