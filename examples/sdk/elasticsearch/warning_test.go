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
)

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
