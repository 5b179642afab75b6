// Command elasticsearch wraps the Elasticsearch Go client (v8) with
// retryhttp. The client sends its reads as POSTs (POST /index/_search,
// _count, _msearch, _mget and the others): a policy declares every one of
// them safe to repeat with semantic_safety.idempotent_requests, so that
// retryhttp retries them like GETs. A write (POST /index/_doc, a bulk) is
// not retried once it reached the server, since a repeat may apply it
// twice; a bulk made safe to repeat (each action names its document's _id)
// is declared so for its own call with retryhttp.Idempotent. The client's
// own retries are off (DisableRetry), so that one layer retries. It runs
// against a fake cluster on loopback that answers each request's first try
// 503, and prints the attempts it saw.
//
//	cd examples/sdk && go run ./elasticsearch
package main

import (
	"context"
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
	"github.com/elastic/go-elasticsearch/v8/esapi"
	"github.com/retryhttp/retryhttp"
)

func main() {
	if err := run(os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// policy is the search cluster's retry policy, as a team would write it:
// the reads that the client sends as POSTs, and that keep nothing on the
// cluster, are declared safe to repeat.
const policy = `{
  "dependency": "search",
  "retry": {"max_attempts_total": 3, "initial_delay_ms": 10},
  "semantic_safety": {"idempotent_requests": [
    "POST /_search", "POST /*/_search", "POST /_search/template", "POST /*/_search/template",
    "POST /_msearch", "POST /*/_msearch", "POST /_msearch/template", "POST /*/_msearch/template",
    "POST /_count", "POST /*/_count", "POST /_mget", "POST /*/_mget", "POST /*/_explain/*",
    "POST /_field_caps", "POST /*/_field_caps", "POST /*/_termvectors", "POST /*/_termvectors/*",
    "POST /_mtermvectors", "POST /*/_mtermvectors", "POST /_rank_eval", "POST /*/_rank_eval",
    "POST /_validate/query", "POST /*/_validate/query", "POST /_search_shards", "POST /*/_search_shards",
    "POST /*/_knn_search", "POST /*/_terms_enum", "POST /_render/template", "POST /_render/template/*",
    "POST /*/_mvt/*/*/*/*", "POST /_analyze", "POST /*/_analyze", "POST /_query"
  ]}
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
	switch {
	case n == 1:
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":{"type":"unavailable_shards_exception"},"status":503}`)
	case strings.HasSuffix(r.URL.Path, "/_search"):
		io.WriteString(w, `{"took":1,"hits":{"total":{"value":1,"relation":"eq"},"hits":[{"_id":"1","_source":{"msg":"hi"}}]}}`)
	case strings.HasSuffix(r.URL.Path, "/_bulk"):
		io.WriteString(w, `{"took":1,"errors":false,"items":[{"create":{"_id":"log-1","status":201}},{"create":{"_id":"log-2","status":201}}]}`)
	default:
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"_id":"1","result":"created"}`)
	}
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

// createLogs is a bulk that is safe to repeat: each action creates a
// document by its own _id, so that a repeat writes none twice (the
// cluster answers a document the first try created 409 on its item).
const createLogs = `{"create":{"_index":"logs","_id":"log-1"}}
{"msg":"hi"}
{"create":{"_index":"logs","_id":"log-2"}}
{"msg":"ho"}
`

// safeBulk sends a bulk that is safe to repeat (every action a create, or
// an index, by an explicit _id), declared so for this call alone.
func safeBulk(ctx context.Context, es *elasticsearch.Client, body io.Reader) (*esapi.Response, error) {
	return es.Bulk(body, es.Bulk.WithContext(retryhttp.Idempotent(ctx)))
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
	if res, err = safeBulk(context.Background(), es, strings.NewReader(createLogs)); err != nil {
		return fmt.Errorf("bulk: %w", err)
	}
	res.Body.Close()
	fmt.Fprintf(w, "bulk of creates by _id (declared safe for its call, 503 first): status %d after %d attempts\n",
		res.StatusCode, fake.attempts("POST /_bulk"))
	if res, err = es.Index("logs", strings.NewReader(`{"msg":"hi"}`)); err != nil {
		return fmt.Errorf("index: %w", err)
	}
	res.Body.Close()
	fmt.Fprintf(w, "index (a write, 503 first): status %d after %d attempt(s)\n", res.StatusCode, fake.attempts("POST /logs/_doc"))
	return nil
}
