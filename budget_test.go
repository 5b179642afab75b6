package retryhttp

import (
	"testing"

	"github.com/retryhttp/retryhttp/retrytest"
)

func TestTransportBudgetGivesUp(t *testing.T) {
	base := retrytest.NewScriptTransport(steps(503, 503, 503, 503)...)
	tr, _ := testTransport(base, WithBackoff(Constant(0)), WithBudget(NewBudget(0, 0)))
	resp, err := tr.RoundTrip(newRequest(t, "GET", "http://example.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if base.Count() != 1 || resp.StatusCode != 503 {
		t.Errorf("spent budget: %d attempts, status %d; want 1, 503", base.Count(), resp.StatusCode)
	}
}

func TestTransportBudgetSpareForNeverSent(t *testing.T) {
	// A request that never reached the server costs it nothing: its
	// retries do not spend the budget.
	base := retrytest.NewScriptTransport(
		retrytest.Step{Err: dialRefused()}, retrytest.Step{Err: dialRefused()})
	tr, _ := testTransport(base, WithBackoff(Constant(0)), WithBudget(NewBudget(0, 0)))
	resp, err := tr.RoundTrip(newRequest(t, "POST", "http://example.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if base.Count() != 3 {
		t.Errorf("%d attempts, want 3", base.Count())
	}
}
