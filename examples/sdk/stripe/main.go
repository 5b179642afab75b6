// Command stripe wraps the Stripe Go SDK's HTTP client with retryhttp and
// makes retryhttp the only layer that retries: the SDK's own network
// retries are set to 0, and retryhttp reuses the Idempotency-Key the SDK
// puts on every POST, so a payment whose answer was lost is retried and
// charged once.
//
// It runs against a fake Stripe API on loopback, and prints what the fake
// saw: first a payment whose first answer is lost, then a payment whose
// every answer is lost, with the SDK's retries off (retryhttp alone) and
// left on (two layers: their attempts multiply).
//
//	cd examples/sdk && go run ./stripe
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/stripe/stripe-go/v83"
)

func main() {
	if err := run(os.Stdout); err != nil {
		log.Fatal(err)
	}
}

var quiet = &stripe.LeveledLogger{Level: stripe.LevelNull}

// newStripe returns a Stripe client whose requests go through retryhttp,
// with the SDK's own retries off: one retry owner per path.
func newStripe(apiURL string, opts ...retryhttp.Option) *stripe.Client {
	httpClient := &http.Client{Transport: retryhttp.New(nil, opts...)}
	backends := stripe.NewBackendsWithConfig(&stripe.BackendConfig{
		HTTPClient:        httpClient,
		MaxNetworkRetries: stripe.Int64(0), // retryhttp retries; the SDK does not
		URL:               stripe.String(apiURL),
		LeveledLogger:     quiet,
	})
	return stripe.NewClient("sk_test_example", stripe.WithBackends(backends))
}

// fakeStripe is a fake of Stripe's POST /v1/payment_intents. It creates a
// payment intent per Idempotency-Key it has not seen, answers a key it has
// seen with the first answer, and can lose its answer (after creating the
// intent) to the first request or to every request.
type fakeStripe struct {
	loseFirst bool
	loseAll   bool

	mu      sync.Mutex
	keys    []string          // Idempotency-Key of each attempt
	intents map[string]string // key -> intent id
}

func (f *fakeStripe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/payment_intents" {
		http.NotFound(w, r)
		return
	}
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		return
	}
	key := r.Header.Get("Idempotency-Key")
	f.mu.Lock()
	f.keys = append(f.keys, key)
	lose := f.loseAll || f.loseFirst && len(f.keys) == 1
	id, seen := f.intents[key]
	if !seen || key == "" {
		id = fmt.Sprintf("pi_%d", len(f.intents)+1)
		f.intents[key] = id
	}
	f.mu.Unlock()

	if lose {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close() // created, but the answer is lost
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":%q,"object":"payment_intent","amount":4200,"currency":"eur","status":"requires_payment_method"}`, id)
}

// seen returns the keys of the attempts the fake received, and how many
// payment intents it created.
func (f *fakeStripe) seen() (keys []string, intents int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.keys...), len(f.intents)
}

// pay creates a payment intent with the given Idempotency-Key; with key ""
// the SDK makes one up, as it does for every POST.
func pay(ctx context.Context, sc *stripe.Client, key string) (*stripe.PaymentIntent, error) {
	params := &stripe.PaymentIntentCreateParams{
		Amount:   stripe.Int64(4200),
		Currency: stripe.String(stripe.CurrencyEUR),
	}
	if key != "" {
		params.SetIdempotencyKey(key)
	}
	return sc.V1PaymentIntents.Create(ctx, params)
}

func run(w io.Writer) error {
	ctx := context.Background()
	fast := retryhttp.WithBackoff(retryhttp.FullJitter(10*time.Millisecond, 100*time.Millisecond))

	// 1. The first answer is lost; retryhttp retries with the SDK's key.
	lost := &fakeStripe{loseFirst: true, intents: map[string]string{}}
	srv := httptest.NewServer(lost)
	pi, err := pay(ctx, newStripe(srv.URL, fast, retryhttp.WithIdempotencyKeys()), "order-42-payment")
	srv.Close()
	if err != nil {
		return fmt.Errorf("payment: %w", err)
	}
	keys, intents := lost.seen()
	fmt.Fprintf(w, "lost answer: %s created; the fake saw %d attempts with keys %q and created %d intent(s)\n",
		pi.ID, len(keys), keys, intents)

	// 2. Every answer is lost. With the SDK's retries off, one layer
	// retries. Left on (Stripe's default is 2; it retries network errors,
	// not 5xx answers), the layers multiply: 3 × 4 = 12 attempts, were it
	// not for retryhttp's budget, which withdraws its floor once 4 attempts
	// in a row have failed: each of the SDK's retries then gets its own
	// attempt alone, its retry held and given up (4 + 1 + 1), 6 in all.
	for _, sdkRetries := range []int64{0, 2} {
		down := &fakeStripe{loseAll: true, intents: map[string]string{}}
		srv := httptest.NewServer(down)
		httpClient := &http.Client{Transport: retryhttp.New(nil, fast)}
		sc := stripe.NewClient("sk_test_example", stripe.WithBackends(stripe.NewBackendsWithConfig(&stripe.BackendConfig{
			HTTPClient:        httpClient,
			MaxNetworkRetries: stripe.Int64(sdkRetries),
			URL:               stripe.String(srv.URL),
			LeveledLogger:     quiet,
		})))
		_, err := pay(ctx, sc, "order-43-payment")
		srv.Close()
		if err == nil {
			return fmt.Errorf("a payment whose every answer was lost succeeded")
		}
		keys, intents := down.seen()
		fmt.Fprintf(w, "every answer lost, SDK retries %d + retryhttp (4 attempts): the fake saw %d attempts for one call, created %d intent(s)\n",
			sdkRetries, len(keys), intents)
	}
	return nil
}
