package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-github/v84/github"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Both of GitHub's limits, sent as 403s, are waited out and retried.
func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"primary rate limit: octo/repo after 2 attempts, the retry true later",
		"secondary rate limit: octo/repo after 2 attempts, the retry true later",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output %q, want %q", out.String(), want)
		}
	}
}

// A 403 that is not a throttle is final, and go-github reports it as
// such; a limit that resets beyond WithMaxRetryAfter comes back at once,
// for go-github to report as a RateLimitError.
func TestForbiddenAndLongLimits(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/repos/octo/private" {
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(`{"message":"Must have admin rights to Repository."}`))
			return
		}
		w.Header().Set("X-RateLimit-Limit", "5000")
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Reset", "4102444800") // 2100
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte(`{"message":"API rate limit exceeded"}`))
	}))
	defer srv.Close()
	client := newClient(srv.URL)
	defer client.Client().CloseIdleConnections()
	_, resp, err := client.Repositories.Get(context.Background(), "octo", "private")
	var ge *github.ErrorResponse
	if !errors.As(err, &ge) || resp.StatusCode != 403 {
		t.Errorf("a plain 403: %v, want go-github's ErrorResponse", err)
	}
	_, _, err = client.Repositories.Get(context.Background(), "octo", "busy")
	var rl *github.RateLimitError
	if !errors.As(err, &rl) {
		t.Errorf("a limit resetting in 2100: %v, want a RateLimitError at once", err)
	}
}
