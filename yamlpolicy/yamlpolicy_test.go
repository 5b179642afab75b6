package yamlpolicy

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/retryhttp/retryhttp"
)

func load(t *testing.T, name string) retryhttp.Policies {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ps retryhttp.Policies
	if strings.HasSuffix(name, ".json") {
		ps, err = retryhttp.LoadPolicies(f)
	} else {
		ps, err = Load(f)
	}
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// The template, as teams write it in YAML, loads into the same policy as
// its JSON form, and builds a Transport.
func TestTemplateAsWritten(t *testing.T) {
	y := load(t, "../testdata/policy-template.yaml")
	j := load(t, "../testdata/policy-template.json")
	if !reflect.DeepEqual(y, j) {
		t.Errorf("YAML template:\n%+v\nJSON template:\n%+v", y["party-service"], j["party-service"])
	}
	p := y["party-service"]
	if p.Retry == nil || p.Retry.MaxAttemptsTotal != 3 || p.TimeBudget.CallerDeadlineMS != 800 ||
		!p.SemanticSafety.Idempotent || p.Owner != "case-platform-team" {
		t.Errorf("party-service: %+v", p)
	}
}

// Several documents, a list and a map all load; a dependency's policies
// with a match are its operations.
func TestForms(t *testing.T) {
	const file = `
dependency: a
retry: {max_attempts_total: 2}
---
- dependency: b
- dependency: b
  operation: search
  match: POST /*/_search
  semantic_safety: {idempotent: true}
---
c:
  retry: {backoff: constant, initial_delay_ms: 10}
d:
  - {}
  - {match: GET /x, retry: {max_attempts_total: 1}}
`
	ps, err := Load(strings.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 4 || ps["a"].Retry.MaxAttemptsTotal != 2 || len(ps["b"].Operations) != 1 ||
		ps["b"].Operations[0].Operation != "search" || ps["c"].Retry.Backoff != "constant" ||
		ps["d"].Dependency != "d" || len(ps["d"].Operations) != 1 {
		t.Errorf("Load = %+v", ps)
	}
	if _, err := ps.Transports(nil); err != nil {
		t.Errorf("Transports: %v", err)
	}
}

// A file that could be misread is refused, naming the line, the
// dependency and the field.
func TestErrors(t *testing.T) {
	for _, tt := range []struct{ file, want string }{
		{"dependency: a\nretries: 3\n", `the policy at line 1: field retries: json: unknown field "retries"`},
		{"dependency: a\nretry:\n  max_attempts_total: -1\n", `policy "a" at line 1: field retry.max_attempts_total`},
		{"a: {}\na: {}\n", `line 2: dependency "a" is written twice`},
		{"dependency: a\nowner: x\nowner: y\n", `"owner" already defined`},
		{"dependency: a\n---\ndependency: a\n", `dependency "a" is written twice`},
		{"a:\n  dependency: b\n", `field dependency: "b" under the key "a"`},
		{"- retry: {}\n", "field dependency: missing"},
		{"dependency: a\nretry: {initial_delay_ms: fast}\n", `field retry`},
		{"x: [1\n", "yamlpolicy: yaml: line"},
		{"", "no policy"},
		{"dependency: a\nsemantic_safety: {idempotent: false, side_effect: false}\n", "semantic_safety.side_effect"},
	} {
		if _, err := Load(strings.NewReader(tt.file)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Load(%q) = %v, want %q", tt.file, err, tt.want)
		}
	}
}
