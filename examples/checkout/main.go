// Command checkout shows what an idempotency key is for. A fake payment
// provider charges the card, then loses its answer to the first attempt
// (the connection drops after the charge). The checkout sends the same
// POST three ways and prints, side by side, what the provider saw:
//
//   - retryhttp with WithIdempotencyKeys(): the POST carries a key, is
//     retried with the same key, and the provider charges once;
//
//   - retryhttp without it: the POST reached the provider, so it is not
//     retried; the checkout gets the failure, not a double charge;
//
//   - a naive loop that retries any error: the customer is charged twice.
//
//     go run ./examples/checkout
package main

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/retryhttp/retryhttp"
)

func main() {
	if err := run(os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// provider is a fake payment provider. It charges every POST /charges
// whose Idempotency-Key it has not seen (or that has none), answers a
// repeated key with the first answer, and drops the connection, after
// charging, on the first request it receives.
type provider struct {
	mu       sync.Mutex
	attempts int
	keys     []string          // the Idempotency-Key of each attempt, "" if none
	answers  map[string]string // key -> charge id
	charges  int
}

func (p *provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/charges" {
		http.NotFound(w, r)
		return
	}
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		return
	}
	key := r.Header.Get("Idempotency-Key")

	p.mu.Lock()
	p.attempts++
	p.keys = append(p.keys, key)
	id, seen := p.answers[key]
	if !seen || key == "" {
		p.charges++
		id = fmt.Sprintf("ch_%d", p.charges)
		if key != "" {
			p.answers[key] = id
		}
	}
	lose := p.attempts == 1
	p.mu.Unlock()

	if lose {
		// Charged, but the answer is lost: the connection drops before a
		// byte of the response is written.
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":%q,"status":"succeeded"}`, id)
}

// outcome is what one way of sending the checkout's POST ended with.
type outcome struct {
	name     string
	attempts int // POSTs the provider received
	keys     int // distinct non-empty Idempotency-Keys among them
	charges  int
	result   string // the status and body the checkout got, or its error
}

// checkout pays for an order through client, against a fresh provider.
func checkout(name string, client *http.Client) outcome {
	p := &provider{answers: map[string]string{}}
	srv := httptest.NewServer(p)
	defer srv.Close()
	defer client.CloseIdleConnections()

	res := pay(client, srv.URL+"/charges")
	p.mu.Lock()
	defer p.mu.Unlock()
	distinct := map[string]bool{}
	for _, k := range p.keys {
		if k != "" {
			distinct[k] = true
		}
	}
	return outcome{name: name, attempts: p.attempts, keys: len(distinct), charges: p.charges, result: res}
}

func pay(client *http.Client, url string) string {
	resp, err := client.Post(url, "application/json", strings.NewReader(`{"amount":4200,"currency":"eur"}`))
	if err != nil {
		return "error: " + shorten(err.Error())
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "error: " + shorten(err.Error())
	}
	return resp.Status + " " + string(body)
}

// shorten drops the URL from a *url.Error's text, so that the table fits.
func shorten(s string) string {
	if i := strings.LastIndex(s, ": "); i >= 0 {
		return s[i+2:]
	}
	return s
}

// naive retries any error up to 3 times, 10 ms apart, as many hand-written
// loops do. It is here to show what retryhttp refuses to do.
type naive struct{ base http.RoundTripper }

func (n naive) RoundTrip(req *http.Request) (*http.Response, error) {
	var err error
	for range 3 {
		r := req.Clone(req.Context())
		if req.GetBody != nil {
			if r.Body, err = req.GetBody(); err != nil {
				return nil, err
			}
		}
		var resp *http.Response
		if resp, err = n.base.RoundTrip(r); err == nil {
			return resp, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil, err
}

func run(w io.Writer) error {
	// A POST through keyed carries an Idempotency-Key, the same on every
	// attempt, so it may be retried; through plain, it is not retried once
	// it reached the server.
	keyed := &http.Client{Transport: retryhttp.New(nil, retryhttp.WithIdempotencyKeys())}
	plain := &http.Client{Transport: retryhttp.New(nil)}
	outcomes := []outcome{
		checkout("retryhttp + WithIdempotencyKeys()", keyed),
		checkout("retryhttp, no keys", plain),
		checkout("naive retry loop", &http.Client{Transport: naive{http.DefaultTransport.(*http.Transport).Clone()}}),
	}
	fmt.Fprintln(w, "The provider charges, then loses its answer to the first attempt.")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%-36s %8s %5s %7s  %s\n", "", "attempts", "keys", "charges", "the checkout got")
	for _, o := range outcomes {
		fmt.Fprintf(w, "%-36s %8d %5d %7d  %s\n", o.name, o.attempts, o.keys, o.charges, o.result)
	}
	return nil
}
