package main

import (
	"bytes"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-resty/resty/v2"
	"github.com/retryhttp/retryhttp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"GET: 200 after 2 attempts", "POST: 200 after 2 attempts, one key: true"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output %q, want %q", out.String(), want)
		}
	}
}

// resty's retries turned on (SetRetryCount, with the retry condition on
// 5xx that users add) multiply with retryhttp's: against an API that
// always fails, 3 tries over 3 attempts send 9. retryhttp sees
// resty's tries as the same request again, and its warning names the fix.
func TestRestyRetriesSeen(t *testing.T) {
	api := &alwaysFails{}
	srv := httptest.NewServer(api)
	defer srv.Close()
	var logs bytes.Buffer
	client := newClient(srv.URL, retryhttp.WithBackoff(retryhttp.Constant(0)), retryhttp.WithMaxAttempts(3),
		retryhttp.WithoutBudget(), retryhttp.WithoutRetryBreaker(),
		retryhttp.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil)))).
		SetRetryCount(2).SetRetryWaitTime(1).SetRetryMaxWaitTime(1).
		AddRetryCondition(func(r *resty.Response, err error) bool { return err != nil || r.StatusCode() >= 500 })
	defer client.GetClient().CloseIdleConnections()
	client.R().Get("/orders/ord_1")
	if n := api.count(); n != 9 {
		t.Errorf("%d requests reached the API, want 3 × 3 = 9", n)
	}
	if !strings.Contains(logs.String(), `"source":"repeat"`) || !strings.Contains(logs.String(), "SetRetryCount(0)") {
		t.Errorf("no warning naming resty's fix:\n%s", logs.String())
	}
}
