// Command github wraps go-github (v84) with retryhttp. GitHub throttles
// with a 403, not only a 429: its primary rate limit says
// X-RateLimit-Remaining: 0 and the Unix time X-RateLimit-Reset; its
// secondary rate limit says Retry-After, with requests remaining.
// retryhttp reads both as throttles and waits as told (within
// WithMaxRetryAfter, 30 s by default: a longer wait returns the 403 at
// once, for go-github to report as a RateLimitError). go-github does not
// retry on its own. It runs against a fake API on loopback that answers
// each repository's first request with one of the two limits.
//
//	cd examples/sdk && go run ./github
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/google/go-github/v84/github"
	"github.com/retryhttp/retryhttp"
)

func main() {
	if err := run(os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// fakeGitHub answers the first request for repository "primary" with the
// primary rate limit (reset 1 s later) and for "secondary" with the
// secondary one (Retry-After: 1).
type fakeGitHub struct {
	mu   sync.Mutex
	seen map[string][]time.Time
}

func (f *fakeGitHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.seen[r.URL.Path] = append(f.seen[r.URL.Path], time.Now())
	n := len(f.seen[r.URL.Path])
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if n == 1 {
		switch r.URL.Path {
		case "/repos/octo/primary":
			w.Header().Set("X-RateLimit-Limit", "5000")
			w.Header().Set("X-RateLimit-Remaining", "0")
			w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Second).Unix()+1, 10))
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `{"message":"API rate limit exceeded","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"}`)
			return
		case "/repos/octo/secondary":
			w.Header().Set("X-RateLimit-Limit", "5000")
			w.Header().Set("X-RateLimit-Remaining", "4999")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}`)
			return
		}
	}
	w.Header().Set("X-RateLimit-Limit", "5000")
	w.Header().Set("X-RateLimit-Remaining", "4998")
	io.WriteString(w, `{"id":1,"name":"repo","full_name":"octo/repo"}`)
}

func (f *fakeGitHub) times(path string) []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.seen[path]...)
}

// newClient returns a go-github client whose requests go through
// retryhttp.
func newClient(baseURL string, opts ...retryhttp.Option) *github.Client {
	client := github.NewClient(&http.Client{Transport: retryhttp.New(nil, opts...)})
	client.BaseURL, _ = url.Parse(baseURL + "/")
	return client
}

func run(w io.Writer) error {
	fake := &fakeGitHub{seen: map[string][]time.Time{}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	client := newClient(srv.URL, retryhttp.WithBackoff(retryhttp.Constant(time.Millisecond)))
	defer client.Client().CloseIdleConnections()
	for _, limit := range []string{"primary", "secondary"} {
		repo, _, err := client.Repositories.Get(context.Background(), "octo", limit)
		if err != nil {
			return fmt.Errorf("%s: %w", limit, err)
		}
		seen := fake.times("/repos/octo/" + limit)
		fmt.Fprintf(w, "%s rate limit: %s after %d attempts, the retry %v later\n",
			limit, repo.GetFullName(), len(seen), seen[len(seen)-1].Sub(seen[0]) >= time.Second)
	}
	return nil
}
