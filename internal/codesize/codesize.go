// Package codesize measures the functions of a package's source, for the
// tests that hold them small: its lines and its cyclomatic complexity, as
// gocyclo counts it. Only tests import it.
package codesize

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
)

// A Func is one function or method declared in a file.
type Func struct {
	File       string
	Name       string // with its receiver's type: "(*Gate).Hold"
	Lines      int
	Cyclomatic int
	Params     int // its parameters, the receiver not counted
}

// Funcs are the functions declared in dir's non-test Go files.
func Funcs(dir string) ([]Func, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var out []Func
	fset := token.NewFileSet()
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				lines := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
				out = append(out, Func{filepath.Base(name), funcName(fd), lines, Cyclomatic(fd.Body), params(fd.Type)})
			}
		}
	}
	return out, nil
}

// params counts a function's parameters: a, b int is two.
func params(ft *ast.FuncType) int {
	n := 0
	for _, f := range ft.Params.List {
		n += max(len(f.Names), 1)
	}
	return n
}

func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	star := ""
	if s, ok := t.(*ast.StarExpr); ok {
		t, star = s.X, "*"
	}
	if ix, ok := t.(*ast.IndexExpr); ok {
		t = ix.X
	}
	if ix, ok := t.(*ast.IndexListExpr); ok {
		t = ix.X
	}
	id, _ := t.(*ast.Ident)
	if id == nil {
		return fd.Name.Name
	}
	return "(" + star + id.Name + ")." + fd.Name.Name
}

// Cyclomatic is body's cyclomatic complexity: 1, plus one per if, for,
// range, case and comm clause (but default), && and ||.
func Cyclomatic(body *ast.BlockStmt) int {
	c := 1
	ast.Inspect(body, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt:
			c++
		case *ast.CaseClause:
			if x.List != nil {
				c++
			}
		case *ast.CommClause:
			if x.Comm != nil {
				c++
			}
		case *ast.BinaryExpr:
			if x.Op == token.LAND || x.Op == token.LOR {
				c++
			}
		}
		return true
	})
	return c
}

// Lines are the lines of dir's non-test Go files, by file.
func Lines(dir string) (map[string]int, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		out[filepath.Base(name)] = strings.Count(string(src), "\n")
	}
	return out, nil
}
