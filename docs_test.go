package retryhttp

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// tables returns the markdown tables of a page, each as its lines.
func tables(page string) []string {
	var out []string
	var cur []string
	for line := range strings.Lines(page) {
		if strings.HasPrefix(line, "|") {
			cur = append(cur, line)
			continue
		}
		if cur != nil {
			out = append(out, strings.Join(cur, ""))
			cur = nil
		}
	}
	if cur != nil {
		out = append(out, strings.Join(cur, ""))
	}
	return out
}

// The storm tables that docs/overload.md shows are those a run wrote to
// bench/results/storm.md, not copies that drift from it.
func TestOverloadTablesAreTheStormRunsTables(t *testing.T) {
	doc, err := os.ReadFile("docs/overload.md")
	if err != nil {
		t.Fatal(err)
	}
	run, err := os.ReadFile("bench/results/storm.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, tab := range tables(string(doc)) {
		if !strings.HasPrefix(tab, "| contender |") {
			continue
		}
		n++
		if !strings.Contains(string(run), tab) {
			t.Errorf("docs/overload.md shows a storm table that bench/results/storm.md does not have:\n%s", tab)
		}
	}
	if n == 0 {
		t.Error("docs/overload.md shows no storm table")
	}
}

// The package doc's "Why a retry is not made" names every GiveUpReason.
func TestWhyARetryIsNotMadeNamesEveryReason(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(src)
	start := strings.Index(doc, "// # Why a retry is not made")
	end := strings.Index(doc[start+1:], "// # ")
	if start < 0 || end < 0 {
		t.Fatal(`doc.go has no section "Why a retry is not made"`)
	}
	section := strings.Join(strings.Fields(strings.ReplaceAll(doc[start:start+1+end], "//", "")), " ")
	for _, r := range giveUpReasons {
		if !regexp.MustCompile(`\b` + string(r) + `\b`).MatchString(section) {
			t.Errorf("the package doc's \"Why a retry is not made\" does not name %s", r)
		}
	}
}
