package retryhttp_test

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The recipes of the README and of docs/ are what the examples run: every
// code block that follows a line "<!-- from PATH -->" must appear in the
// file at PATH, its lines in order (each compared without leading and
// trailing blanks), so that a change to an example that is not made to the
// docs, or the other way round, fails here.
func TestReadmeRecipesAreTheExamplesCode(t *testing.T) {
	if n := quotedBlocks(t, "README.md"); n < 4 {
		t.Errorf("README has %d recipe blocks, want at least 4 (plain, checkout, Stripe, S3)", n)
	}
	pages, _ := filepath.Glob("docs/*.md")
	for _, p := range pages {
		quotedBlocks(t, p)
	}
}

// The README stays a page a newcomer reads in minutes; the reference is
// in docs/.
func TestReadmeIsShort(t *testing.T) {
	fi, err := os.Stat("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > 15000 {
		t.Errorf("README.md is %d bytes, want at most 15,000: move reference to docs/", fi.Size())
	}
}

// quotedBlocks checks the quoted blocks of one page and counts them.
func quotedBlocks(t *testing.T, page string) int {
	t.Helper()
	readme, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	blocks := 0
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
		blocks++
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
	return blocks
}
