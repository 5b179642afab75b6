package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
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
