package retryhttp_test

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The recipes of the README and of docs/ are what the examples run: every
// code block that follows a line "<!-- from PATH -->" must appear in the
// file at PATH, its lines in order (each compared without leading and
// trailing blanks), so that a change to an example that is not made to the
// docs, or the other way round, fails here. A block is whole: its
// brackets close, so that no snippet stops in the middle of a call.
func TestReadmeRecipesAreTheExamplesCode(t *testing.T) {
	quoted := quotedBlocks(t, "README.md")
	if !slices.Contains(quoted, "examples/plain/main.go") || !slices.ContainsFunc(quoted, func(p string) bool {
		return strings.HasPrefix(p, "examples/sdk/")
	}) {
		t.Errorf("README quotes %q, want the plain example and an SDK's", quoted)
	}
	pages, _ := filepath.Glob("docs/*.md")
	for _, p := range pages {
		quotedBlocks(t, p)
	}
}

// The README stays a page a newcomer reads in five minutes; the reference
// is in docs/. Words are counted as wc -w counts them.
func TestReadmeIsShort(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(strings.Fields(string(readme))); n > 1200 {
		t.Errorf("README.md has %d words, want at most 1,200: move reference to docs/", n)
	}
}

// quotedBlocks checks the quoted blocks of one page and returns the paths
// they quote.
func quotedBlocks(t *testing.T, page string) []string {
	t.Helper()
	readme, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var quoted []string
	sc := bufio.NewScanner(strings.NewReader(string(readme)))
	for sc.Scan() {
		line := sc.Text()
		path, ok := strings.CutPrefix(line, "<!-- from ")
		if !ok {
			continue
		}
		path = strings.TrimSuffix(path, " -->")
		if !sc.Scan() || !strings.HasPrefix(sc.Text(), "```") {
			t.Errorf("%s: %s: the marker is not followed by a code block", page, path)
			continue
		}
		var block []string
		for sc.Scan() && !strings.HasPrefix(sc.Text(), "```") {
			if l := strings.TrimSpace(sc.Text()); l != "" {
				block = append(block, l)
			}
		}
		quoted = append(quoted, path)
		if open := unclosed(block); open != "" {
			t.Errorf("%s's block from %s is not whole: %s", page, path, open)
		}
		src, err := os.ReadFile(filepath.FromSlash(path))
		if err != nil {
			t.Errorf("%s quotes %s: %v", page, path, err)
			continue
		}
		lines := strings.Split(string(src), "\n")
		i := 0
		for _, want := range block {
			for i < len(lines) && strings.TrimSpace(lines[i]) != want {
				i++
			}
			if i == len(lines) {
				t.Errorf("%s's block from %s has a line the file lacks (or has out of order):\n\t%s", page, path, want)
				break
			}
			i++
		}
	}
	return quoted
}

// unclosed says which brackets a block of Go leaves open, or closes
// without opening, or returns "" if it closes every one it opens; strings,
// runes and comments are skipped.
func unclosed(block []string) string {
	code := regexp.MustCompile(`"(\\.|[^"\\])*"|'(\\.|[^'\\])*'|`+"`[^`]*`"+`|//.*`).
		ReplaceAllString(strings.Join(block, "\n"), "")
	var open []rune
	for _, r := range code {
		switch r {
		case '(', '{', '[':
			open = append(open, r)
		case ')', '}', ']':
			if len(open) == 0 {
				return "a " + string(r) + " that closes nothing"
			}
			open = open[:len(open)-1]
		}
	}
	if len(open) > 0 {
		return string(open) + " left open"
	}
	return ""
}

// A cell of a storm table: the table's scenario and the row's contender.
type stormCell struct{ scenario, contender string }

// The figures of the README's Results on overload, in the order the
// paragraph gives them (bold), each with the cells of docs/overload.md's
// tables of this version that it quotes: "each" means every cell reads
// the figure, "min" and "max" that the least or the greatest of them does.
var readmeResults = []struct {
	figure, column, of string
	cells              []stormCell
}{
	{"1.02×", "attempts in outage / requests started in it", "each", []stormCell{{"fleet-D30-K50", "retryhttp"}}},
	{"4.13×", "attempts in outage / requests started in it", "each", []stormCell{{"fleet-D30-K50", "retryablehttp-defaults"}}},
	{"4.91×", "attempts in outage / requests started in it", "each", []stormCell{{"fleet-D30-K50", "failsafe-go"}}},
	{"2.8s", "p99 time to fail", "each", []stormCell{{"fleet-D30-K50", "retryhttp"}}},
	{"0", "503s shed after", "each", []stormCell{{"fleet-D30-K50", "retryhttp"}}},
	{"100.0%", "success (started in 2 s after)", "each", []stormCell{{"fleet-D30-K50", "retryhttp"}}},
	{"1.10", "attempts / request", "each", []stormCell{{"overload-2x", "retryhttp"}, {"overload-4x", "retryhttp"}}},
	{"2.85", "attempts / request", "min", peers("overload-2x", "overload-4x")},
	{"4.36", "attempts / request", "max", peers("overload-2x", "overload-4x")},
	{"100.0%", "success (started in outage)", "each", []stormCell{{"steady-D1", "retryhttp"}}},
	{"55.7%", "success (started in outage)", "each", []stormCell{{"steady-D5", "retryhttp"}}},
	{"100.0%", "success (started in outage)", "each", []stormCell{{"steady-D5", "retryablehttp-defaults"}}},
	{"318", "503s shed after", "each", []stormCell{{"recovery-weak", "retryhttp"}}},
	{"444", "503s shed after", "each", []stormCell{{"recovery-weak", "failsafe-go"}}},
	{"1.46×", "server arrivals / capacity (the 10s offered)", "each", []stormCell{{"overload-2x", "retryhttp+throttle"}}},
	{"1.65×", "server arrivals / capacity (the 10s offered)", "each", []stormCell{{"overload-4x", "retryhttp+throttle"}}},
	{"1.74×", "server arrivals / capacity (the 10s offered)", "each", []stormCell{{"overload-2x", "failsafe-go+throttler"}}},
	{"2.47×", "server arrivals / capacity (the 10s offered)", "each", []stormCell{{"overload-4x", "failsafe-go+throttler"}}},
	{"98.2%", "critical success", "each", []stormCell{{"overload-2x-mixed", "retryhttp+throttle"}}},
	{"67.6%", "critical success", "each", []stormCell{{"overload-2x-mixed", "failsafe-go-priority-throttler"}}},
}

// peers returns the cells of go-retryablehttp's defaults and failsafe-go in
// the given scenarios.
func peers(scenarios ...string) []stormCell {
	var cells []stormCell
	for _, s := range scenarios {
		cells = append(cells, stormCell{s, "retryablehttp-defaults"}, stormCell{s, "failsafe-go"})
	}
	return cells
}

// The README's Results quote the storm tables that docs/overload.md shows
// for this version (those above its History), each table under the line
// that bench/results/storm.md gives it: every bold figure of the paragraph
// on overload is one of readmeResults, in order, and reads what its cells
// do; the scenarios are named; and no other result figure (a decimal, or a
// count with × or %) is written there unchecked.
func TestReadmeResultsAreTheStormTables(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	para := readmeOverloadParagraph(string(readme))
	if para == "" {
		t.Fatal(`README.md has no Results paragraph that starts "**Overload.**"`)
	}
	tables := currentStormTables(t)

	var bold []string
	for _, m := range regexp.MustCompile(`\*\*([^*]+)\*\*`).FindAllStringSubmatch(para, -1) {
		if m[1] != "Overload." {
			bold = append(bold, m[1])
		}
	}
	var want []string
	for _, r := range readmeResults {
		want = append(want, r.figure)
	}
	if !slices.Equal(bold, want) {
		t.Errorf("README's Results on overload have the figures %q, want %q (readmeResults): a new figure needs its cells there", bold, want)
	}

	for _, r := range readmeResults {
		var got []string
		for _, c := range r.cells {
			if !strings.Contains(para, "`"+c.scenario+"`") {
				t.Errorf("README's Results quote %s but do not name it", c.scenario)
			}
			vals := tables.cells(c.scenario, c.contender, r.column)
			if len(vals) == 0 {
				t.Errorf("docs/overload.md has no current %s table with a row %s and a column %q", c.scenario, c.contender, r.column)
			}
			got = append(got, vals...)
		}
		if len(got) == 0 {
			continue
		}
		if v := pick(r.of, got); v != r.figure {
			t.Errorf("README's Results say %s, the %s of %q in %v; docs/overload.md's tables: %q", r.figure, r.of, r.column, r.cells, got)
		}
	}

	// Outside the checked figures and the code (the scenarios, the
	// options), nothing reads like a measure.
	rest := regexp.MustCompile("\\*\\*[^*]+\\*\\*|`[^`]*`|\\([^()]*\\.png\\)|\\([^()]*\\.md\\)").ReplaceAllString(para, "")
	for _, m := range regexp.MustCompile(`\d+(\.\d+)?\s*[×%]|\d+\.\d+`).FindAllString(rest, -1) {
		t.Errorf("README's Results on overload write %q without checking it against a table: make it bold and give its cells in readmeResults", m)
	}
}

// readmeOverloadParagraph returns the README's paragraph that starts
// "**Overload.**", up to the next blank line.
func readmeOverloadParagraph(readme string) string {
	start := strings.Index(readme, "\n**Overload.**")
	if start < 0 {
		return ""
	}
	para := readme[start+1:]
	if end := strings.Index(para, "\n\n"); end >= 0 {
		para = para[:end]
	}
	return para
}

// pick returns the figure that of ("each", "min" or "max") makes of the
// cells: for "each", the cells' one value, or "" if they differ.
func pick(of string, cells []string) string {
	num := func(s string) float64 {
		f, _ := strconv.ParseFloat(strings.TrimRight(s, "×%smn"), 64)
		return f
	}
	switch of {
	case "min":
		return slices.MinFunc(cells, func(a, b string) int { return cmpFloat(num(a), num(b)) })
	case "max":
		return slices.MaxFunc(cells, func(a, b string) int { return cmpFloat(num(a), num(b)) })
	}
	for _, c := range cells[1:] {
		if c != cells[0] {
			return ""
		}
	}
	return cells[0]
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// A storm table as docs/overload.md shows it: the scenario that its line
// names, its header and its rows.
type stormTable struct {
	scenario string
	header   []string
	rows     [][]string
}

type stormTables []stormTable

// cells returns the cell of the contender's row in the column, in every
// table of the scenario that has that row.
func (ts stormTables) cells(scenario, contender, column string) []string {
	var out []string
	for _, tab := range ts {
		col := slices.Index(tab.header, column)
		if tab.scenario != scenario || col < 0 {
			continue
		}
		for _, row := range tab.rows {
			if len(row) == len(tab.header) && strings.Trim(row[0], "*") == contender {
				out = append(out, row[col])
			}
		}
	}
	return out
}

// currentStormTables returns the storm tables of docs/overload.md above its
// History, the tables of this version: each under a line "scenario: …"
// (then a blank line), which bench/results/storm.md has above the same
// table.
func currentStormTables(t *testing.T) stormTables {
	t.Helper()
	doc, err := os.ReadFile("docs/overload.md")
	if err != nil {
		t.Fatal(err)
	}
	run, err := os.ReadFile("bench/results/storm.md")
	if err != nil {
		t.Fatal(err)
	}
	current, _, _ := strings.Cut(string(doc), "\n## History")
	caption := regexp.MustCompile(`^([A-Za-z0-9.-]+): `)
	lines := strings.Split(current, "\n")
	var tables stormTables
	for i := 0; i < len(lines); i++ {
		m := caption.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		j := i + 1
		for j < len(lines) && lines[j] == "" {
			j++
		}
		if j == len(lines) || !strings.HasPrefix(lines[j], "| contender |") {
			continue
		}
		k := j
		for k < len(lines) && strings.HasPrefix(lines[k], "|") {
			k++
		}
		table := strings.Join(lines[j:k], "\n")
		if !strings.Contains(string(run), lines[i]+"\n"+table+"\n") && !strings.Contains(string(run), lines[i]+"\n\n"+table+"\n") {
			t.Errorf("docs/overload.md shows a table under %q that bench/results/storm.md does not have under that line", lines[i])
		}
		tab := stormTable{scenario: m[1]}
		for n, l := range lines[j:k] {
			cells := strings.Split(strings.Trim(l, "|"), "|")
			for c := range cells {
				cells[c] = strings.TrimSpace(cells[c])
			}
			switch n {
			case 0:
				tab.header = cells
			case 1:
			default:
				tab.rows = append(tab.rows, cells)
			}
		}
		tables = append(tables, tab)
		i = k
	}
	if len(tables) == 0 {
		t.Fatal("docs/overload.md shows no storm table of this version under its line from bench/results/storm.md")
	}
	return tables
}

// Every relative link of the README and of docs/ names a file that exists
// and, for a page, a heading of it (as GitHub makes anchors of headings).
func TestReadmeAndDocsLinksResolve(t *testing.T) {
	pages, _ := filepath.Glob("docs/*.md")
	pages = append(pages, "README.md")
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, page := range pages {
		src, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(withoutCode(string(src)), -1) {
			if strings.Contains(m[1], "://") || strings.HasPrefix(m[1], "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(m[1], "#")
			target := page
			if path != "" {
				target = filepath.Join(filepath.Dir(page), filepath.FromSlash(path))
			}
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s links to %s, which does not exist", page, m[1])
				continue
			}
			if frag != "" && strings.HasSuffix(target, ".md") && !slices.Contains(headingAnchors(t, target), frag) {
				t.Errorf("%s links to %s, and %s has no such heading", page, m[1], target)
			}
		}
	}
}

// headingAnchors returns the anchors GitHub gives the headings of a page:
// lower case, without punctuation, spaces made hyphens.
func headingAnchors(t *testing.T, page string) []string {
	t.Helper()
	src, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	drop := regexp.MustCompile(`[^\p{L}\p{N}\- _]`)
	var out []string
	for line := range strings.Lines(withoutCode(string(src))) {
		if h, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " "); ok && strings.HasPrefix(line, "#") {
			h = drop.ReplaceAllString(strings.ToLower(strings.TrimSpace(h)), "")
			out = append(out, strings.ReplaceAll(h, " ", "-"))
		}
	}
	return out
}

// withoutCode returns a page without its fenced code blocks.
func withoutCode(page string) string {
	return regexp.MustCompile("(?s)```.*?```").ReplaceAllString(page, "")
}
