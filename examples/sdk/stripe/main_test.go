package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/stripe/stripe-go/v83"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var fast = retryhttp.WithBackoff(retryhttp.Constant(time.Millisecond))

// The lost answer is retried by retryhttp with the key the SDK sent, even
// with WithIdempotencyKeys on (it never replaces a caller's key), and the
// fake creates one payment intent.
func TestLostAnswerRetriedWithTheSDKsKey(t *testing.T) {
	f := &fakeStripe{loseFirst: true, intents: map[string]string{}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	pi, err := pay(context.Background(), newStripe(srv.URL, fast, retryhttp.WithIdempotencyKeys()), "order-42-payment")
	if err != nil {
		t.Fatal(err)
	}
	keys, intents := f.seen()
	if len(keys) != 2 || keys[0] != "order-42-payment" || keys[1] != "order-42-payment" {
		t.Errorf("keys = %q, want the SDK's key on both attempts", keys)
	}
	if intents != 1 || pi.ID != "pi_1" {
		t.Errorf("%d intents, returned %q; want 1 intent, pi_1", intents, pi.ID)
	}
}

// Without an explicit key the SDK makes one up for every POST; retryhttp
// retries with it rather than with a key of its own.
func TestSDKGeneratedKeyIsReused(t *testing.T) {
	f := &fakeStripe{loseFirst: true, intents: map[string]string{}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	if _, err := pay(context.Background(), newStripe(srv.URL, fast), ""); err != nil {
		t.Fatal(err)
	}
	keys, intents := f.seen()
	if len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] || intents != 1 {
		t.Errorf("keys = %q, %d intents; want one SDK key twice and 1 intent", keys, intents)
	}
}

func TestRunShowsLayersMultiplying(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`lost answer: pi_1 created; the fake saw 2 attempts with keys ["order-42-payment" "order-42-payment"] and created 1 intent(s)`,
		"every answer lost, SDK retries 0 + retryhttp (4 attempts): the fake saw 4 attempts for one call, created 1 intent(s)",
		// 3 × 4 = 12 without the budget; its floor is withdrawn after 4
		// failures in a row, so each SDK retry gets one attempt: 4 + 1 + 1.
		"every answer lost, SDK retries 2 + retryhttp (4 attempts): the fake saw 6 attempts for one call, created 1 intent(s)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// Stripe marks an answer final with Stripe-Should-Retry: false (a 500 it
// replays for the key, say): the SDK alone sends it once, and so does
// retryhttp alone, though a keyed POST's 500 is otherwise worth retrying.
func TestShouldRetryFalseIsFinal(t *testing.T) {
	var mu sync.Mutex
	sends := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sends++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Stripe-Should-Retry", "false")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `{"error":{"type":"api_error","message":"An unknown error occurred"}}`)
	}))
	defer srv.Close()
	sdkAlone := stripe.NewClient("sk_test_example", stripe.WithBackends(stripe.NewBackendsWithConfig(&stripe.BackendConfig{
		HTTPClient: &http.Client{}, MaxNetworkRetries: stripe.Int64(2), URL: stripe.String(srv.URL), LeveledLogger: quiet,
	})))
	for _, c := range []struct {
		name string
		sc   *stripe.Client
	}{{"the SDK alone (2 retries)", sdkAlone}, {"retryhttp alone", newStripe(srv.URL, fast)}} {
		mu.Lock()
		sends = 0
		mu.Unlock()
		if _, err := pay(context.Background(), c.sc, "order-44-payment"); err == nil {
			t.Fatalf("%s: a 500 succeeded", c.name)
		}
		mu.Lock()
		if sends != 1 {
			t.Errorf("%s: %d sends, want 1", c.name, sends)
		}
		mu.Unlock()
	}
}

// With the SDK's retries left on, retryhttp sees its key again and warns,
// naming stripe-go's switch.
func TestWarningNamesMaxNetworkRetries(t *testing.T) {
	f := &fakeStripe{loseAll: true, intents: map[string]string{}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	var logs bytes.Buffer
	httpClient := &http.Client{Transport: retryhttp.New(nil, fast, retryhttp.WithMaxAttempts(1),
		retryhttp.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))}
	sc := stripe.NewClient("sk_test_example", stripe.WithBackends(stripe.NewBackendsWithConfig(&stripe.BackendConfig{
		HTTPClient: httpClient, MaxNetworkRetries: stripe.Int64(1), URL: stripe.String(srv.URL), LeveledLogger: quiet,
	})))
	if _, err := pay(context.Background(), sc, "order-45-payment"); err == nil {
		t.Fatal("a payment whose every answer was lost succeeded")
	}
	if !strings.Contains(logs.String(), "stripe-go retries too") || !strings.Contains(logs.String(), "MaxNetworkRetries: stripe.Int64(0)") {
		t.Errorf("the warning does not name stripe-go's switch:\n%s", logs.String())
	}
}
