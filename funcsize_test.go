package retryhttp

import (
	"testing"

	"github.com/retryhttp/retryhttp/internal/codesize"
)

// tableFuncs are the functions allowed to be long because they are a table,
// one entry a line, with nothing to decide (a cyclomatic complexity of 1).
var tableFuncs = map[string]bool{"NewMetrics": true}

// No function of the package runs over 40 lines or a cyclomatic
// complexity of 12 (1, plus one per if, for, case and && or ||), but a
// table, and no file over 450 lines: each says one thing, each holds one
// responsibility. internal/admission holds its own to the same.
func TestFunctionsAreSmall(t *testing.T) {
	fs, err := codesize.Funcs(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		table := tableFuncs[f.Name] && f.Cyclomatic == 1
		if (f.Lines > 40 || f.Cyclomatic > 12) && !table {
			t.Errorf("%s: %s has %d lines and a cyclomatic complexity of %d; at most 40 and 12", f.File, f.Name, f.Lines, f.Cyclomatic)
		}
	}
	if len(fs) < 200 {
		t.Fatalf("found %d functions; the parser missed some", len(fs))
	}
	lines, err := codesize.Lines(".")
	if err != nil {
		t.Fatal(err)
	}
	for name, n := range lines {
		if n > 450 {
			t.Errorf("%s has %d lines; at most 450", name, n)
		}
	}
}
