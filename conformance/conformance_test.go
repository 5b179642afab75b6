package conformance

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/collectors"
	"github.com/mccutchen/go-httpbin/v2/httpbin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/retryhttp/retryhttp"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"
)

// TestMain checks for leaked goroutines, but toxiproxy's own: its toxics
// can stay blocked for a while after a proxy stops (a slicer was seen so).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*Proxy).server"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).read"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).write"))
}

// recorder is go-httpbin with a log of what it received.
type recorder struct {
	h    http.Handler
	mu   sync.Mutex
	seen []seen
}

type seen struct{ key, sum string }

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	sum := sha256.Sum256(body)
	r.mu.Lock()
	r.seen = append(r.seen, seen{req.Header.Get("Idempotency-Key"), hex.EncodeToString(sum[:8])})
	r.mu.Unlock()
	req.Body = io.NopCloser(bytes.NewReader(body))
	r.h.ServeHTTP(w, req)
}

func (r *recorder) take() []seen {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.seen
	r.seen = nil
	return s
}

// kind is one kind of request.
type kind struct {
	name string
	opts []retryhttp.Option
	req  func(url string) *http.Request
}

var payload = strings.Repeat("0123456789", 100)

var kinds = []kind{
	{"GET", nil, func(u string) *http.Request { r, _ := http.NewRequest("GET", u, nil); return r }},
	{"POST, no key", nil, func(u string) *http.Request {
		r, _ := http.NewRequest("POST", u, strings.NewReader(payload))
		return r
	}},
	{"POST, injected key", []retryhttp.Option{retryhttp.WithIdempotencyKeys()}, func(u string) *http.Request {
		r, _ := http.NewRequest("POST", u, strings.NewReader(payload))
		return r
	}},
	{"chunked POST without GetBody, injected key", []retryhttp.Option{retryhttp.WithIdempotencyKeys()}, func(u string) *http.Request {
		r, _ := http.NewRequest("POST", u, io.NopCloser(strings.NewReader(payload)))
		return r
	}},
}

// fault is one thing that goes wrong, and what each kind must see.
type fault struct {
	name  string
	path  string // on go-httpbin
	toxic string // toxiproxy JSON, if any
	down  bool   // the proxy disabled: connection refused
	// want attempts sent (by retryhttp's metrics) per kind, in kinds'
	// order; wantTLS, if set, over HTTP/2 with TLS, where the toxics strike
	// during the handshake, before any byte of the request was written
	want, wantTLS [4]int
	// random: go-httpbin answers 500 or 200 at random; each kind must then
	// send from 1 to 4 attempts (1 for a POST without key), every one
	// received, and stop early only on a 200
	random bool
	// perAttempt overrides the per-attempt timeout of 1 s
	perAttempt time.Duration
}

var faults = []fault{
	{name: "200", path: "/anything", want: [4]int{1, 1, 1, 1}},
	{name: "503 (go-httpbin /status/503)", path: "/status/503", want: [4]int{4, 1, 4, 4}},
	{name: "404", path: "/status/404", want: [4]int{1, 1, 1, 1}},
	{name: "connection refused (proxy disabled)", path: "/anything", down: true, want: [4]int{4, 4, 4, 4}},
	{name: "reset_peer on the answer", path: "/anything", toxic: `{"name":"t","type":"reset_peer","stream":"downstream","attributes":{"timeout":0}}`,
		want: [4]int{4, 1, 4, 4}, wantTLS: [4]int{4, 4, 4, 4}},
	{name: "timeout: no answer (per-attempt timeout 1 s)", path: "/anything", toxic: `{"name":"t","type":"timeout","stream":"downstream","attributes":{"timeout":0}}`,
		want: [4]int{4, 1, 4, 4}, wantTLS: [4]int{4, 4, 4, 4}},
	{name: "redirect (go-httpbin /redirect/1): returned, not followed", path: "/redirect/1", want: [4]int{1, 1, 1, 1}},
	{name: "body dripped over 1.5 s, past the per-attempt timeout (/drip): read whole", path: "/drip?duration=1.5&numbytes=5&code=200&delay=0", want: [4]int{1, 1, 1, 1}},
	{name: "limit_data: the connection closes after 40 bytes of answer", path: "/anything",
		toxic: `{"name":"t","type":"limit_data","stream":"downstream","attributes":{"bytes":40}}`,
		want:  [4]int{4, 1, 4, 4}, wantTLS: [4]int{4, 4, 4, 4}},
	{name: "bandwidth 64 KB/s", path: "/anything", toxic: `{"name":"t","type":"bandwidth","stream":"downstream","attributes":{"rate":64}}`, want: [4]int{1, 1, 1, 1}},
	{name: "latency 50 ms", path: "/anything", toxic: `{"name":"t","type":"latency","stream":"downstream","attributes":{"latency":50}}`, want: [4]int{1, 1, 1, 1}},
	{name: "/unstable (go-httpbin, failure rate 0.5, unseeded): 500 or 200 at random", path: "/unstable?failure_rate=0.5", random: true},
	{name: "/delay/1 past a per-attempt timeout of 200 ms", path: "/delay/1", perAttempt: 200 * time.Millisecond, want: [4]int{4, 1, 4, 4}},
	{name: "slicer (answer in 1-byte slices)", path: "/anything", toxic: `{"name":"t","type":"slicer","stream":"downstream","attributes":{"average_size":1,"size_variation":0,"delay":0}}`, want: [4]int{1, 1, 1, 1}},
}

func TestConformance(t *testing.T) {
	var table strings.Builder
	fmt.Fprintf(&table, "| protocol | fault | %s |\n|---|---|%s\n", strings.Join(names(), " | "), strings.Repeat("---|", len(kinds)))
	for _, proto := range []string{"HTTP/1.1", "HTTP/2 (TLS)"} {
		rec := &recorder{h: httpbin.New()}
		up := httptest.NewUnstartedServer(rec)
		up.Config.ErrorLog = log.New(io.Discard, "", 0) // the toxics' broken handshakes
		if proto != "HTTP/1.1" {
			up.EnableHTTP2 = true
			up.StartTLS()
		} else {
			up.Start()
		}
		srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
		srv.Metrics.ProxyMetrics = collectors.NewProxyMetricCollectors()
		proxy := toxiproxy.NewProxy(srv, "up", "127.0.0.1:0", up.Listener.Addr().String())
		if err := proxy.Start(); err != nil {
			t.Fatal(err)
		}
		scheme := "http"
		if up.TLS != nil {
			scheme = "https"
		}
		for _, f := range faults {
			row := []string{proto, f.name}
			if f.toxic != "" {
				if _, err := proxy.Toxics.AddToxicJson(strings.NewReader(f.toxic)); err != nil {
					t.Fatal(err)
				}
			}
			if f.down {
				proxy.Stop()
			}
			for i, k := range kinds {
				base := up.Client().Transport.(*http.Transport).Clone()
				m := retryhttp.NewMetrics()
				tr := retryhttp.New(base, append([]retryhttp.Option{retryhttp.WithMetrics(m),
					retryhttp.WithBackoff(retryhttp.Constant(10 * time.Millisecond)), retryhttp.WithoutBudget(),
					retryhttp.WithoutRetryBreaker(),
					retryhttp.WithPerAttemptTimeout(cmp.Or(f.perAttempt, time.Second))}, k.opts...)...)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				req := k.req(scheme + "://" + proxy.Listen + f.path).WithContext(ctx)
				resp, err := tr.RoundTrip(req)
				outcome := ""
				if err != nil {
					outcome = "error"
				} else {
					_, rerr := io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					outcome = fmt.Sprint(resp.StatusCode)
					if rerr != nil {
						outcome += " (body cut)"
					}
				}
				cancel()
				base.CloseIdleConnections()
				sent := int(sum(t, m, "retryhttp_attempts_total"))
				got := rec.take()
				keys, sums := map[string]bool{}, map[string]bool{}
				for _, s := range got {
					keys[s.key] = true
					sums[s.sum] = true
				}
				want := f.want[i]
				if up.TLS != nil && f.wantTLS != [4]int{} {
					want = f.wantTLS[i]
				}
				switch {
				case f.random:
					most := 4
					if i == 1 { // a POST without key
						most = 1
					}
					if sent < 1 || sent > most || len(got) != sent || (outcome != "200" && outcome != "500") ||
						(sent < most && outcome != "200") {
						t.Errorf("%s, %s, %s: %s after %d attempts sent, %d received; want 200 or 500 after 1 to %d, all received",
							proto, f.name, k.name, outcome, sent, len(got), most)
					}
				case sent != want:
					t.Errorf("%s, %s, %s: %d attempts sent, want %d", proto, f.name, k.name, sent, want)
				}
				if len(sums) > 1 {
					t.Errorf("%s, %s, %s: the server received %d different bodies", proto, f.name, k.name, len(sums))
				}
				if k.opts != nil && len(got) > 0 && (len(keys) != 1 || keys[""]) {
					t.Errorf("%s, %s, %s: keys %v, want one key on every attempt", proto, f.name, k.name, keys)
				}
				cell := fmt.Sprintf("%s; %d sent, %d received", outcome, sent, len(got))
				if f.random {
					// What holds for any draw, not the draw: the table is
					// then the same on every run.
					most := 4
					if i == 1 {
						most = 1
					}
					cell = fmt.Sprintf("200 or 500; 1 to %d sent, all received", most)
					if most == 1 {
						cell = "200 or 500; 1 sent, 1 received"
					}
				}
				row = append(row, cell)
			}
			if f.down {
				if err := proxy.Start(); err != nil {
					t.Fatal(err)
				}
			}
			if f.toxic != "" {
				proxy.Toxics.RemoveToxic(context.Background(), "t")
			}
			fmt.Fprintf(&table, "| %s |\n", strings.Join(row, " | "))
		}
		proxy.Stop()
		up.Close()
	}
	t.Log("\n" + table.String())
	if !t.Failed() {
		if err := writeResults(t, table.String()); err != nil {
			t.Fatal(err)
		}
	}
}

// firstDiff shows the first line where a and b differ.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < max(len(al), len(bl)); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n  committed: %s\n  this run:  %s", i+1, x, y)
		}
	}
	return ""
}

func names() []string {
	var n []string
	for _, k := range kinds {
		n = append(n, k.name)
	}
	return n
}

// sum adds the values of a counter family of m.
func sum(t *testing.T, m *retryhttp.Metrics, name string) float64 {
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, f := range families {
		if f.GetName() == name {
			for _, s := range f.GetMetric() {
				n += s.GetCounter().GetValue()
			}
		}
	}
	return n
}

// update makes the suite write its tables (results.md, results-http2.md
// and the sections of docs/conformance.md) from the run; without it, a run
// compares them with what is committed and fails on a difference.
// CONFORMANCE_UPDATE=1 does the same as -update.
var update = flag.Bool("update", false, "write results.md, results-http2.md and docs/conformance.md's tables from this run")

func updating() bool { return *update || os.Getenv("CONFORMANCE_UPDATE") != "" }

// page is the documentation page that shows the tables.
const page = "../docs/conformance.md"

// writeResults writes the table to results.md and into the page, or
// compares it with them.
func writeResults(t *testing.T, table string) error {
	head := "Made by `make conformance-update`: go-httpbin v2.26.0 behind toxiproxy v2.5.0, both in-process. " +
		"Each cell: what the caller got; the attempts retryhttp sent (its metrics); the requests go-httpbin received.\n\n"
	return writeSection(t, "results.md", "Conformance results", "conformance", head, table)
}

// writeSection writes a table, under a title and a head, to file and into
// the page between the marker's comments, so that the page shows what a
// run measured; or, unless updating, checks that they already say it.
func writeSection(t *testing.T, file, title, marker, head, table string) error {
	want := "# " + title + "\n\n" + head + table
	doc, err := os.ReadFile(page)
	if err != nil {
		return err
	}
	open, end := "<!-- "+marker+" -->\n", "<!-- /"+marker+" -->"
	s := string(doc)
	i, j := strings.Index(s, open), strings.Index(s, end)
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %s markers", page, marker)
	}
	s = s[:i+len(open)] + head + table + s[j:]
	if !updating() {
		for _, f := range []struct{ name, want string }{{file, want}, {page, s}} {
			got, err := os.ReadFile(f.name)
			if err != nil {
				return err
			}
			if string(got) != f.want {
				t.Errorf("%s differs from this run (go test ./conformance -update rewrites it):\n%s", f.name, firstDiff(string(got), f.want))
			}
		}
		return nil
	}
	if err := os.WriteFile(file, []byte(want), 0o644); err != nil {
		return err
	}
	return os.WriteFile(page, []byte(s), 0o644)
}
