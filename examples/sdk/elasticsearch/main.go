// Command elasticsearch wraps the Elasticsearch Go client (v8) with
// retryhttp. A search is a POST (POST /index/_search) that only reads: a
// policy declares it safe to repeat with semantic_safety.idempotent_requests, so that
// retryhttp retries it like a GET, while indexing a document (POST
// /index/_doc) is not retried once it reached the server. The client's
// own retries are off (DisableRetry), so that one layer retries. It runs
// against a fake cluster on loopback that answers each request's first
// try 503, and prints the attempts it saw.
//
//	cd examples/sdk && go run ./elasticsearch
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

	"github.com/elastic/go-elasticsearch/v8"
	"github.com/retryhttp/retryhttp"
)

func main() {
	if err := run(os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// policy is the search cluster's retry policy, as a team would write it.
const policy = `{
  "dependency": "search",
  "retry": {"max_attempts_total": 3, "initial_delay_ms": 10},
  "semantic_safety": {"idempotent_requests": ["POST /*/_search", "GET /*/_search", "POST /_search"]}
}`

// fakeCluster answers the first try of each path 503, then as
// Elasticsearch does.
type fakeCluster struct {
	mu   sync.Mutex
	seen map[string]int
}

func (f *fakeCluster) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	key := r.Method + " " + r.URL.Path
	f.mu.Lock()
	f.seen[key]++
	n := f.seen[key]
	f.mu.Unlock()
	w.Header().Set("X-Elastic-Product", "Elasticsearch") // the client checks it
	w.Header().Set("Content-Type", "application/json")
	if n == 1 {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":{"type":"unavailable_shards_exception"},"status":503}`)
		return
	}
	if strings.HasSuffix(r.URL.Path, "/_search") {
		io.WriteString(w, `{"took":1,"hits":{"total":{"value":1,"relation":"eq"},"hits":[{"_id":"1","_source":{"msg":"hi"}}]}}`)
		return
	}
	w.WriteHeader(http.StatusCreated)
	io.WriteString(w, `{"_id":"1","result":"created"}`)
}

func (f *fakeCluster) attempts(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen[key]
}

// newClient returns an Elasticsearch client whose requests go through
// retryhttp with the search policy, and whose own retries are off.
func newClient(addr string) (*elasticsearch.Client, error) {
	p, err := retryhttp.ParsePolicy([]byte(policy))
	if err != nil {
		return nil, err
	}
	opts, err := p.Options()
	if err != nil {
		return nil, err
	}
	return elasticsearch.NewClient(elasticsearch.Config{
		Addresses:    []string{addr},
		Transport:    retryhttp.New(nil, opts...),
		DisableRetry: true, // retryhttp retries; the client does not
	})
}

func run(w io.Writer) error {
	fake := &fakeCluster{seen: map[string]int{}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	es, err := newClient(srv.URL)
	if err != nil {
		return err
	}
	start := time.Now()
	res, err := es.Search(es.Search.WithIndex("logs"), es.Search.WithBody(strings.NewReader(`{"query":{"match_all":{}}}`)))
	if err != nil {
		return fmt.Errorf("search: %w", err)
	}
	res.Body.Close()
	fmt.Fprintf(w, "search (declared safe, 503 first): status %d after %d attempts in %v\n",
		res.StatusCode, fake.attempts("POST /logs/_search"), time.Since(start).Round(100*time.Millisecond))
	res, err = es.Index("logs", strings.NewReader(`{"msg":"hi"}`))
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	res.Body.Close()
	fmt.Fprintf(w, "index (a write, 503 first): status %d after %d attempt(s)\n", res.StatusCode, fake.attempts("POST /logs/_doc"))
	return nil
}
