// The tests hold the case study to what a user of the page relies on: the
// page is served without a degradable dependency, with that section's
// message from its policy; it fails, with party's message, without the
// required one; the fallbacks served are reported; and under overload,
// with a pacer, the critical requests are served before the sheddable.

package main

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/retryhttp/retryhttp"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func loadPolicies(t *testing.T) retryhttp.Policies {
	t.Helper()
	policies, err := retryhttp.LoadPolicies(bytes.NewReader(policyFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(policies) != 3 {
		t.Fatalf("policies.json has %d dependencies, want 3", len(policies))
	}
	return policies
}

// The page's lines that its dependencies fill, when they answer.
const (
	party    = "Party:    Ada Lovelace, claimant"
	evidence = "Evidence: 3 documents, last filed 2026-11-28"
	decision = "Decision: granted on 2026-11-30"
)

// What the page answers with some dependencies failing, and which
// fallbacks its handler reports.
var pageCases = []struct {
	name    string
	failing map[string]int32 // dependency: the status it answers
	status  int
	page    []string // the page's lines
	report  []string // the lines the handler reports, in any order
}{
	{"all up", nil, 200, []string{"Case 42", party, evidence, decision}, nil},
	{"evidence down: served, with evidence's message",
		map[string]int32{"evidence-service": 503}, 200,
		[]string{"Case 42", party, "Evidence: Evidence list temporarily unavailable", decision},
		[]string{`evidence-service failed (503 Service Unavailable): fallback partial_response served, "Evidence list temporarily unavailable"`}},
	{"evidence and decision down: served, with both messages",
		map[string]int32{"evidence-service": 503, "decision-service": 504}, 200,
		[]string{"Case 42", party, "Evidence: Evidence list temporarily unavailable", "Decision: Decision history temporarily unavailable"},
		[]string{
			`evidence-service failed (503 Service Unavailable): fallback partial_response served, "Evidence list temporarily unavailable"`,
			`decision-service failed (504 Gateway Timeout): fallback partial_response served, "Decision history temporarily unavailable"`,
		}},
	{"party down: 503, with party's message",
		map[string]int32{"party-service": 503}, 503,
		[]string{"Party details temporarily unavailable"},
		[]string{`party-service failed (503 Service Unavailable): fallback partial_response served, "Party details temporarily unavailable"`}},
	// A 500 is not in the policy's retryable_status: the request is not
	// retried, so it does not give up, and no fallback comes back with
	// it; the handler shows its own message.
	{"decision answers 500: no fallback, the handler's own message",
		map[string]int32{"decision-service": 500}, 200,
		[]string{"Case 42", party, evidence, "Decision: Decision unavailable"},
		[]string{"decision-service failed (500 Internal Server Error): no fallback from its policy, a plain message served"}},
}

// TestPage asks for the page of each of pageCases.
func TestPage(t *testing.T) {
	for _, tc := range pageCases {
		t.Run(tc.name, func(t *testing.T) {
			var report bytes.Buffer
			s, err := newSite(loadPolicies(t), &report)
			if err != nil {
				t.Fatal(err)
			}
			defer s.close()
			for dep, status := range tc.failing {
				s.deps[dep].failing.Store(status)
			}
			status, body, err := s.get("42")
			if err != nil {
				t.Fatal(err)
			}
			if want := strings.Join(tc.page, "\n") + "\n"; status != tc.status || body != want {
				t.Errorf("page: %d\n%s\nwant %d\n%s", status, body, tc.status, want)
			}
			got := strings.Split(strings.TrimSpace(report.String()), "\n")
			if report.Len() == 0 {
				got = nil
			}
			if len(got) != len(tc.report) {
				t.Errorf("reported:\n%s\nwant:\n%s", report.String(), strings.Join(tc.report, "\n"))
			}
			for _, want := range tc.report {
				if !strings.Contains(report.String(), "   "+want+"\n") {
					t.Errorf("report lacks %q:\n%s", want, report.String())
				}
			}
		})
	}
}

// Each dependency's policy is followed: evidence-service, down, is asked
// its max_attempts_total (2) times and no more; party-service 3 times.
func TestPolicyAttempts(t *testing.T) {
	s, err := newSite(loadPolicies(t), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	s.deps["evidence-service"].failing.Store(http.StatusServiceUnavailable)
	if status, _, err := s.get("42"); err != nil || status != 200 {
		t.Fatalf("page: %d, %v; want 200", status, err)
	}
	s.deps["party-service"].failing.Store(http.StatusServiceUnavailable)
	if status, _, err := s.get("42"); err != nil || status != 503 {
		t.Fatalf("page: %d, %v; want 503", status, err)
	}
	if n := s.deps["party-service"].refused.Load(); n != 3 {
		t.Errorf("party-service was sent %d attempts, want 3", n)
	}
	// Evidence: 2 for the first page; the second page's request may be
	// cut short once party fails.
	if n := s.deps["evidence-service"].refused.Load(); n < 2 || n > 4 {
		t.Errorf("evidence-service was sent %d attempts, want 2 to 4", n)
	}
}

// The story main prints, up to the overload.
func TestPages(t *testing.T) {
	var out bytes.Buffer
	if err := pages(&out, loadPolicies(t)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"1. GET /case/42, every dependency up\n   200 OK\n",
		"2. GET /case/42, evidence-service down (503 to every request)\n" +
			`   evidence-service failed (503 Service Unavailable): fallback partial_response served, "Evidence list temporarily unavailable"` + "\n" +
			"   200 OK\n",
		"   | Evidence: Evidence list temporarily unavailable\n",
		"3. GET /case/42, party-service down too\n" +
			`   party-service failed (503 Service Unavailable): fallback partial_response served, "Party details temporarily unavailable"` + "\n" +
			"   503 Service Unavailable\n   | Party details temporarily unavailable\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks\n%s\nin:\n%s", want, out.String())
		}
	}
}

// Under overload, with a pacer, the sheddable callers yield: the
// throttle's refusals fall on them, and the concurrency limit gives its
// free slots to the critical ones first. The margins are wide, as the
// runs take their timing from the machine: under the race detector,
// four runs at once on a 2-core machine, the throttle refused no
// critical request and 37 to 58 sheddable ones, and served 37 to 56
// critical requests against 11 to 33 sheddable ones (5 more at the
// least); the limit served 68 to 100 against 0 to 17.
func TestOverload(t *testing.T) {
	var out bytes.Buffer
	results, err := overload(&out, loadPolicies(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", out.String())
	if len(results) != 3 {
		t.Fatalf("%d runs, want 3", len(results))
	}
	none, throttle, limit := results[0], results[1], results[2]
	if none.refused != [2]int{} {
		t.Errorf("%s: refused %v, want none: there is no pacer to refuse", none.pacer, none.refused)
	}
	if r := throttle; r.refused[1] < 4*r.refused[0]+10 || r.ok[0] < r.ok[1] {
		t.Errorf("%s: refused %d critical, %d sheddable requests, served %d critical, %d sheddable; want the sheddable refused first, and served less",
			r.pacer, r.refused[0], r.refused[1], r.ok[0], r.ok[1])
	}
	if r := limit; r.refused[1] < r.refused[0]+10 || r.ok[0] < 2*r.ok[1] {
		t.Errorf("%s: refused %d critical, %d sheddable requests, served %d critical, %d sheddable; want the sheddable refused first, and served less",
			r.pacer, r.refused[0], r.refused[1], r.ok[0], r.ok[1])
	}
}
