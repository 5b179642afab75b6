package retryhttp

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp/retrytest"
)

// A request that ends on its context deadline, or after per-attempt
// timeouts, still looks like a timeout to the checks that work with a bare
// *http.Transport: (*url.Error).Timeout, os.IsTimeout and net.Error.
func TestErrorKeepsTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hang := retrytest.Step{Reply: retrytest.Reply{Fault: retrytest.Hang}}
		cases := []struct {
			name string
			tr   *Transport
			ctx  func() (context.Context, context.CancelFunc)
		}{
			{"context deadline", New(retrytest.NewScriptTransport(hang), WithoutBudget()),
				func() (context.Context, context.CancelFunc) {
					return context.WithTimeout(context.Background(), 100*time.Millisecond)
				}},
			{"per-attempt timeouts", New(retrytest.NewScriptTransport(hang, hang), WithMaxAttempts(2), WithoutBudget(),
				WithBackoff(Constant(0)), WithPerAttemptTimeout(10*time.Millisecond)),
				func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }},
		}
		for _, tc := range cases {
			ctx, cancel := tc.ctx()
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://h/", nil)
			_, err := (&http.Client{Transport: tc.tr}).Do(req)
			cancel()
			var ue *url.Error
			var ne net.Error
			if !errors.As(err, &ue) || !ue.Timeout() || !os.IsTimeout(ue.Err) || !errors.As(err, &ne) || !ne.Timeout() {
				t.Errorf("%s: %v: url.Error.Timeout, os.IsTimeout or net.Error.Timeout is false", tc.name, err)
			}
		}
	})
}

// An error that is not a timeout does not say it is one.
func TestErrorNotTimeout(t *testing.T) {
	e := &Error{Attempts: 1, Err: errors.New("boom")}
	if e.Timeout() {
		t.Errorf("%v: Timeout is true; want false", e)
	}
}

// The error text says why in words, and how many attempts were made.
func TestErrorText(t *testing.T) {
	e := &Error{Attempts: 4, Reason: GiveUpAttempts, Err: errors.New("reset")}
	if got, want := e.Error(), "retryhttp: gave up after 4 attempts, no attempts left: reset"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	for _, r := range giveUpReasons {
		if p := r.phrase(); p == string(r) || strings.Contains(p, "_") {
			t.Errorf("reason %q has no phrase of its own: %q", r, p)
		}
	}
}
