package yamlpolicy

import (
	"fmt"
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
	if len(y) != 1 {
		t.Errorf("YAML template: %d dependencies, want party-service alone", len(y))
	}
	if opts, err := y["party-service"].Options(); err != nil || len(opts) < 8 {
		t.Errorf("party-service: %d options, %v", len(opts), err)
	}
}

// The YAML of a policy and its JSON load into the same Policy.
func TestSameAsJSON(t *testing.T) {
	for _, tt := range []struct{ yaml, json string }{
		{"dependency: a\nretry: {max_attempts_total: 2}\n", `{"dependency": "a", "retry": {"max_attempts_total": 2}}`},
		{"- dependency: b\n- dependency: b\n  operation: search\n  match: POST /*/_search\n  semantic_safety: {idempotent: true}\n",
			`[{"dependency": "b"}, {"dependency": "b", "operation": "search", "match": "POST /*/_search", "semantic_safety": {"idempotent": true}}]`},
		{"c:\n  retry: {backoff: constant, initial_delay_ms: 10}\n", `{"c": {"retry": {"backoff": "constant", "initial_delay_ms": 10}}}`},
		{"d:\n  - {}\n  - {match: GET /x, retry: {max_attempts_total: 1}}\n", `{"d": [{}, {"match": "GET /x", "retry": {"max_attempts_total": 1}}]}`},
	} {
		y, err := Load(strings.NewReader(tt.yaml))
		if err != nil {
			t.Fatal(err)
		}
		j, err := retryhttp.LoadPolicies(strings.NewReader(tt.json))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(y, j) {
			t.Errorf("YAML %q:\n%+v\nJSON %s:\n%+v", tt.yaml, y, tt.json, j)
		}
	}
}

// yamlpolicy tells a policy from a map of them by the same keys as
// retryhttp: each is a field of a policy.
func TestPolicyKeys(t *testing.T) {
	for k := range policyKeys {
		if _, err := retryhttp.ParsePolicy([]byte(`{"` + k + `": null}`)); err != nil {
			t.Errorf("%s: %v", k, err)
		}
	}
	if _, err := retryhttp.ParsePolicy([]byte(`{"not_a_field": null}`)); err == nil {
		t.Error("ParsePolicy accepts any key: the check above proves nothing")
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
	if len(ps) != 4 {
		t.Errorf("Load = %+v, want 4 dependencies", ps)
	}
	if _, err := ps.Transports(nil); err != nil {
		t.Errorf("Transports: %v", err)
	}
}

// A file that could be misread is refused, naming the line, the
// dependency and the field.
func TestErrors(t *testing.T) {
	for _, tt := range []struct{ file, want string }{
		{"dependency: a\nretries: 3\n", `yamlpolicy: policy "a", line 2: field retries: not a field of the policy: did you mean retry?`},
		{"dependency: a\nretry:\n  max_attempts_total: -1\n", `yamlpolicy: policy "a", line 3: field retry.max_attempts_total: WithMaxAttempts(-1): attempts must be at least 1`},
		{"dependency: a\nretry:\n  max_attempts_total: \"3\"\n", `line 3: field retry.max_attempts_total: want a whole number, not a string`},
		{"dependency: a\nRetry: {}\n", `line 2: field Retry: not a field of the policy: did you mean retry?`},
		{"retry: {max_attempts_total: 3}\n", `the policy at line 1: field dependency: missing`},
		{"owner: x\nretry: {max_attempts_total: 3}\n", `field dependency: missing`},
		{"a: {}\na: {}\n", `line 2: dependency "a" is written twice`},
		{"dependency: a\nowner: x\nowner: y\n", `line 3: field owner: written twice`},
		{"dependency: a\nretry:\n  max_attempts_total: 2\n  max_attempts_total: 3\n", `yamlpolicy: policy "a", line 4: field retry.max_attempts_total: written twice`},
		{"dependency: a\nretry: &r [*r]\n", `field retry: an alias of itself`},
		{"dependency: a\nretry: {max_attempts_total: 010}\n", `line 2: field retry.max_attempts_total: 010 is not a number JSON reads`},
		{"dependency: a\nretry: {max_attempts_total: 3.0}\n", `field retry.max_attempts_total: want a whole number, not the number 3.0`},
		{"dependency: a\nbudget: {max_retry_ratio: .inf}\n", `line 2: field budget.max_retry_ratio: .inf is not a finite number`},
		{"base: &b {max_attempts_total: 3}\ndependency: a\nretry:\n  <<: *b\n", `line 4: field retry.<<: merge keys are not read`},
		{"dependency: a\nretry:\n  <<: {max_attempts_total: 3}\n", `line 3: field retry.<<: merge keys are not read`},
		{"- dependency: a\n- dependency: a\n", `the policy at line 2: dependency "a" is written twice without a match`},
		{"- dependency: a\n- dependency: a\n  match: GET /[\n", `line 3: field match`},
		{"dependency: a\n---\ndependency: a\n", `dependency "a" is written twice`},
		{"a:\n  dependency: b\n", `field dependency: "b" under the key "a"`},
		{"- retry: {}\n", "field dependency: missing"},
		{"dependency: a\nretry: {initial_delay_ms: fast}\n", `line 2: field retry.initial_delay_ms: want a whole number, not a string`},
		{"x: [1\n", "yamlpolicy: yaml: line"},
		{"", "no policy"},
		{"dependency: a\nsemantic_safety: {idempotent: false, side_effect: false}\n", "semantic_safety.side_effect"},
	} {
		if _, err := Load(strings.NewReader(tt.file)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Load(%q) = %v, want %q", tt.file, err, tt.want)
		}
	}
}

// A scalar keeps the text it was written as: a dependency named like a
// date is that name, not a timestamp.
func TestScalarsKeepTheirText(t *testing.T) {
	ps, err := Load(strings.NewReader("dependency: 2024-01-01\nretry: {max_attempts_total: 2}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ps["2024-01-01"]; !ok || len(ps) != 1 {
		t.Errorf("Load = %v, want the dependency 2024-01-01", ps)
	}
}

// An error names a field once, with no prefix repeated and no word of
// JSON's.
func TestErrorsSpeakYAML(t *testing.T) {
	_, err := Load(strings.NewReader("dependency: a\nretry:\n  max_attempts_total: [1]\n"))
	if err == nil || strings.Count(err.Error(), "retryhttp:") != 0 || strings.Count(err.Error(), "yamlpolicy:") != 1 ||
		strings.Contains(err.Error(), "JSON") || strings.Contains(err.Error(), "int64") {
		t.Errorf("Load = %v, want one prefix and no JSON or Go words", err)
	}
}

// A few bytes of aliases cannot stand for billions of values.
func TestAliasesBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("dependency: a\nfallback:\n  type: x\nowner: &a0 x\n")
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&b, "l%d: &a%d [", i, i)
		for j := range 9 {
			if j > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "*a%d", i-1)
		}
		b.WriteString("]\n")
	}
	_, err := Load(strings.NewReader(b.String()))
	if err == nil || !strings.Contains(err.Error(), "expands to more than") {
		t.Errorf("Load(billion laughs) = %v, want it refused for its size", err)
	}
}

// A policy written as an alias of another is that policy.
func TestPolicyAlias(t *testing.T) {
	ps, err := Load(strings.NewReader("a: &p {retry: {max_attempts_total: 2}}\nb: *p\n"))
	if err != nil || len(ps) != 2 {
		t.Errorf("Load = %v, %v; want a and b", ps, err)
	}
}
