// Command staleiferror puts an HTTP cache above retryhttp, cache →
// retryhttp → network, to serve a stale copy when the origin fails
// (RFC 5861 stale-if-error): retryhttp retries first, and only the answer
// it gives up with reaches the cache. retryhttp never serves stale content
// and writes no cache of its own; the cache here is
// github.com/bartventer/httpcache v0.12.0 with its in-memory store.
//
// It runs against a fake rates service on loopback that answers
// GET /rates with "Cache-Control: max-age=1, stale-if-error=60", then goes
// down in one of three ways, and prints what the caller got. httpcache
// v0.12.0 serves the stale copy only when the 503 itself carries
// stale-if-error (the copy's directive is not read); it passes a plain 503
// through; and when the request ends in an error instead of a response
// (the connection dropped) it panics in the caller's goroutine (recovered
// here to show it). docs/recipes.md, "Stale content on error", says more.
//
//	cd examples/sdk && go run ./staleiferror
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
	"sync/atomic"
	"time"

	"github.com/bartventer/httpcache"
	_ "github.com/bartventer/httpcache/store/memcache" // registers "memcache://"
	"github.com/retryhttp/retryhttp"
)

func main() {
	if err := run(os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// newClient returns a client whose requests go through an in-memory RFC
// 9111 cache, above upstream: the cache serves a stale copy, if it does,
// only once upstream (retryhttp) has given up.
func newClient(upstream http.RoundTripper) *http.Client {
	cache := httpcache.NewTransport("memcache://", httpcache.WithUpstream(upstream))
	return &http.Client{Transport: cache}
}

// isStale reports whether resp is a stale copy that the cache served in
// place of the origin's error: httpcache marks it X-Httpcache-Status: STALE
// (it sets no Warning header; Age says how old the copy is).
func isStale(resp *http.Response) bool {
	return resp.Header.Get(httpcache.CacheStatusHeader) == "STALE"
}

// An outage is how the fake origin fails once it is down.
type outage int

const (
	marked503 outage = iota // 503 with Cache-Control: stale-if-error=1
	plain503                // 503 without Cache-Control, as most hosts and load balancers send it
	dropped                 // the connection closed without an answer
)

func (o outage) String() string {
	return [...]string{"503s marked stale-if-error=1", "plain 503s", "connections dropped"}[o]
}

// origin is a fake rates service: while up it answers GET /rates with a
// copy that may be stored for a second and served stale for a minute on
// error; once down, it fails every request by its outage. It counts sends.
type origin struct {
	outage outage
	url    string
	down   atomic.Bool
	sends  atomic.Int64
}

func (o *origin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.sends.Add(1)
	if !o.down.Load() {
		// Date counts whole seconds: one up to a second behind would age
		// the copy by up to a second at once. From a Date ahead, its age
		// starts at 0, and max-age=1 means a second from now.
		w.Header().Set("Date", time.Now().Add(time.Second).UTC().Format(http.TimeFormat))
		w.Header().Set("Cache-Control", "max-age=1, stale-if-error=60")
		io.WriteString(w, "EUR/USD 1.08")
		return
	}
	switch o.outage {
	case dropped:
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
		return
	case marked503:
		w.Header().Set("Cache-Control", "stale-if-error=1")
	}
	w.WriteHeader(http.StatusServiceUnavailable)
	io.WriteString(w, "rates are down")
}

// An outcome is what the caller got for one GET /rates, and the sends the
// origin saw for it.
type outcome struct {
	step     string // what the request was
	status   int
	body     string
	cache    string // X-Httpcache-Status: MISS, HIT, STALE or BYPASS
	age      string
	stale    bool
	err      error
	panicked any // what httpcache panicked with, if it did
	sends    int64
}

func (o outcome) String() string {
	s := fmt.Sprintf("%-35s ", o.step+":")
	switch {
	case o.panicked != nil:
		return s + fmt.Sprintf("panic: %v; the origin saw %d", o.panicked, o.sends)
	case o.err != nil:
		return s + fmt.Sprintf("error: %v; the origin saw %d", o.err, o.sends)
	}
	s += fmt.Sprintf("%d %q %s; the origin saw %d", o.status, o.body, o.cache, o.sends)
	if o.stale {
		s += "; stale, Age: " + o.age
	}
	return s
}

// get sends GET /rates through client, with cc as its Cache-Control if
// not empty, within a deadline, and reports what the caller got. The
// deadline also frees the connection httpcache leaves open when it serves
// a stale copy: it does not close the 503.
func get(client *http.Client, o *origin, step, cc string) (out outcome) {
	before := o.sends.Load()
	defer func() { out.step, out.sends = step, o.sends.Load()-before }()
	defer func() { out.panicked = recover() }() // httpcache v0.12.0, given an error: shown, not a pattern
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.url+"/rates", nil)
	if err != nil {
		return outcome{err: err}
	}
	if cc != "" {
		req.Header.Set("Cache-Control", cc)
	}
	resp, err := client.Do(req)
	if err != nil {
		return outcome{err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return outcome{
		status: resp.StatusCode, body: string(body), err: err,
		cache: resp.Header.Get(httpcache.CacheStatusHeader), age: resp.Header.Get("Age"), stale: isStale(resp),
	}
}

// scenario caches the origin's copy, asks again (the copy is fresh), lets
// it go stale, takes the origin down by out and asks again: what the
// caller got each time. With 503s marked stale-if-error=1, it asks once
// more a second later, past that window; with plain 503s, once more with
// stale-if-error=60 on the request.
func scenario(out outage, upstream http.RoundTripper) []outcome {
	o := &origin{outage: out}
	srv := httptest.NewServer(o)
	defer srv.Close()
	o.url = srv.URL
	client := newClient(upstream)
	outs := []outcome{get(client, o, "up", ""), get(client, o, "up, again", "")}
	time.Sleep(1100 * time.Millisecond) // past max-age=1
	o.down.Store(true)
	outs = append(outs, get(client, o, "down, the copy stale", ""))
	switch out {
	case marked503:
		time.Sleep(time.Second) // past the 503's stale-if-error=1
		outs = append(outs, get(client, o, "down, 1 s on", ""))
	case plain503:
		outs = append(outs, get(client, o, "down, asked with stale-if-error=60", "stale-if-error=60"))
	}
	return outs
}

// outages are the ways the origin goes down, in the order play reports them.
var outages = []outage{marked503, plain503, dropped}

// play plays the outages at once, each with its own origin and client,
// over the upstream that newUpstream returns for it.
func play(newUpstream func() http.RoundTripper) [][]outcome {
	results := make([][]outcome, len(outages))
	var wg sync.WaitGroup
	for i, out := range outages {
		wg.Go(func() { results[i] = scenario(out, newUpstream()) })
	}
	wg.Wait()
	return results
}

// run prints what the caller got in each outage, through the cache above
// retryhttp (with short waits between attempts, for the demo).
func run(w io.Writer) error {
	results := play(func() http.RoundTripper {
		return retryhttp.New(nil, retryhttp.WithBackoff(retryhttp.Constant(10*time.Millisecond)))
	})
	for i, out := range outages {
		fmt.Fprintf(w, "origin down by %s:\n", out)
		for _, o := range results[i] {
			fmt.Fprintf(w, "  %s\n", o)
		}
	}
	return nil
}
