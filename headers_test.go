package retryhttp

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Each file's header comment says what the file holds and where the rest
// is. It stays true as code moves: every file it names exists, and every
// name of the package's code it mentions (a camel-case identifier:
// WithBudget, scheduleLength; not Transport, which is also a word) is
// declared in the file itself or in a file the header names. So for the
// internal packages, each in its own directory.
func TestFileHeadersNameTheirOwnCode(t *testing.T) {
	n := 0
	for _, dir := range packageDirs {
		n += checkHeaders(t, dir)
	}
	if n < 40 {
		t.Fatalf("found %d file headers; the parser missed some", n)
	}
}

// checkHeaders checks the file headers of the package in dir, and returns
// how many it found.
func checkHeaders(t *testing.T, dir string) int {
	declared := map[string][]string{} // name: the files that declare it
	headers := map[string]string{}
	for name, f := range sourceFilesIn(t, dir) {
		for _, cg := range f.Comments {
			if cg.Pos() < f.Package && name != "doc.go" {
				headers[name] += cg.Text()
			}
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil { // a method is named with its type
					declared[d.Name.Name] = append(declared[d.Name.Name], name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						declared[s.Name.Name] = append(declared[s.Name.Name], name)
					case *ast.ValueSpec:
						for _, n := range s.Names {
							declared[n.Name] = append(declared[n.Name], name)
						}
					}
				}
			}
		}
	}
	fileRef := regexp.MustCompile(`\b[a-z0-9_]+\.go\b`)
	ident := regexp.MustCompile(`\b[A-Za-z_][A-Za-z0-9_]*\b`)
	for name, h := range headers {
		named := []string{name}
		for _, ref := range fileRef.FindAllString(h, -1) {
			if _, err := os.Stat(filepath.Join(dir, ref)); err != nil {
				t.Errorf("%s/%s: its header names %s, which does not exist", dir, name, ref)
			}
			named = append(named, ref)
		}
		for _, id := range ident.FindAllString(h, -1) {
			in, ok := declared[id]
			if !ok || !camelCase.MatchString(id) {
				continue
			}
			if !slices.ContainsFunc(in, func(f string) bool { return slices.Contains(named, f) }) {
				t.Errorf("%s/%s: its header names %s, which is in %v: name that file too, or move the words", dir, name, id, in)
			}
		}
	}
	return len(headers)
}

// A field's doc says what it holds in at most 80 words, in every package.
func TestFieldDocsAreShort(t *testing.T) {
	for _, dir := range packageDirs {
		for name, f := range sourceFilesIn(t, dir) {
			ast.Inspect(f, func(n ast.Node) bool {
				st, ok := n.(*ast.StructType)
				if !ok {
					return true
				}
				for _, fld := range st.Fields.List {
					words := len(strings.Fields(fld.Doc.Text())) + len(strings.Fields(fld.Comment.Text()))
					if words > 80 {
						t.Errorf("%s/%s: the doc of field %v has %d words; at most 80", dir, name, fieldName(fld), words)
					}
				}
				return true
			})
		}
	}
}

func fieldName(f *ast.Field) string {
	if len(f.Names) > 0 {
		return f.Names[0].Name
	}
	return "(embedded)"
}

// camelCase matches a name of code, not an English word.
var camelCase = regexp.MustCompile(`[a-z][A-Z]`)

// Each With option's doc says what it does in at most 80 words; the rest
// is in docs/, where a user reads on.
func TestOptionDocsAreShort(t *testing.T) {
	seen := 0
	for _, f := range sourceFiles(t) {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || !strings.HasPrefix(fd.Name.Name, "With") || fd.Doc == nil {
				continue
			}
			seen++
			if n := len(strings.Fields(fd.Doc.Text())); n > 80 {
				t.Errorf("%s's doc has %d words; at most 80, the rest in docs/", fd.Name.Name, n)
			}
		}
	}
	if seen < 20 {
		t.Fatalf("found %d With functions with a doc; the parser missed some", seen)
	}
}

// sourceFiles are the package's non-test files, parsed with their
// comments, by name.
func sourceFiles(t *testing.T) map[string]*ast.File { return sourceFilesIn(t, ".") }

// sourceFilesIn are the non-test files of the package in dir, parsed with
// their comments, by name.
func sourceFilesIn(t *testing.T, dir string) map[string]*ast.File {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(name)] = f
	}
	return files
}
