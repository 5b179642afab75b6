package retryhttp

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retrytest"
)

// staticTransport answers every request with the same response and
// allocates nothing, so that what a test measures is the Transport's own.
type staticTransport struct{ resp *http.Response }

func (s *staticTransport) RoundTrip(*http.Request) (*http.Response, error) { return s.resp, nil }

type nopBody struct{}

func (nopBody) Read([]byte) (int, error) { return 0, io.EOF }
func (nopBody) Close() error             { return nil }

// The success path of RoundTrip, a GET that succeeds first time, must not
// allocate: not with the defaults (budget included), not with metrics.
func TestSuccessPathAllocatesNothing(t *testing.T) {
	resp := withBody(respond(200), nopBody{}, 0)
	// findInner treats an unknown base as one that may hide a Transport;
	// the success-path promise is for a plain base, as in production.
	plain := func(o ...Option) *Transport {
		tr := New(&staticTransport{resp}, o...)
		tr.c.markOwner = false
		for _, oc := range tr.c.opConfigs {
			oc.markOwner = false
		}
		return tr
	}
	tests := []struct {
		name string
		tr   *Transport
	}{
		{"defaults", plain()},
		{"metrics", plain(WithMetrics(NewMetrics()), WithLogger(nil))},
		{"no budget", plain(WithoutBudget())},
		{"no breaker", plain(WithoutRetryBreaker())},
		{"max elapsed", plain(WithMaxElapsed(time.Minute))},
		{"a policy's operations", plain(operations(t, "POST /a/*", "GET /path"))}, // the second matches
	}
	req, _ := http.NewRequest("GET", "http://example.test/path", nil)
	upper, _ := http.NewRequest("GET", "http://Example.TEST:80/path", nil) // the same host, spelt otherwise
	for _, tt := range tests {
		tt.tr.RoundTrip(req) // warm the metric series
		if allocs := testing.AllocsPerRun(100, func() { tt.tr.RoundTrip(upper) }); allocs != 0 {
			t.Errorf("%s: GET to a host spelt in capitals allocates %v times per request, want 0", tt.name, allocs)
		}
		allocs := testing.AllocsPerRun(100, func() {
			if r, err := tt.tr.RoundTrip(req); err != nil || r.StatusCode != 200 {
				t.Fatal(r, err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: GET success path allocates %v times per request, want 0", tt.name, allocs)
		}
	}
}

func TestSuccessPathSendsCallersRequest(t *testing.T) {
	var got *http.Request
	base := retrytest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
		got = r
		return withBody(respond(200), io.NopCloser(strings.NewReader("")), 0), nil
	})
	tr := New(&http.Transport{})
	tr.c.base = base // a plain base, as far as findInner knows
	req, _ := http.NewRequest("GET", "http://example.test/", nil)
	if _, err := tr.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	if got != req {
		t.Error("a GET with the defaults was copied for its first attempt; it should be sent as is")
	}
}

// operations returns the option of a policy whose operations match each
// of the routes, each with attempts of its own.
func operations(t *testing.T, routes ...string) Option {
	t.Helper()
	docs := []Policy{mustPolicy(t, `{"dependency": "d"}`)}
	for i, r := range routes {
		docs = append(docs, mustPolicy(t, fmt.Sprintf(`{"dependency": "d", "match": %q, "retry": {"max_attempts_total": %d}}`, r, 2+i)))
	}
	ps, err := NewPolicies(docs...)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := ps["d"].Options()
	if err != nil || len(opts) != 2 || opts[0].optionName() != "dependency" {
		t.Fatalf("operations: %d options, %v; want the dependency's name and its operations", len(opts), err)
	}
	return opts[1]
}
