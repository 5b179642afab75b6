package retryhttp

import (
	"strings"
	"testing"

	"github.com/retryhttp/retryhttp/retrytest"
)

// Names kept for code written before their replacements behave as the
// replacements do, so that such code compiles and behaves the same.
func TestDeprecatedFormsBehaveAsTheirReplacements(t *testing.T) {
	if Default != NoOpinion {
		t.Errorf("Default = %v, want NoOpinion", Default)
	}
	for _, tt := range []struct {
		name        string
		old, now    Option
		budget, brk bool // the feature is left on
	}{
		{"WithBudget(nil)", WithBudget(nil), WithoutBudget(), false, true},
		{"BreakerConfig.Disabled", WithRetryBreaker(BreakerConfig{Disabled: true}), WithoutRetryBreaker(), true, false},
	} {
		for _, o := range []Option{tt.old, tt.now} {
			c, err := newConfig(nil, []Option{o})
			if err != nil || (c.budget != nil) != tt.budget || (c.breaker != nil) != tt.brk {
				t.Errorf("%s: budget on %v, breaker on %v, %v; want %v, %v", tt.name, c.budget != nil, c.breaker != nil, err, tt.budget, tt.brk)
			}
		}
	}
	// WithOnRetry still sees each retry as it is sent.
	var seen []int
	base := retrytest.NewScriptTransport(steps(503, 502, 200)...)
	tr, _ := testTransport(base, WithOnRetry(func(ev RetryEvent) { seen = append(seen, ev.StatusCode) }))
	resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(seen) != 2 || seen[0] != 503 || seen[1] != 502 {
		t.Errorf("WithOnRetry saw %v, want [503 502]", seen)
	}
	// The flat policy form still loads.
	if _, err := LoadPolicies(strings.NewReader(`{"a": {"max_attempts_total": 2, "initial_delay": "10ms"}}`)); err != nil {
		t.Errorf("flat form: %v", err)
	}
}
