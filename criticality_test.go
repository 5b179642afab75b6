package retryhttp

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/retryhttp/retryhttp/retrytest"
)

// A policy's free text maps to three levels, as docs/policy.md says; a
// word that is none of them is refused with the nearest suggested.
func TestPolicyCriticalityText(t *testing.T) {
	for text, want := range map[string]Criticality{
		"required-for-case-detail": Critical,
		"Required_For_Checkout":    Critical,
		"critical":                 Critical,
		"CRITICAL_PLUS":            Critical,
		"default":                  "",
		"sheddable":                Sheddable,
		"sheddable_plus":           Sheddable,
		"optional-enrichment":      Sheddable,
		"degradable":               Sheddable,
		"best_effort":              Sheddable,
	} {
		got, err := policyCriticality(text)
		if err != nil || got != want {
			t.Errorf("policyCriticality(%q) = %q, %v; want %q", text, got, err, want)
		}
	}
	for text, hint := range map[string]string{"critcal": "did you mean critical?", "shedable": "did you mean sheddable?", "high": ""} {
		_, err := policyCriticality(text)
		if err == nil || !strings.Contains(err.Error(), hint) {
			t.Errorf("policyCriticality(%q): %v; want an error that says %q", text, err, hint)
		}
	}
	p, err := ParsePolicy([]byte(`{"dependency": "party", "criticality": "requird-for-case-detail"}`))
	if err == nil {
		_, err = p.Options()
	}
	if err == nil || !strings.Contains(err.Error(), "criticality") || !strings.Contains(err.Error(), "did you mean required?") {
		t.Errorf("a misspelt criticality: %v; want an error naming the field with the nearest word", err)
	}
}

// An invalid criticality panics in New, naming the option; given for one
// request, it fails that request, sending nothing.
func TestWithCriticalityRefusesOtherValues(t *testing.T) {
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), `WithCriticality("urgent")`) {
				t.Errorf("New with WithCriticality(\"urgent\"): panic %v, want one naming the option", r)
			}
		}()
		New(nil, WithCriticality("urgent"))
	}()
	base := retrytest.NewScriptTransport()
	tr, _ := testTransport(base)
	ctx := WithRequestOptions(context.Background(), WithCriticality("urgent"))
	_, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil).WithContext(ctx))
	if err == nil || base.Count() != 0 {
		t.Errorf("an invalid criticality for one request: %v, %d sent; want an error and nothing sent", err, base.Count())
	}
}

// WithCriticalityHeader puts each attempt's criticality on the wire: the
// Transport's, or the request's own; the metrics count by it.
func TestCriticalityHeaderAndMetrics(t *testing.T) {
	base := retrytest.NewScriptTransport(steps(503)...)
	m := NewMetrics()
	tr, _ := testTransport(base, WithCriticalityHeader("x-criticality"), WithCriticality(Sheddable), WithMetrics(m))
	resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ctx := WithRequestOptions(context.Background(), WithCriticality(Critical))
	resp, err = tr.RoundTrip(newRequest(t, "GET", "http://h/", nil).WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var got []string
	for _, a := range base.Attempts() {
		got = append(got, a.Header.Get("X-Criticality"))
	}
	if fmt.Sprint(got) != "[sheddable sheddable critical]" {
		t.Errorf("criticality headers %q; want the Transport's on both attempts of the first request, the request's own on the second", got)
	}
	if n := testutil.ToFloat64(m.requests.WithLabelValues(defaultName, "GET", "critical")); n != 1 {
		t.Errorf("requests_total{criticality=critical} = %v, want 1", n)
	}
	if n := testutil.ToFloat64(m.retries.WithLabelValues(defaultName, "503", "sheddable")); n != 1 {
		t.Errorf("retries_total{criticality=sheddable} = %v, want 1", n)
	}
	plain := retrytest.NewScriptTransport()
	tr, _ = testTransport(plain)
	resp, _ = tr.RoundTrip(newRequest(t, "GET", "http://h/", nil).WithContext(ctx))
	resp.Body.Close()
	if h := plain.Attempts()[0].Header.Get("X-Criticality"); h != "" {
		t.Errorf("without WithCriticalityHeader, the attempt carries %q", h)
	}
}
