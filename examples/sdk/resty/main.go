// Command resty wraps go-resty (v2.17) with retryhttp. resty retries only
// when asked (SetRetryCount), and then builds a new *http.Request for each
// try, so that nothing in the request says it is a retry: retryhttp sees
// it as the same request coming again right after it failed, counts it and
// warns, but cannot know it for the same operation. So: leave resty's
// retries off and let retryhttp retry; for a POST that the server
// deduplicates, set the Idempotency-Key on the resty request, which resty
// copies to every try. Against a fake API on loopback that answers 503
// once, a GET and a keyed POST each take 2 attempts.
//
//	cd examples/sdk && go run ./resty
package main

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"

	"github.com/go-resty/resty/v2"
	"github.com/google/uuid"
	"github.com/retryhttp/retryhttp"
)

func main() {
	if err := run(os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// fakeAPI answers the first request to each path 503, and keeps the keys
// each path was sent with.
type fakeAPI struct {
	mu   sync.Mutex
	keys map[string][]string
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	f.mu.Lock()
	f.keys[r.URL.Path] = append(f.keys[r.URL.Path], r.Header.Get("Idempotency-Key"))
	n := len(f.keys[r.URL.Path])
	f.mu.Unlock()
	if n == 1 {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"id":"ord_1"}`)
}

func (f *fakeAPI) sent(path string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.keys[path]...)
}

// newClient returns a resty client whose requests go through retryhttp;
// resty's own retries stay off (SetRetryCount(0), its default).
func newClient(baseURL string, opts ...retryhttp.Option) *resty.Client {
	return resty.New().
		SetBaseURL(baseURL).
		SetTransport(retryhttp.New(nil, opts...)).
		SetRetryCount(0) // retryhttp retries; resty does not
}

func run(w io.Writer) error {
	api := &fakeAPI{keys: map[string][]string{}}
	srv := httptest.NewServer(api)
	defer srv.Close()
	client := newClient(srv.URL, retryhttp.WithBackoff(retryhttp.Constant(0)))
	defer client.GetClient().CloseIdleConnections()

	resp, err := client.R().Get("/orders/ord_1")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "GET: %d after %d attempts\n", resp.StatusCode(), len(api.sent("/orders/ord_1")))

	resp, err = client.R().
		SetHeader("Idempotency-Key", uuid.NewString()). // resty copies it to every try
		SetBody(map[string]int{"amount": 100}).
		Post("/orders")
	if err != nil {
		return err
	}
	keys := api.sent("/orders")
	fmt.Fprintf(w, "POST: %d after %d attempts, one key: %v\n", resp.StatusCode(), len(keys), len(keys) == 2 && keys[0] == keys[1] && keys[0] != "")
	return nil
}

// alwaysFails answers every request 503.
type alwaysFails struct {
	mu sync.Mutex
	n  int
}

func (a *alwaysFails) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.n++
	a.mu.Unlock()
	w.WriteHeader(http.StatusServiceUnavailable)
}

func (a *alwaysFails) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n
}
