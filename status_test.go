package retryhttp

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/retryhttp/retryhttp/retrytest"
)

// decisionCase is one row of a decision table: a request, what the base
// answers to each attempt (the same step every time), and what must come
// of it.
type decisionCase struct {
	name   string
	method string
	header string         // idempotency header set by the caller, if any
	step   retrytest.Step // the answer to every attempt
	want   int            // attempts
	reason GiveUpReason   // of the *Error, for a step that is an error; "" if not retried
}

// runDecision sends one decision case through a Transport with 3 attempts
// and checks the attempts made and what RoundTrip returned.
func runDecision(t *testing.T, tc decisionCase) {
	t.Helper()
	base := retrytest.NewScriptTransport(tc.step, tc.step, tc.step)
	tr, _ := testTransport(base, WithMaxAttempts(3), WithBackoff(Constant(0)))
	req := newRequest(t, tc.method, "http://example.test/", nil)
	if tc.header != "" {
		req.Header.Set(tc.header, "k-1")
	}
	resp, err := tr.RoundTrip(req)
	if got := base.Count(); got != tc.want {
		t.Errorf("%s: %d attempts, want %d", tc.name, got, tc.want)
	}
	if tc.step.Err == nil {
		if err != nil {
			t.Fatalf("%s: RoundTrip: %v", tc.name, err)
		}
		resp.Body.Close()
		if want := status(tc.step); resp.StatusCode != want {
			t.Errorf("%s: status = %d, want %d", tc.name, resp.StatusCode, want)
		}
		return
	}
	if resp != nil {
		t.Fatalf("%s: RoundTrip returned a response and %v", tc.name, err)
	}
	var re *Error
	if !errors.As(err, &re) {
		t.Fatalf("%s: error %v is not a *retryhttp.Error", tc.name, err)
	}
	if re.Attempts != tc.want || re.Reason != tc.reason {
		t.Errorf("%s: Error{Attempts: %d, Reason: %q}, want {%d, %q}", tc.name, re.Attempts, re.Reason, tc.want, tc.reason)
	}
	if !errors.Is(err, tc.step.Err) && !errors.Is(err, errors.Unwrap(tc.step.Err)) {
		t.Errorf("%s: errors.Is(%v, %v) = false", tc.name, err, tc.step.Err)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("%d attempt", tc.want)) {
		t.Errorf("%s: error %q does not say how many attempts were made", tc.name, err)
	}
}

func status(s retrytest.Step) int {
	if s.Status == 0 {
		return 200
	}
	return s.Status
}

func answer(code int) retrytest.Step { return retrytest.Step{Reply: retrytest.Status(code)} }
func fail(err error) retrytest.Step  { return retrytest.Step{Err: err} }

func TestStatusDecisions(t *testing.T) {
	retried := []int{408, 429, 500, 502, 503, 504, 507, 509, 599}
	returned := []int{200, 201, 204, 301, 304, 400, 401, 403, 404, 409, 422, 501, 505, 506, 508, 510, 511}
	for _, code := range retried {
		runDecision(t, decisionCase{name: fmt.Sprintf("GET %d", code), method: "GET", step: answer(code), want: 3})
	}
	for _, code := range returned {
		runDecision(t, decisionCase{name: fmt.Sprintf("GET %d", code), method: "GET", step: answer(code), want: 1})
	}
}

func TestErrorDecisions(t *testing.T) {
	reset := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, tc := range []decisionCase{
		{"GET reset", "GET", "", fail(reset), 3, GiveUpAttempts},
		{"GET unexpected EOF", "GET", "", fail(io.ErrUnexpectedEOF), 3, GiveUpAttempts},
		{"GET EOF", "GET", "", fail(io.EOF), 3, GiveUpAttempts},
		{"GET refused", "GET", "", fail(refused), 3, GiveUpAttempts},
		{"POST reset", "POST", "", fail(reset), 1, GiveUpUnsafeMethod},
		{"POST EOF", "POST", "", fail(io.EOF), 1, GiveUpUnsafeMethod},
		{"POST refused (nothing sent)", "POST", "", fail(refused), 3, GiveUpAttempts},
		{"keyed POST reset", "POST", "Idempotency-Key", fail(reset), 3, GiveUpAttempts},
		{"GET unknown authority", "GET", "", fail(&wrappedTLSError{x509.UnknownAuthorityError{}}), 1, ""},
		{"GET hostname mismatch", "GET", "", fail(x509.HostnameError{Host: "x"}), 1, ""},
		{"GET no such host", "GET", "", fail(&net.DNSError{Err: "no such host", Name: "x", IsNotFound: true}), 1, ""},
		{"GET temporary DNS failure", "GET", "", fail(&net.DNSError{Err: "server misbehaving", Name: "x", IsTemporary: true}), 3, GiveUpAttempts},
	} {
		runDecision(t, tc)
	}
}

// wrappedTLSError wraps an error the way net/http wraps a TLS failure.
type wrappedTLSError struct{ err error }

func (e *wrappedTLSError) Error() string { return "tls: " + e.err.Error() }
func (e *wrappedTLSError) Unwrap() error { return e.err }

// A header net/http refuses makes an error that asking again cannot
// change: it is not retried. Through a real *http.Transport.
func TestInvalidHeaderNotRetried(t *testing.T) {
	srv := retrytest.NewServer()
	defer srv.Close()
	tr := New(nil, WithBackoff(Constant(0)))
	defer tr.CloseIdleConnections()
	for _, h := range []struct{ k, v string }{{"X-Bad", "a\nb"}, {"Bad Name", "v"}} {
		req := newRequest(t, "GET", srv.URL, nil)
		req.Header[h.k] = []string{h.v}
		_, err := tr.RoundTrip(req)
		var re *Error
		if !errors.As(err, &re) || re.Attempts != 1 || re.Reason != "" {
			t.Errorf("header %q: %q: %v; want an *Error after 1 attempt, not retried", h.k, h.v, err)
		}
	}
	if srv.Count() != 0 {
		t.Errorf("the server saw %d requests", srv.Count())
	}
}

// A body from GetBody that is not the length the request declares makes
// net/http refuse every attempt alike: not retried.
func TestLengthMismatchNotRetried(t *testing.T) {
	srv := retrytest.NewServer()
	defer srv.Close()
	tr := New(nil, WithBackoff(Constant(0)))
	defer tr.CloseIdleConnections()
	req := newRequest(t, "PUT", srv.URL, strings.NewReader("hello"))
	req.ContentLength = 10
	_, err := tr.RoundTrip(req)
	var re *Error
	if !errors.As(err, &re) || re.Attempts != 1 {
		t.Errorf("RoundTrip = %v; want an *Error after 1 attempt", err)
	}
}
