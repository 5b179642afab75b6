package retryhttp

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"testing"
)

// admissionFiles are admission's: the loop, its controllers, the health
// they read, the host map and the clock.
var admissionFiles = []string{"admission.go", "pacing.go", "budget.go", "breaker.go", "throttle.go",
	"staticrate.go", "quota.go", "limit.go", "health.go", "hostmap.go", "clock.go"}

// controllerFiles hold admission's controllers, and the health they
// read: none of them reads the clock or runs a timer; the time is in
// what they are asked and told.
var controllerFiles = []string{"budget.go", "breaker.go", "throttle.go", "staticrate.go", "quota.go", "limit.go", "health.go"}

// No function of admission runs over 40 lines or a cyclomatic complexity
// of 12 (1, plus one per if, for, case and && or ||): each says one thing.
func TestAdmissionFunctionsAreSmall(t *testing.T) {
	fset := token.NewFileSet()
	seen := 0
	for _, name := range admissionFiles {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			seen++
			lines := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			if c := cyclomatic(fd.Body); lines > 40 || c > 12 {
				t.Errorf("%s: %s has %d lines and a cyclomatic complexity of %d; at most 40 and 12", name, fd.Name.Name, lines, c)
			}
		}
	}
	if seen < 100 {
		t.Fatalf("found %d functions in admission's files; the parser missed some", seen)
	}
}

// cyclomatic is body's cyclomatic complexity, as gocyclo counts it.
func cyclomatic(body *ast.BlockStmt) int {
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

// clockRead matches a read of the clock, or a timer.
var clockRead = regexp.MustCompile(`time\.(Now|Since|Until|NewTimer|After|AfterFunc|Sleep|Tick|NewTicker)\(|\bmono\(\)|\bunixSecond\(\)`)

func TestControllersDoNotReadTheClock(t *testing.T) {
	for _, name := range controllerFiles {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range clockRead.FindAll(src, -1) {
			t.Errorf("%s reads the clock (%s): admission gives a controller the time in what it is asked and told", name, m)
		}
	}
}

// The header of admission.go names the file of every controller in its
// list, in the list's order.
func TestAdmissionHeaderNamesEveryController(t *testing.T) {
	src, err := os.ReadFile("admission.go")
	if err != nil {
		t.Fatal(err)
	}
	header := string(src[:regexp.MustCompile(`\npackage `).FindIndex(src)[0]])
	at := 0
	for _, name := range []string{"budget.go", "breaker.go", "throttle.go", "staticrate.go", "quota.go", "limit.go"} {
		i := regexp.MustCompile(regexp.QuoteMeta(name)).FindStringIndex(header[at:])
		if i == nil {
			t.Errorf("admission.go's header does not name %s after the controllers before it", name)
			continue
		}
		at += i[1]
	}
	if len(controllers) != 6 {
		t.Errorf("admission has %d controllers; the header names 6", len(controllers))
	}
}
