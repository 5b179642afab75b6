package retryhttp

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retrytest"
)

// Every host has its own state, however many there are: a host failing
// past the first thousands spends no other host's budget and opens no
// other host's breaker.
func TestHostsIsolated(t *testing.T) {
	base := retrytest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
		code := 200
		if r.URL.Host == "h5000" {
			code = 503
		}
		return respond(code), nil
	})
	tr, _ := testTransport(base, WithBackoff(Constant(0)), WithBudget(NewBudget(0, 1)))
	for i := range 5000 {
		resp, _ := tr.RoundTrip(newRequest(t, "GET", fmt.Sprintf("http://h%d/", i), nil))
		resp.Body.Close()
	}
	for range 50 { // spends h5000's budget and opens its breaker
		time.Sleep(time.Millisecond) // failures over time
		resp, _ := tr.RoundTrip(newRequest(t, "GET", "http://h5000/", nil))
		resp.Body.Close()
	}
	if !hostOf(tr, "h5000").Open {
		t.Fatal("the failing host's breaker did not open")
	}
	for _, h := range []string{"h0", "h1023", "h1024", "h4999"} {
		if hostOf(tr, h).Open || !tr.c.budget.s.Allows(h, time.Now().Unix()) {
			t.Errorf("%s: breaker open or budget spent by another host's failures", h)
		}
	}
	if n := tr.c.budget.s.Hosts(); n != 5001 {
		t.Errorf("budget tracks %d hosts, want 5001", n)
	}
}

// Requests to the same host by another spelling share its state.
func TestHostSpellingsShareState(t *testing.T) {
	base := retrytest.NewScriptTransport(steps(503)...)
	tr, _ := testTransport(base, WithBudget(NewBudget(0, 0.1)), WithBackoff(Constant(0)))
	for _, u := range []string{"https://Example.com/", "https://example.com:443/"} {
		resp, _ := tr.RoundTrip(newRequest(t, "GET", u, nil))
		resp.Body.Close()
	}
	if n := tr.c.budget.s.Hosts(); n != 1 {
		t.Errorf("%d budget entries for one host spelt two ways, want 1", n)
	}
}

// A Transport's default Budget is its own: its admission counts each
// host's first attempts in the host's state, and the Budget's map holds
// none; a Budget given by WithBudget, which others may share, keeps its
// own map of hosts.
func TestDefaultBudgetIsOwn(t *testing.T) {
	base := retrytest.RoundTripperFunc(func(*http.Request) (*http.Response, error) { return respond(200), nil })
	own, b := New(base), NewBudget(0.1, 10)
	given := New(base, WithBudget(b))
	for i := range 100 {
		for _, tr := range []*Transport{own, given} {
			resp, _ := tr.RoundTrip(newRequest(t, "GET", fmt.Sprintf("http://h%d/", i), nil))
			resp.Body.Close()
		}
	}
	if n, m := own.c.budget.s.Hosts(), own.c.gate.Hosts(); n != 0 || m != 100 {
		t.Errorf("default budget: its map holds %d hosts, its Transport %d; want 0 and 100", n, m)
	}
	if n := b.s.Hosts(); n != 100 {
		t.Errorf("a given Budget holds %d hosts, want 100", n)
	}
}
