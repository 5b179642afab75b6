package admission

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"testing"
)

// Every reason admission gives is one of the Transport's GiveUpReasons,
// spelt the same: the one the metrics count and the logs name. The root
// package's errors.go declares them; admission cannot import it.
func TestReasonsAreGiveUpReasons(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "../../errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var public []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			if id, ok := v.Type.(*ast.Ident); !ok || id.Name != "GiveUpReason" || len(v.Values) != 1 {
				continue
			}
			if lit, ok := v.Values[0].(*ast.BasicLit); ok {
				s, _ := strconv.Unquote(lit.Value)
				public = append(public, s)
			}
		}
	}
	if len(public) < 10 {
		t.Fatalf("found %d GiveUpReasons in errors.go (%q); the parse missed them", len(public), public)
	}
	for _, r := range []string{reasonMaxElapsed, reasonBudget, reasonBreaker, reasonCircuitOpen, reasonThrottled, reasonRate, reasonQuota, reasonLimit, reasonDeadline} {
		if !slices.Contains(public, r) {
			t.Errorf("admission's reason %q is no GiveUpReason (errors.go has %q)", r, public)
		}
	}
}
