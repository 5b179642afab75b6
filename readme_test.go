package retryhttp_test

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The README's recipes are what the examples run: every code block that
// follows a line "<!-- from PATH -->" must appear in the file at PATH, its
// lines in order (each compared without leading and trailing blanks), so
// that a change to an example that is not made to the README, or the
// other way round, fails here.
func TestReadmeRecipesAreTheExamplesCode(t *testing.T) {
	readme, err := os.ReadFile("README.md")
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
			t.Errorf("%s: the marker is not followed by a code block", path)
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
			t.Errorf("README quotes %s: %v", path, err)
			continue
		}
		lines := strings.Split(string(src), "\n")
		i := 0
		for _, want := range block {
			for i < len(lines) && strings.TrimSpace(lines[i]) != want {
				i++
			}
			if i == len(lines) {
				t.Errorf("README's block from %s has a line the file lacks (or has out of order):\n\t%s", path, want)
				break
			}
			i++
		}
	}
	if blocks < 4 {
		t.Errorf("README has %d recipe blocks, want at least 4 (plain, checkout, Stripe, S3)", blocks)
	}
}
