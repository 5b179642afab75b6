package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/retryhttp/retryhttp"
	"github.com/slack-go/slack"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A 429 that Slack sends for a call it did not run is retried after its
// Retry-After and the message is posted once; a 500 of the POST is not
// retried.
func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"answered 429 once: 2 sends, 1 message posted",
		"answered 500 once: 1 send, 0 posted, the error returned (true)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output %q, want %q", out.String(), want)
		}
	}
}

// Without the declaration, the 429 of a POST is the caller's: sent once.
func TestUndeclared429IsNotRetried(t *testing.T) {
	fake := &fakeSlack{first: http.StatusTooManyRequests}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	hc := &http.Client{Transport: retryhttp.New(nil)}
	_, _, err := slack.New("xoxb-example", slack.OptionHTTPClient(hc), slack.OptionAPIURL(srv.URL+"/api/")).PostMessage("C1")
	if sends, posts := fake.counts(); sends != 1 || posts != 0 || err == nil {
		t.Errorf("no declaration: %d sends, %d posted, error %v; want 1, 0 and the 429's error", sends, posts, err)
	}
}
