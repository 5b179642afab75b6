package retryhttp

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/retryhttp/retryhttp/retrytest"
)

func TestLayeredRetries(t *testing.T) {
	m := NewMetrics()
	var logs bytes.Buffer
	tr, _ := testTransport(retrytest.NewScriptTransport(), WithMetrics(m), WithAttemptHeader("Retry-Attempt", "{attempt}"),
		WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	send := func(method string, h map[string]string) {
		req := newRequest(t, method, "http://h/", nil)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	send("GET", map[string]string{"amz-sdk-request": "attempt=1; max=3"})
	send("GET", map[string]string{"amz-sdk-request": "attempt=2; max=3"})
	send("GET", map[string]string{"amz-sdk-request": "attempt=3; max=3"})
	send("POST", map[string]string{"X-Stainless-Retry-Count": "0"})
	send("POST", map[string]string{"X-Stainless-Retry-Count": "1"})
	send("GET", map[string]string{"grpc-previous-rpc-attempts": "2"})
	send("GET", map[string]string{"Retry-Attempt": "1"}) // a first attempt above: no layer
	send("GET", map[string]string{"Retry-Attempt": "2"})
	send("POST", map[string]string{"Idempotency-Key": "k-1"})
	send("POST", map[string]string{"Idempotency-Key": "k-1"})
	send("POST", map[string]string{"Idempotency-Key": "k-2"})
	want := map[string]float64{"aws-sdk": 2, "stainless-sdk": 1, "grpc": 1, "retryhttp": 1, "idempotency-key": 1}
	for source, n := range want {
		if got := testutil.ToFloat64(m.layered.WithLabelValues(defaultName, source)); got != n {
			t.Errorf("layered retries from %s = %v, want %v", source, got, n)
		}
	}
	// One Warn record per source, naming it and what to do.
	records := strings.Count(logs.String(), `"msg":"retryhttp: a layer above retries too"`)
	if records != len(want) || !strings.Contains(logs.String(), "aws.NopRetryer") {
		t.Errorf("%d warnings, want one per source (%d):\n%s", records, len(want), logs.String())
	}
}

// A request with headers, none of them a retry's mark, costs nothing more.
func TestLayeredNoAllocation(t *testing.T) {
	resp := withBody(respond(200), nopBody{}, 0)
	tr := New(&staticTransport{resp}, WithMetrics(NewMetrics()))
	tr.c.markOwner = false
	req, _ := http.NewRequest("GET", "http://example.test/", nil)
	req.Header.Set("User-Agent", "sdk/1.0")
	req.Header.Set("Authorization", "Bearer x")
	req.Header.Set("amz-sdk-invocation-id", "abc")
	tr.RoundTrip(req)
	if a := testing.AllocsPerRun(100, func() { tr.RoundTrip(req) }); a != 0 {
		t.Errorf("GET with ordinary headers allocates %v times, want 0", a)
	}
}

// A redirect's hop carries the caller's key (http.Client copies it) but is
// no retry; a key seen again after more than a minute is no retry either.
func TestLayeredKeyNotOnRedirectsOrLater(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/pay" {
			http.Redirect(w, r, "/done", http.StatusSeeOther)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	m := NewMetrics()
	client := &http.Client{Transport: New(nil, WithMetrics(m))}
	req := newRequest(t, "POST", srv.URL+"/pay", strings.NewReader("x"))
	req.Header.Set(HeaderIdempotencyKey, "order-1")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if n := sumCounter(t, m, "retryhttp_layered_retries_total"); n != 0 {
		t.Errorf("a 303 hop counted as %v layered retries, want 0", n)
	}
}

// A layer above that says nothing of its retries is seen by what it sends:
// the same request again, right after it ended on a failure worth
// retrying, whether it is the same *http.Request sent again
// (go-retryablehttp's way, through an http.Client with a Timeout, which
// copies it) or a new one built for each try (go-resty's way). Nothing of
// the first is given to the second: each call gets a key of its own,
// since a request sent again may carry another operation.
func TestLayeredRepeatWithoutHeader(t *testing.T) {
	var keys []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get(HeaderIdempotencyKey))
		mu.Unlock()
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(503)
	}))
	defer srv.Close()
	m := NewMetrics()
	var logs bytes.Buffer
	tr := New(nil, WithMetrics(m), WithIdempotencyKeys(), WithMaxAttempts(1),
		WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: time.Minute}

	// go-retryablehttp's way: one request, its body reset, sent 3 times.
	req := newRequest(t, "POST", srv.URL+"/v1/pki/issue/web", nil)
	for range 3 {
		req.Body, req.ContentLength = io.NopCloser(strings.NewReader("{}")), 2
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	// go-resty's way: a new request for each try.
	for range 2 {
		resp, err := client.Do(newRequest(t, "POST", srv.URL+"/orders", strings.NewReader("{}")))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	// A different request is no repeat.
	resp, _ := client.Do(newRequest(t, "POST", srv.URL+"/other", strings.NewReader("{}")))
	resp.Body.Close()

	seen := map[string]bool{}
	for _, k := range keys {
		if k == "" || seen[k] {
			t.Errorf("keys %q: want one of its own for each call", keys)
			break
		}
		seen[k] = true
	}
	if got := testutil.ToFloat64(m.layered.WithLabelValues(defaultName, "repeat")); got != 3 {
		t.Errorf("repeats counted %v, want 3 (2 + 1)", got)
	}
	// These requests show no SDK: the warning points to each SDK's switch.
	if !strings.Contains(logs.String(), `"source":"repeat"`) || !strings.Contains(logs.String(), "docs/recipes.md names each SDK's switch") {
		t.Errorf("no warning naming the fix:\n%s", logs.String())
	}
}

// A layer above's retry is counted once, by the mark that says so: a
// keyed POST sent again after it failed is the key's, not also a repeat.
func TestLayeredRetryCountedOnce(t *testing.T) {
	m := NewMetrics()
	tr, _ := testTransport(retrytest.NewScriptTransport(steps(503, 503)...), WithMetrics(m), WithMaxAttempts(1))
	for range 2 {
		req := newRequest(t, "POST", "http://h/v1/charges", strings.NewReader("{}"))
		req.Header.Set(HeaderIdempotencyKey, "k-1")
		if resp, err := tr.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	}
	key := testutil.ToFloat64(m.layered.WithLabelValues(defaultName, "idempotency-key"))
	repeat := testutil.ToFloat64(m.layered.WithLabelValues(defaultName, "repeat"))
	if key != 1 || repeat != 0 {
		t.Errorf("one retry of the layer above counted %v (key) + %v (repeat); want 1 + 0", key, repeat)
	}
}
