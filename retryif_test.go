package retryhttp

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/retryhttp/retryhttp/retrytest"
)

// tryAgain retries a 403 whose body says "try again", reading the body.
func tryAgain(resp *http.Response, err error) Decision {
	if resp != nil && resp.StatusCode == 403 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 9))
		if string(b) == "try again" {
			return Retry
		}
	}
	return NoOpinion
}

func TestRetryIfWidens(t *testing.T) {
	forbidden := retrytest.Step{Reply: retrytest.Reply{Status: 403, Body: "try again later"}}
	base := retrytest.NewScriptTransport(forbidden, forbidden)
	tr, _ := testTransport(base, WithRetryIf(tryAgain), WithBackoff(Constant(0)))
	resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if base.Count() != 3 || resp.StatusCode != 200 {
		t.Errorf("%d attempts, status %d; want the 403s retried, then 200", base.Count(), resp.StatusCode)
	}
	if base.OpenBodies() != 1 {
		t.Errorf("%d bodies open, want only the returned one: the retried 403s are drained and closed", base.OpenBodies())
	}
}

// The caller of a response that the condition read and let through still
// reads the whole body, from its first byte.
func TestRetryIfReadBodyKeptForCaller(t *testing.T) {
	forbidden := retrytest.Step{Reply: retrytest.Reply{Status: 403, Body: "try again later"}}
	tr, _ := testTransport(retrytest.NewScriptTransport(forbidden), WithMaxAttempts(1), WithRetryIf(tryAgain))
	resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(b) != "try again later" {
		t.Errorf("caller read %q, %v; want the whole body", b, err)
	}
}

func TestRetryIfNarrows(t *testing.T) {
	mine := errors.New("my own error")
	base := retrytest.NewScriptTransport(retrytest.Step{Err: mine}, answer(503))
	never := func(resp *http.Response, err error) Decision {
		if errors.Is(err, mine) || (resp != nil && resp.StatusCode == 503) {
			return DontRetry
		}
		return NoOpinion
	}
	tr, _ := testTransport(base, WithRetryIf(never), WithBackoff(Constant(0)))
	_, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
	var re *Error
	if !errors.Is(err, mine) || !errors.As(err, &re) || re.Reason != "" || base.Count() != 1 {
		t.Errorf("RoundTrip = %v after %d attempts; want my error, not retried, after 1", err, base.Count())
	}
	resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
	if err != nil || resp.StatusCode != 503 || base.Count() != 2 {
		t.Errorf("RoundTrip = %v, %v after %d attempts; want the 503 returned at once", resp, err, base.Count())
	}
	resp.Body.Close()
}

// A condition that says Retry cannot make a POST without a key go twice
// once it reached the server: the method gate stays.
func TestRetryIfCannotLiftMethodGate(t *testing.T) {
	always := func(*http.Response, error) Decision { return Retry }
	for _, step := range []retrytest.Step{answer(400), fail(io.ErrUnexpectedEOF)} {
		base := retrytest.NewScriptTransport(step, step)
		m := NewMetrics()
		tr, _ := testTransport(base, WithRetryIf(always), WithBackoff(Constant(0)), WithMetrics(m))
		resp, err := tr.RoundTrip(newRequest(t, "POST", "http://h/", strings.NewReader("pay")))
		if resp != nil {
			resp.Body.Close()
		}
		if base.Count() != 1 {
			t.Errorf("POST without a key: %d attempts, want 1 (err %v)", base.Count(), err)
		}
		if got := testutilCounter(m, GiveUpUnsafeMethod); got != 1 {
			t.Errorf("unsafe_method give-ups = %v, want 1", got)
		}
	}
}
