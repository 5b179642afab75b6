package main

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/elastic/go-elasticsearch/v8"
	"github.com/retryhttp/retryhttp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The search, declared safe by the policy, is retried; the write is sent
// once, and its 503 reaches the caller.
func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"search (declared safe, 503 first): status 200 after 2 attempts",
		"index (a write, 503 first): status 503 after 1 attempt(s)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// With the client's retries left on (its default), retryhttp sees the same
// request again after a 503 and warns, naming go-elasticsearch's switch.
func TestWarningNamesDisableRetry(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Elastic-Product", "Elasticsearch")
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	var logs bytes.Buffer
	es, err := elasticsearch.NewClient(elasticsearch.Config{
		Addresses: []string{srv.URL},
		Transport: retryhttp.New(nil, retryhttp.WithMaxAttempts(1), retryhttp.WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := es.Info(); err == nil {
		res.Body.Close()
	}
	if !strings.Contains(logs.String(), "go-elasticsearch retries too") || !strings.Contains(logs.String(), "DisableRetry: true") {
		t.Errorf("the warning does not name go-elasticsearch's switch:\n%s", logs.String())
	}
}
