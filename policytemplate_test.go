package retryhttp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/internal/strictjson"
	"github.com/retryhttp/retryhttp/retrytest"
)

func loadFile(t *testing.T, name string) Policies {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ps, err := LoadPolicies(f)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func noHook(ctx context.Context, _ AttemptStart) (context.Context, func(AttemptEnd)) { return ctx, nil }

// The per-dependency template, as written, loads, and each field does what
// its name says.
func TestPolicyTemplateLoadsAsWritten(t *testing.T) {
	ps := loadFile(t, "testdata/policy-template.json")
	p, ok := ps["party-service"]
	if !ok || len(ps) != 1 {
		t.Fatalf("LoadPolicies(template) = %v, want party-service alone", ps)
	}
	// Kept for the caller.
	if d := p.doc; d.Operation != "getPartySnapshot" || d.InteractionType != "synchronous-http" ||
		d.Criticality != "required-for-case-detail" || d.Owner != "case-platform-team" ||
		d.Fallback == nil || d.Fallback.Type != "partial_response" ||
		d.Fallback.UserMessage != "Party details temporarily unavailable" {
		t.Errorf("template's descriptive fields: %+v", p)
	}

	// observability asks for metrics and an attempt hook: refused without them.
	if _, err := ps.Transports(nil); err == nil || !strings.Contains(err.Error(), "emit_attempt_metric") {
		t.Errorf("Transports without WithMetrics = %v, want an error naming emit_attempt_metric", err)
	}
	if _, err := ps.Transports(nil, WithMetrics(NewMetrics())); err == nil || !strings.Contains(err.Error(), "trace_attempts") {
		t.Errorf("Transports without an attempt hook = %v, want an error naming trace_attempts", err)
	}
	// connect_timeout_ms sets the dial timeout of the base the Transport
	// builds: a base of the caller's cannot take it.
	_, err := ps.Transports(http.DefaultTransport, WithMetrics(NewMetrics()), WithAttemptHook(noHook))
	if err == nil || !strings.Contains(err.Error(), "connect_timeout_ms") {
		t.Errorf("Transports(a base) = %v, want an error naming connect_timeout_ms", err)
	}

	trs, err := ps.Transports(nil, WithMetrics(NewMetrics()), WithAttemptHook(noHook))
	if err != nil {
		t.Fatal(err)
	}
	c := trs["party-service"].c
	if c.name != "party-service" || c.maxAttempts != 3 || c.backoff != (fullJitter{50 * time.Millisecond, 200 * time.Millisecond}) ||
		c.perAttemptTimeout != 250*time.Millisecond || c.maxElapsed != 800*time.Millisecond ||
		c.budget == nil || fmt.Sprint(c.budget.s.Settings()) != "0.1 10" || c.metrics == nil || c.attemptHook == nil {
		t.Errorf("party-service config: %+v", c)
	}
	if tr, ok := c.base.(*http.Transport); !ok || tr.DialContext == nil || c.dialTimeout != 100*time.Millisecond {
		t.Errorf("base %T with dial timeout %v, want a built *http.Transport dialling within 100ms", c.base, c.dialTimeout)
	}
	for code, want := range map[int]bool{408: true, 429: true, 502: true, 503: true, 504: true, 500: false, 404: false} {
		if c.statuses.has(code) != want {
			t.Errorf("template retries %d: %v, want %v", code, !want, want)
		}
	}

	// semantic_safety.idempotent: a POST to the dependency is retried like
	// a GET. (The template's own options need a nil base for its dial
	// timeout: its declaration is tested alone, over a scripted base.)
	safe := Policy{doc: policyDoc{SemanticSafety: p.doc.SemanticSafety}}
	sopts, err := safe.Options()
	if err != nil {
		t.Fatal(err)
	}
	base := retrytest.NewScriptTransport(steps(503, 503, 200)...)
	tr, _ := testTransport(base, sopts...)
	resp, err := tr.RoundTrip(newRequest(t, "POST", "http://party/parties/1", strings.NewReader("q")))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if base.Count() != 3 || resp.StatusCode != 200 {
		t.Errorf("declared-safe POST: %d attempts, status %d; want 3, 200", base.Count(), resp.StatusCode)
	}
}

// Several operations of one dependency carry their own policy, matched by
// method and path; the dependency's own applies to the rest.
func TestPolicyOperations(t *testing.T) {
	const doc = `[
	  {"dependency": "parties", "retry": {"max_attempts_total": 4}, "budget": {"max_retry_ratio": 0.5},
	   "semantic_safety": {"idempotent_requests": ["POST /parties/*/notes"]}},
	  {"dependency": "parties", "operation": "note", "match": "POST /parties/0/notes",
	   "semantic_safety": {"idempotent": false, "side_effect": true}},
	  {"dependency": "parties", "operation": "get", "match": "GET /parties/*", "retry": {"max_attempts_total": 2},
	   "budget": {"max_retry_ratio": 0.5}},
	  {"dependency": "parties", "operation": "search", "match": "POST /parties/*/search",
	   "semantic_safety": {"idempotent": true}},
	  {"dependency": "parties", "operation": "root", "match": "PUT /", "retry": {"max_attempts_total": 3}}
	]`
	ps, err := LoadPolicies(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if ops := ps["parties"].ops; len(ops) != 4 || ops[1].Operation != "get" || ops[2].Operation != "search" {
		t.Fatalf("operations %+v", ops)
	}
	opts, _ := ps["parties"].Options()
	for _, tt := range []struct {
		method, path string
		want         int // attempts against a host that answers 503
	}{
		{"GET", "/parties/7", 2},         // the operation's max_attempts_total
		{"POST", "/parties/7/search", 4}, // declared safe; the dependency's attempts
		{"POST", "/parties", 1},          // no operation: a bare POST is sent once
		{"GET", "/other", 4},             // no operation: the dependency's
		{"POST", "/parties/7/notes", 4},  // declared by the dependency
		{"POST", "/parties/0/notes", 1},  // the operation undoes the declaration
		{"PUT", "", 3},                   // an empty path is "/"
	} {
		base := retrytest.NewScriptTransport(steps(503, 503, 503, 503, 503)...)
		tr, _ := testTransport(base, opts...)
		resp, err := tr.RoundTrip(newRequest(t, tt.method, "http://parties"+tt.path, strings.NewReader("x")))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if base.Count() != tt.want {
			t.Errorf("%s %s: %d attempts, want %d", tt.method, tt.path, base.Count(), tt.want)
		}
	}
	// A per-request option still applies on top of the operation's.
	base := retrytest.NewScriptTransport(steps(503, 503, 503)...)
	tr, _ := testTransport(base, opts...)
	resp, _ := tr.RoundTrip(newRequest(t, "GET", "http://parties/parties/7", nil).WithContext(NoRetry(context.Background())))
	resp.Body.Close()
	if base.Count() != 1 {
		t.Errorf("NoRetry on an operation's request: %d attempts, want 1", base.Count())
	}
}

// A template that cannot be followed is refused, naming what is wrong.
func TestPolicyTemplateErrors(t *testing.T) {
	for _, tt := range []struct{ doc, want string }{
		{`[{"dependency": "a"}, {"dependency": "a"}]`, `dependency "a" is written twice without a match`},
		{`[{"dependency": "a", "budget": {"max_retry_ratio": 0.1}}, {"dependency": "a", "match": "GET /x", "budget": {"max_retry_ratio": 0.9}}]`,
			`operation "GET /x": field budget, breaker`},
		{`{"dependency": "a", "match": "/x"}`, `field match`},
		{`{"dependency": "a", "semantic_safety": {"idempotent": false, "side_effect": false}}`, `field semantic_safety.side_effect`},
		{`{"dependency": "a", "time_budget": {"read_timeout_ms": -1}}`, `field time_budget.read_timeout_ms: WithPerAttemptTimeout(-1ms): timeout is negative`},
		{`{"dependency": "a", "retry": {"initial_delay_ms": 500, "max_delay_ms": 100}}`, `field retry.max_delay_ms`},
		{`{"dependency": "a", "retry": {"initial_delay": "50ms"}}`, `field retry.initial_delay: not a field of the policy: did you mean retry.initial_delay_ms?`},
		{`{"dependency": "a", "observability": {"tag_dependency": "yes"}}`, `observability`},
		{`{"a": {"dependency": "b"}}`, `field dependency: "b" under the key "a"`},
		{`[{"retry": {}}]`, `field dependency: missing`},
		{`{"dependency": "a"} {}`, `data after the policies`},
		{`{"dependency": "a", "fallback": {"kind": "x"}}`, `field fallback.kind: not a field of the policy`},
	} {
		if _, err := LoadPolicies(strings.NewReader(tt.doc)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("LoadPolicies(%s) = %v, want %q", tt.doc, err, tt.want)
		}
	}
	// observability: false switches a report off, whatever the options say.
	p := mustPolicy(t, `{"dependency": "a", "observability": {"emit_attempt_metric": false, "trace_attempts": false}}`)
	opts, _ := p.Options()
	c, err := newConfig(nil, append([]Option{WithMetrics(NewMetrics()), WithAttemptHook(noHook)}, opts...))
	if err != nil || c.metrics != nil || c.attemptHook != nil {
		t.Errorf("observability off: metrics %v, hook set %v, %v", c.metrics, c.attemptHook != nil, err)
	}
	if _, err := NewPolicies(Policy{}); err == nil {
		t.Error("NewPolicies(a policy without dependency) accepted")
	}
	var fe *strictjson.FieldError
	if _, err := mustPolicy(t, `{"retry": {"backoff": "x"}}`).Options(); !errors.As(err, &fe) {
		t.Errorf("Options error %T, want a field error", err)
	}
}
