package retryhttp

import (
	"bytes"
	"github.com/retryhttp/retryhttp/retrytest"
	"os"
	"strings"
	"testing"
	"time"
)

// Policies in the flat form of earlier versions, as JSON, become one named
// Transport per dependency with the options they say.
func TestLoadPolicies(t *testing.T) {
	ps := loadFile(t, "testdata/policies.json")
	trs, err := ps.Transports(nil, WithMaxAttempts(9))
	if err != nil {
		t.Fatal(err)
	}
	if len(trs) != 2 {
		t.Fatalf("%d transports, want 2", len(trs))
	}
	rates := trs["shipping-rates"].c
	if rates.name != "shipping-rates" || rates.maxAttempts != 3 || rates.backoff != (fullJitter{100 * time.Millisecond, 2 * time.Second}) ||
		rates.perAttemptTimeout != 800*time.Millisecond || rates.maxElapsed != 3*time.Second ||
		rates.budget == nil || rates.budget.ratio != 0.1 || rates.budget.perSecond != 10 || rates.keyMethods != nil {
		t.Errorf("shipping-rates: %+v", rates)
	}
	for code, want := range map[int]bool{429: true, 503: true, 500: false, 501: false, 408: false} {
		if rates.statuses.has(code) != want {
			t.Errorf("shipping-rates retries %d: %v, want %v", code, !want, want)
		}
	}
	pay := trs["payments"].c
	if pay.name != "payments" || pay.maxAttempts != 5 || pay.backoff != (decorrelatedJitter{200 * time.Millisecond, 5 * time.Second}) ||
		!pay.keyMethods.has("POST") || pay.breaker == nil || !pay.breaker.FailFast {
		t.Errorf("payments: %+v", pay)
	}
}

// Every broken file is refused with an error that names the dependency and
// the field.
func TestLoadPoliciesErrors(t *testing.T) {
	tests := []struct{ json, want string }{
		{`{"a": {"max_attempts_total": -1}}`, `policy "a": field max_attempts_total`},
		{`{"a": {"max_attempts_total": "3"}}`, `policy "a": field max_attempts_total`},
		{`{"a": {"backoff": "linear"}}`, `policy "a": field backoff`},
		{`{"a": {"initial_delay": "fast"}}`, `policy "a": field initial_delay: time: invalid duration "fast"`},
		{`{"a": {"initial_delay": 100}}`, `policy "a": field initial_delay: a duration must be a string`},
		{`{"a": {"budget": {"max_retry_ratio": "high"}}}`, `policy "a": field budget.max_retry_ratio`},
		{`{"a": {"initial_delay": "2s", "max_delay": "1s"}}`, `policy "a": field max_delay`},
		{`{"a": {"retryable_status": [42]}}`, `policy "a": field retryable_status`},
		{`{"a": {"retryable_status": [503], "non_retryable_status": [503]}}`, `policy "a": field non_retryable_status`},
		{`{"a": {"per_attempt_timeout": "-1s"}}`, `policy "a": field per_attempt_timeout`},
		{`{"a": {"max_elapsed": "-1s"}}`, `policy "a": field max_elapsed`},
		{`{"a": {"budget": {"max_retry_ratio": -0.5}}}`, `policy "a": field budget.max_retry_ratio`},
		{`{"a": {"breaker": {"threshold": -1}}}`, `policy "a": field breaker.threshold`},
		{`{"a": {"idempotency_keys": ["PO ST"]}}`, `policy "a": field idempotency_keys`},
		{`{"a": {"retries": 3}}`, `policy "a": field retries: json: unknown field "retries"`},
		{`{"a": {}, "b": {"max_delay": "x"}}`, `policy "b": field max_delay`},
		{`[1, 2]`, `the policy at line 1, column 2: json: cannot unmarshal number`},
		{`{"a": {}} {}`, `data after the policies`},
	}
	for _, tt := range tests {
		_, err := LoadPolicies(strings.NewReader(tt.json))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("LoadPolicies(%s) = %v, want an error with %q", tt.json, err, tt.want)
		}
	}
}

func TestPolicyZeroKeepsDefaults(t *testing.T) {
	opts, err := Policy{}.Options()
	if err != nil || len(opts) != 0 {
		t.Errorf("Policy{}.Options() = %d options, %v; want none", len(opts), err)
	}
	opts, err = Policy{RetryableStatus: []int{}}.Options()
	c, _ := newConfig(nil, opts)
	if err != nil || c.statuses != (statusSet{}) {
		t.Errorf("an empty retryable_status must retry no status: %v, %v", c.statuses, err)
	}
}

// FuzzPolicy: decoding any input never panics, and every policy or file
// of policies that is accepted builds its Transports.
func FuzzPolicy(f *testing.F) {
	for _, name := range []string{"testdata/policies.json", "testdata/policy-template.json"} {
		seed, _ := os.ReadFile(name)
		f.Add(seed)
	}
	f.Add([]byte(`{"max_attempts_total": 2, "backoff": "constant", "initial_delay": "1s"}`))
	f.Add([]byte(`{"retryable_status": [], "non_retryable_status": [503]}`))
	f.Add([]byte(`{"budget": {"max_retry_ratio": 1e308, "min_retries_per_second": 0}}`))
	f.Add([]byte(`[{"dependency": "a", "retry": {"max_attempts_total": 2}}, {"dependency": "a", "match": "GET /x/*", "semantic_safety": {"idempotent": true}}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		needs := []Option{WithMetrics(NewMetrics()), WithAttemptHook(noHook)} // what observability may require
		if p, err := ParsePolicy(data); err == nil {
			if opts, err := p.Options(); err == nil {
				if _, err := newConfig(nil, append(needs, opts...)); err != nil {
					t.Fatalf("policy %s accepted, but its options are refused: %v", data, err)
				}
			}
		}
		if ps, err := LoadPolicies(bytes.NewReader(data)); err == nil {
			if _, err := ps.Transports(nil, needs...); err != nil {
				t.Fatalf("policies %s accepted, but their Transports are refused: %v", data, err)
			}
		}
	})
}

func TestBudgetSpecFloor(t *testing.T) {
	for _, tt := range []struct {
		json string
		want float64 // the floor a second
	}{
		{`{"budget": {"max_retry_ratio": 0.2}}`, 10},
		{`{"budget": {"max_retry_ratio": 0.2, "min_retries_per_second": 0}}`, 0},
		{`{"budget": {"max_retry_ratio": 0.2, "min_retries_per_second": 1}}`, 1},
	} {
		p, err := ParsePolicy([]byte(tt.json))
		if err != nil {
			t.Fatal(err)
		}
		opts, err := p.Options()
		c, _ := newConfig(nil, opts)
		if err != nil || c.budget.perSecond != tt.want || c.budget.ratio != 0.2 {
			t.Errorf("%s: floor %v, ratio %v, %v; want floor %v", tt.json, c.budget.perSecond, c.budget.ratio, err, tt.want)
		}
	}
}

// A policy file cannot be misread: an empty budget keeps the defaults; a
// dependency written twice and data after the object are errors; a
// syntax error says where; non_retryable_status keeps the keyed-409 rule;
// method names are taken without regard to case, as the option does.
func TestPoliciesCannotBeMisread(t *testing.T) {
	ps, err := LoadPolicies(strings.NewReader(`{"a": {"budget": {}}}`))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := ps.Transports(nil)
	if err != nil {
		t.Fatal(err)
	}
	if b := tr["a"].c.budget; b == nil || b.ratio != DefaultBudgetRatio || b.perSecond != DefaultBudgetPerSecond {
		t.Errorf(`"budget": {} gave %+v, want the default budget`, b)
	}
	for _, tt := range []struct{ doc, want string }{
		{`{"a": {}, "a": {"max_attempts_total": 2}}`, `line 1, column 14: dependency "a" is written twice`},
		{`{"a": {}}}`, "data after the policies"},
		{`{"a": {}}]`, "data after the policies"},
		{"{\"a\": {},\n \"b\": {\"max_attempts_total\": 2,}}", `dependency "b": line 2, column`},
	} {
		if _, err := LoadPolicies(strings.NewReader(tt.doc)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("LoadPolicies(%s) = %v, want %q", tt.doc, err, tt.want)
		}
	}
	if _, err := ParsePolicy([]byte(`{"max_attempts_total": 2} }`)); err == nil || !strings.Contains(err.Error(), "data after") {
		t.Errorf("ParsePolicy with trailing data: %v", err)
	}

	p, _ := ParsePolicy([]byte(`{"non_retryable_status": [500], "idempotency_keys": ["post"]}`))
	opts, err := p.Options()
	if err != nil {
		t.Fatal(err)
	}
	base := retrytest.NewScriptTransport(steps(409, 500)...)
	trk, _ := testTransport(base, opts...)
	resp, _ := trk.RoundTrip(newRequest(t, "POST", "http://h/", strings.NewReader("x")))
	resp.Body.Close()
	if base.Count() != 2 || resp.StatusCode != 500 {
		t.Errorf("keyed POST, 409 then 500 with 500 non-retryable: %d attempts, last %d; want 409 retried, 500 final",
			base.Count(), resp.StatusCode)
	}
	if p := catch(func() { New(nil, WithIdempotencyKeys("NOT A METHOD")) }); p == nil {
		t.Error(`WithIdempotencyKeys("NOT A METHOD") accepted`)
	}
}
