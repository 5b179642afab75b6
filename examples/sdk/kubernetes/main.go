// Command kubernetes wraps client-go (v0.37) with retryhttp. client-go
// retries by itself, up to 10 times, a 429 or 5xx that carries Retry-After
// in seconds, whatever the verb, and a GET's connection errors; its typed
// clientset has no setting to stop that (Request.MaxRetries(0) exists on
// the REST client alone, per request), and its tries say nothing of being
// retries. So retryhttp owns the schedule: it honours Retry-After itself,
// and noRetryAfter, above it, takes Retry-After off the answer it gives up
// with, so that client-go returns that answer instead of starting over.
// Server-side apply (a PATCH that states the whole intended object) is
// safe to send again, and is declared so; a create (POST) is not, and its
// 503 goes back to the caller, but its 429 is retried: the API server
// answers 429 to a request it has not begun. Against a fake API server on
// loopback that answers each path 429 with Retry-After: 1 once, a list and
// an apply each succeed after two sends.
//
//	cd examples/sdk && go run ./kubernetes
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

	"github.com/retryhttp/retryhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func main() {
	if err := run(os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// fakeAPI answers the first failFirst requests of each method and path
// with status and Retry-After: retryAfter (every one, if failFirst < 0),
// and counts them.
type fakeAPI struct {
	failFirst  int
	status     int
	retryAfter string
	mu         sync.Mutex
	seen       map[string]int
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	f.mu.Lock()
	key := r.Method + " " + r.URL.Path
	f.seen[key]++
	n := f.seen[key]
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if f.failFirst < 0 || n <= f.failFirst {
		w.Header().Set("Retry-After", f.retryAfter)
		w.WriteHeader(f.status)
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","code":%d}`, f.status)
		return
	}
	switch r.Method {
	case http.MethodGet:
		io.WriteString(w, `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[{"metadata":{"name":"web-1","namespace":"default"}}]}`)
	default:
		io.WriteString(w, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"settings","namespace":"default"},"data":{"mode":"fast"}}`)
	}
}

func (f *fakeAPI) count(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen[key]
}

// noRetryAfter takes Retry-After off a 429 or 5xx that the Transport below
// it gave up with: client-go retries only an answer that carries it, and
// retryhttp has honoured it already.
type noRetryAfter struct{ next http.RoundTripper }

func (n noRetryAfter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := n.next.RoundTrip(req)
	if resp != nil && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500) {
		resp.Header.Del("Retry-After")
	}
	return resp, err
}

// serverSideApply declares server-side apply safe to repeat: it states
// the whole object the field manager wants.
func serverSideApply(r *http.Request) bool {
	return r.Method == http.MethodPatch && r.Header.Get("Content-Type") == "application/apply-patch+yaml"
}

// newClient returns a clientset for the API server at host whose requests
// go through retryhttp, the one layer that retries. The API server's 429
// (priority and fairness, or too many requests in flight) rejects a
// request before it begins: retried whatever the verb, as client-go does.
func newClient(host string, opts ...retryhttp.Option) (*kubernetes.Clientset, error) {
	cfg := &rest.Config{Host: host, BearerToken: "example-token"}
	opts = append([]retryhttp.Option{retryhttp.WithIdempotentIf(serverSideApply),
		retryhttp.WithUnprocessedStatuses(http.StatusTooManyRequests)}, opts...)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return noRetryAfter{retryhttp.New(rt, opts...)}
	})
	return kubernetes.NewForConfig(cfg)
}

func run(w io.Writer) error {
	fake := &fakeAPI{failFirst: 1, status: http.StatusTooManyRequests, retryAfter: "1", seen: map[string]int{}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	cs, err := newClient(srv.URL)
	if err != nil {
		return err
	}
	ctx := context.Background()
	pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	cm := corev1ac.ConfigMap("settings", "default").WithData(map[string]string{"mode": "fast"})
	if _, err := cs.CoreV1().ConfigMaps("default").Apply(ctx, cm, metav1.ApplyOptions{FieldManager: "deployer"}); err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	fmt.Fprintf(w, "listed %d pod after %d sends, applied the config map after %d\n", len(pods.Items),
		fake.count("GET /api/v1/namespaces/default/pods"), fake.count("PATCH /api/v1/namespaces/default/configmaps/settings"))
	return nil
}
