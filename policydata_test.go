package retryhttp

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retrytest"
)

// Policies as JSON become one named Transport per dependency with the
// options they say.
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
		rates.budget == nil || fmt.Sprint(rates.budget.s.Settings()) != "0.1 10" || rates.keyMethods != nil {
		t.Errorf("shipping-rates: %+v", rates)
	}
	// non_retryable_status applies after retryable_status: 500, in both, is
	// not retried, as WithRetryableStatuses then WithNonRetryableStatuses.
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
		{`{"a": {"retry": {"max_attempts_total": -1}}}`, `policy "a": line 1, column 18: field retry.max_attempts_total: WithMaxAttempts(-1): attempts must be at least 1`},
		{`{"a": {"retry": {"max_attempts_total": 0}}}`, `field retry.max_attempts_total: WithMaxAttempts(0): attempts must be at least 1`},
		{`{"a": {"retry": {"max_attempts_total": "3"}}}`, `field retry.max_attempts_total: want a whole number, not a string`},
		{`{"a": {"retry": {"backoff": "linear"}}}`, `field retry.backoff: "linear" is not one of`},
		{`{"a": {"budget": {"max_retry_ratio": "high"}}}`, `field budget.max_retry_ratio: want a number, not a string`},
		{`{"a": {"retry": {"initial_delay_ms": 2000, "max_delay_ms": 1000}}}`, `field retry.max_delay_ms: FullJitter: max 1s is less than base 2s`},
		{`{"a": {"retry": {"initial_delay_ms": -1, "backoff": "constant"}}}`, `field retry.initial_delay_ms: Constant: base -1ms is negative`},
		{`{"a": {"retry": {"retryable_status": [42]}}}`, `field retry.retryable_status: WithRetryableStatuses: status code 42 is not an error status (400..999)`},
		{`{"a": {"retry": {"retryable_status": [200]}}}`, `field retry.retryable_status: WithRetryableStatuses: status code 200 is not an error status (400..999)`},
		{`{"a": {"time_budget": {"read_timeout_ms": -1}}}`, `field time_budget.read_timeout_ms: WithPerAttemptTimeout(-1ms): timeout is negative`},
		{`{"a": {"time_budget": {"caller_deadline_ms": -1}}}`, `field time_budget.caller_deadline_ms: WithMaxElapsed(-1ms)`},
		{`{"a": {"retry": {"max_retry_after_ms": 10000000000000000}}}`, `field retry.max_retry_after_ms: 10000000000000000 ms is too long to represent`},
		{`{"a": {"budget": {"max_retry_ratio": -0.5}}}`, `field budget.max_retry_ratio: NewBudget: ratio -0.5 must be a finite number >= 0`},
		{`{"a": {"budget": {"disabled": true, "max_retry_ratio": 0.5}}}`, `field budget.disabled: true, but the budget's ratio or floor is set too`},
		{`{"a": {"breaker": {"threshold": -1}}}`, `field breaker.threshold: WithRetryBreaker(Threshold: -1): threshold is negative`},
		{`{"a": {"hedging": {"percentile": 1.5}}}`, `field hedging.percentile: WithHedging(Percentile: 1.5)`},
		{`{"a": {"semantic_safety": {"idempotency_keys": ["PO ST"]}}}`, `field semantic_safety.idempotency_keys: WithIdempotencyKeys("PO ST"): not a method name`},
		{`{"a": {"observability": {"attempt_header": "a b"}}}`, `field observability.attempt_header: WithAttemptHeader("a b", "{attempt}")`},
		{`{"a": {"observability": {"attempt_header": "X-A", "attempt_header_value": "{try}"}}}`, `field observability.attempt_header_value: "{try}": a placeholder other than`},
		{`{"a": {"retries": 3}}`, `field retries: not a field of the policy: did you mean retry?`},
		{`{"a": {"max_attempts_total": 3}}`, `field max_attempts_total: not a field of the policy: did you mean retry.max_attempts_total?`},
		{`{"a": {"retry": {"max_atempts_total": 3}}}`, `field retry.max_atempts_total: not a field of the policy: did you mean retry.max_attempts_total?`},
		{`{"a": {"RETRY": {}}}`, `field RETRY: not a field of the policy: did you mean retry?`},
		{`{"a": {"retry": {"max_attempts_total": 3, "max_attempts_total": 5}}}`, `line 1, column 43: field retry.max_attempts_total: written twice`},
		{`{"a": {"retry": {}, "retry": {}}}`, `field retry: written twice`},
		{`{"a": {}, "b": {"retry": {"max_delay_ms": "x"}}}`, `policy "b": line 1, column 27: field retry.max_delay_ms: want a whole number, not a string`},
		{`{"retry": {"max_attempts_total": 3}}`, `a policy without a dependency: field dependency: missing`},
		{`{"owner": "x", "retry": {"max_attempts_total": 3}}`, `field dependency: missing`},
		{`{"dependency": "a", "retry": {"rates": [1,}}`, `policies: line 1, column 43: invalid character`},
		{`[1, 2]`, `want a policy (a section of fields), not a number (the policy starts at line 1, column 2)`},
		{`{"a": {}} {}`, `data after the policies`},
		{`{"a": {"retry": {"initial_delay_ms": 9223372036854775807}}}`, `policy "a": line 1, column 18: field retry.initial_delay_ms: 9223372036854775807 ms is too long`},
		{`{"a": {"retry": {"backoff": "constant", "initial_delay_ms": 100, "max_delay_ms": 5}}}`, `field retry.max_delay_ms: set, but a constant backoff has no cap`},
		{"{\"a\": {\"observability\": {\"attempt_header\": \"X-A\",\n \"attempt_header_value\": \"{bogus}\"}}}", `line 2, column 2: field observability.attempt_header_value: "{bogus}": a placeholder other than`},
		// A syntax error in the keyed and list forms is placed in the file.
		{"{\"a\": {},\n \"b\": {},\n \"c\": {\"retry\": {}\n}", `line 4, column 2: unexpected end of JSON input`},
		{"[{\"dependency\": \"a\"},\n {\"dependency\": \"b\"}\n {\"dependency\": \"c\"}]", `line 3, column 2: expected comma after array element`},
		// Errors of the grouping name the policy's line.
		{"{\"a\": {\"owner\": \"é\u00e9\", \"retry\": x}}", `line 1, column 32: invalid character 'x'`}, // columns count characters, é one
		{"[{\"dependency\": \"a\"},\n {\"dependency\": \"a\"}]", `dependency "a" is written twice without a match: give each of its operations a match ("GET /parties/*") (the policy at line 2, column 2)`},
		{"[{\"dependency\": \"b\", \"match\": \"GET /x\", \"budget\": {\"max_retry_ratio\": 0.5}},\n {\"dependency\": \"b\", \"budget\": {\"max_retry_ratio\": 0.1}},\n {\"dependency\": \"a\", \"match\": \"GET /y\"}]",
			`policy "b": operation "GET /x": field budget, breaker`}, // and the line is the operation's:
		{"[{\"dependency\": \"a\"},\n {\"dependency\": \"b\", \"match\": \"GET /x\", \"budget\": {\"max_retry_ratio\": 0.5}},\n {\"dependency\": \"b\", \"budget\": {\"max_retry_ratio\": 0.1}}]",
			`apply to the Transport as a whole (the policy at line 2, column 2)`},
		{"[{\"dependency\": \"a\"},\n {\"dependency\": \"a\", \"match\": \"GET /[\"}]", `line 2, column 22: field match: "GET /[": syntax error in pattern`},
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
	opts, err = mustPolicy(t, `{"retry": {"retryable_status": []}}`).Options()
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
	f.Add([]byte(`{"retry": {"max_attempts_total": 2, "backoff": "constant", "initial_delay_ms": 0}}`))
	f.Add([]byte(`{"retry": {"retryable_status": [], "non_retryable_status": [503]}}`))
	f.Add([]byte(`{"retry": {"max_attempts_total": 3, "max_attempts_total": 5}}`))
	f.Add([]byte(`{"retry": {"max_retry_after_ms": 9223372036854775807}, "RETRY": {}}`))
	f.Add([]byte(`{"owner": "x", "retry": {"max_attempts_total": 0}}`))
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
		ratio, floor := c.budget.s.Settings()
		if err != nil || floor != tt.want || ratio != 0.2 {
			t.Errorf("%s: floor %v, ratio %v, %v; want floor %v", tt.json, floor, ratio, err, tt.want)
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
	if b := tr["a"].c.budget; b == nil || fmt.Sprint(b.s.Settings()) != fmt.Sprint(defaultBudgetRatio, defaultBudgetPerSecond) {
		t.Errorf(`"budget": {} gave %+v, want the default budget`, b)
	}
	for _, tt := range []struct{ doc, want string }{
		{`{"a": {}, "a": {"retry": {}}}`, `line 1, column 14: dependency "a" is written twice`},
		{`{"a": {}}}`, "data after the policies"},
		{`{"a": {}}]`, "data after the policies"},
		{"{\"a\": {},\n \"b\": {\"retry\": {},}}", `dependency "b": line 2, column`},
	} {
		if _, err := LoadPolicies(strings.NewReader(tt.doc)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("LoadPolicies(%s) = %v, want %q", tt.doc, err, tt.want)
		}
	}
	if _, err := ParsePolicy([]byte(`{"retry": {}} }`)); err == nil || !strings.Contains(err.Error(), "data after") {
		t.Errorf("ParsePolicy with trailing data: %v", err)
	}

	p := mustPolicy(t, `{"retry": {"non_retryable_status": [500]}, "semantic_safety": {"idempotency_keys": ["post"]}}`)
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

// mustPolicy is ParsePolicy of doc, which must be valid.
func mustPolicy(t testing.TB, doc string) Policy {
	t.Helper()
	p, err := ParsePolicy([]byte(doc))
	if err != nil {
		t.Fatalf("ParsePolicy(%s): %v", doc, err)
	}
	return p
}

// A policy's field means what its option means, with one check: the
// option's. What the options and the policy once did differently now
// behaves one way.
func TestPolicyFieldsBehaveAsTheirOptions(t *testing.T) {
	for _, tt := range []struct {
		doc  string
		opts []Option
	}{
		// An empty list of methods keys POST, as WithIdempotencyKeys() does.
		{`{"semantic_safety": {"idempotency_keys": []}}`, []Option{WithIdempotencyKeys()}},
		// A status in both lists: the non-retryable list applies after.
		{`{"retry": {"retryable_status": [500, 503], "non_retryable_status": [503]}}`,
			[]Option{WithRetryableStatuses(500, 503), WithNonRetryableStatuses(503)}},
		// constant with 0 is Constant(0); left out, the default base.
		{`{"retry": {"backoff": "constant", "initial_delay_ms": 0}}`, []Option{WithBackoff(Constant(0))}},
		{`{"retry": {"backoff": "constant"}}`, []Option{WithBackoff(Constant(200 * time.Millisecond))}},
		{`{"retry": {"initial_delay_ms": 50}}`, []Option{WithBackoff(FullJitter(50*time.Millisecond, 10*time.Second))}},
		{`{"time_budget": {"read_timeout_ms": 0}}`, []Option{WithPerAttemptTimeout(0)}},
	} {
		opts, err := mustPolicy(t, tt.doc).Options()
		if err != nil {
			t.Errorf("%s: %v", tt.doc, err)
			continue
		}
		got, _ := newConfig(nil, opts)
		want, _ := newConfig(nil, tt.opts)
		if got.statuses != want.statuses || got.customStatuses != want.customStatuses || !slices.Equal(got.keyMethods, want.keyMethods) ||
			got.backoff != want.backoff || got.perAttemptTimeout != want.perAttemptTimeout {
			t.Errorf("%s: statuses %v, keys %v, backoff %v; want %v, %v, %v as the options", tt.doc,
				got.statuses, got.keyMethods, got.backoff, want.statuses, want.keyMethods, want.backoff)
		}
	}
}
