package retryhttp

import (
	"path/filepath"
	"testing"

	"github.com/retryhttp/retryhttp/internal/codesize"
)

// packageDirs are the library's packages: the root and its internal ones.
var packageDirs = []string{".", "internal/admission", "internal/ratelimit", "internal/recent", "internal/replay", "internal/rotation", "internal/strictjson", "internal/vendors", "internal/codesize"}

// tableFuncs are the functions allowed to be long because they are a table,
// one entry a line, with nothing to decide (a cyclomatic complexity of 1).
var tableFuncs = map[string]bool{"NewMetrics": true}

// No function of the package runs over 60 lines, a cyclomatic complexity
// of 15 (1, plus one per if, for, case and && or ||) or 5 parameters, but
// a table, and no file over 450 lines: each tells one story, each holds
// one responsibility; so do the internal packages'.
func TestFunctionsAreSmall(t *testing.T) {
	var fs []codesize.Func
	lines := map[string]int{}
	for _, dir := range packageDirs {
		in, err := codesize.Funcs(dir)
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, in...)
		ls, err := codesize.Lines(dir)
		if err != nil {
			t.Fatal(err)
		}
		for name, n := range ls {
			lines[dir+"/"+name] = n
		}
	}
	for _, f := range fs {
		table := tableFuncs[f.Name] && f.Cyclomatic == 1
		if (f.Lines > 60 || f.Cyclomatic > 15) && !table {
			t.Errorf("%s: %s has %d lines and a cyclomatic complexity of %d; at most 60 and 15", f.File, f.Name, f.Lines, f.Cyclomatic)
		}
		if f.Params > 5 {
			t.Errorf("%s: %s takes %d parameters; at most 5: pass a value that holds them", f.File, f.Name, f.Params)
		}
	}
	if dirs, _ := filepath.Glob("internal/*"); len(dirs)+1 != len(packageDirs) {
		t.Errorf("packageDirs lists %d packages; there are %d: add the new one", len(packageDirs), len(dirs)+1)
	}
	if len(fs) < 200 {
		t.Fatalf("found %d functions; the parser missed some", len(fs))
	}
	for name, n := range lines {
		if n > 450 {
			t.Errorf("%s has %d lines; at most 450", name, n)
		}
	}
}
