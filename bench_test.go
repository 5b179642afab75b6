package retryhttp

// Benchmarks of the cost of retryhttp, each against the bare base transport
// in the same run, so that benchstat -col /rt compares them on one machine
// at one time:
//
//	go test -run '^$' -bench . -benchmem -count 8 . > bench.txt
//	go run golang.org/x/perf/cmd/benchstat@latest -col /rt bench.txt

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retrytest"
)

var benchBody = []byte("hello from retryhttp") // 19 bytes, as in the peer comparison

func benchBase() *http.Transport {
	// A pool deep enough for 64 goroutines, so that the benchmark measures
	// round trips, not connection churn.
	return &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}
}

func benchServer(b *testing.B) *httptest.Server {
	b.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil {
			io.Copy(io.Discard, r.Body)
		}
		w.Header().Set("Content-Length", "19")
		w.Write(benchBody[:19])
	}))
	b.Cleanup(srv.Close)
	return srv
}

type benchRT struct {
	name string
	rt   func() http.RoundTripper
}

func successContenders() []benchRT {
	return []benchRT{
		{"bare", func() http.RoundTripper { return benchBase() }},
		{"retryhttp", func() http.RoundTripper { return New(benchBase()) }},
		{"retryhttp+metrics", func() http.RoundTripper {
			return New(benchBase(), WithMetrics(NewMetrics()), WithBudget(NewBudget(0.1, 10)))
		}},
		// The bare transport again, last: a control. Its ratio to the first
		// bare is the noise and the order effects of the run; a difference
		// of retryhttp's smaller than that is not one.
		{"bare-again", func() http.RoundTripper { return benchBase() }},
	}
}

// BenchmarkOverhead measures what retryhttp itself costs per request,
// without the network's noise: the base answers from memory at once, so
// the difference from bare is all retryhttp's. The base says, with an
// Unwrap method, that it wraps an *http.Transport, as a tracing or logging
// middleware over one would; "opaque" is the same base without Unwrap,
// which may hide another Transport, so that each request must carry the
// single-retry-owner mark in its context. "all" turns on every option a
// successful GET could pay for, except the per-attempt timeout, whose
// context and timer are its price.
func BenchmarkOverhead(b *testing.B) {
	resp := respond(200)
	mem := retrytest.RoundTripperFunc(func(*http.Request) (*http.Response, error) { return resp, nil })
	base := func() http.RoundTripper { return seenThrough{mem} }
	contenders := []benchRT{
		{"bare", base},
		{"retryhttp", func() http.RoundTripper { return New(base()) }},
		{"retryhttp+metrics", func() http.RoundTripper { return New(base(), WithMetrics(NewMetrics())) }},
		{"retryhttp+attemptheader", func() http.RoundTripper { // a header on every attempt: a copy of the map each
			return New(base(), WithAttemptHeader("X-Envoy-Attempt-Count", "{attempt}"))
		}},
		{"retryhttp+all", func() http.RoundTripper { // every option that costs a successful GET nothing more
			return New(base(), WithMetrics(NewMetrics()), WithName("all"), WithRetryBreaker(BreakerConfig{}),
				WithLogger(slog.New(slog.DiscardHandler)), WithIdempotencyKeys())
		}},
		{"retryhttp+throttle", func() http.RoundTripper { return New(base(), WithThrottle(1.25)) }},
		{"retryhttp+limit", func() http.RoundTripper { return New(base(), WithConcurrencyLimit(1, 64)) }},
		{"retryhttp+quota", func() http.RoundTripper { return New(base(), WithQuotaPacing(time.Second, false)) }},
		{"retryhttp+rate", func() http.RoundTripper { return New(base(), WithRateLimit(1e9, 1<<20)) }},
		{"retryhttp+opaque", func() http.RoundTripper { return New(mem) }},
		{"retryhttp+operations", func() http.RoundTripper { // a policy's operations, none of which matches
			ps, err := LoadPolicies(strings.NewReader(`[{"dependency": "d"}, {"dependency": "d", "match": "POST /a/*"}, {"dependency": "d", "match": "GET /b/*/c"}]`))
			if err != nil {
				panic(err)
			}
			opts, err := ps["d"].Options()
			if err != nil {
				panic(err)
			}
			return New(base(), opts...)
		}},
	}
	for _, parallel := range []bool{false, true} {
		for _, c := range contenders {
			name := "seq/rt=" + c.name
			if parallel {
				name = "parallel/rt=" + c.name
			}
			b.Run(name, func(b *testing.B) {
				rt := c.rt()
				req, _ := http.NewRequest("GET", "http://127.0.0.1/", nil)
				rt.RoundTrip(req)
				b.ReportAllocs()
				b.ResetTimer()
				if !parallel {
					for b.Loop() {
						rt.RoundTrip(req)
					}
					return
				}
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						rt.RoundTrip(req)
					}
				})
			})
		}
	}
}

// BenchmarkRefusal is what a request a pacer refuses costs: the throttle
// of a host that refuses everything, and a concurrency limit whose queue
// is full. It sends nothing.
func BenchmarkRefusal(b *testing.B) {
	refusing := retrytest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
		return reply(r, 503, nil), nil
	})
	req, _ := http.NewRequest("GET", "http://127.0.0.1/", nil)
	b.Run("throttled", func(b *testing.B) {
		rt := New(seenThrough{refusing}, WithThrottle(1), WithMaxAttempts(1))
		for range 1000 { // the throttle learns that the host refuses
			if resp, err := rt.RoundTrip(req); err == nil {
				resp.Body.Close()
			}
		}
		b.ReportAllocs()
		for b.Loop() {
			if resp, err := rt.RoundTrip(req); err == nil {
				resp.Body.Close()
			}
		}
	})
	b.Run("limit", func(b *testing.B) {
		hold := make(chan struct{})
		blocking := retrytest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
			<-hold
			return reply(r, 200, nil), nil
		})
		rt := New(seenThrough{blocking}, WithConcurrencyLimit(1, 1))
		done := make(chan struct{}, 2)
		for range 2 { // one in flight, one waiting: the queue is full
			go func() { rt.RoundTrip(req); done <- struct{}{} }()
		}
		for hostOf(rt, "127.0.0.1").Waiting < 1 {
			time.Sleep(time.Millisecond)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := rt.RoundTrip(req); err == nil {
				b.Fatal("not refused")
			}
		}
		close(hold)
		<-done
		<-done
	})
}

// seenThrough is a middleware that tells what it wraps.
type seenThrough struct{ http.RoundTripper }

func (seenThrough) Unwrap() http.RoundTripper { return &http.Transport{} }

func roundTrip(b *testing.B, rt http.RoundTripper, req *http.Request) {
	resp, err := rt.RoundTrip(req)
	if err != nil {
		b.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("status %d", resp.StatusCode)
	}
}

func closeIdle(rt http.RoundTripper) {
	if ci, ok := rt.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

func BenchmarkGET(b *testing.B) {
	srv := benchServer(b)
	for _, c := range successContenders() {
		b.Run("rt="+c.name, func(b *testing.B) {
			rt := c.rt()
			defer closeIdle(rt)
			req, _ := http.NewRequest("GET", srv.URL, nil)
			roundTrip(b, rt, req) // warm the connection and the metric series
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				roundTrip(b, rt, req)
			}
		})
	}
}

func benchParallel(b *testing.B, goroutines int) {
	srv := benchServer(b)
	for _, c := range successContenders() {
		b.Run("rt="+c.name, func(b *testing.B) {
			rt := c.rt()
			defer closeIdle(rt)
			req, _ := http.NewRequest("GET", srv.URL, nil)
			roundTrip(b, rt, req)
			b.ReportAllocs()
			// SetParallelism multiplies GOMAXPROCS.
			b.SetParallelism(max(1, goroutines/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					roundTrip(b, rt, req)
				}
			})
		})
	}
}

func BenchmarkGETParallel8(b *testing.B)  { benchParallel(b, 8) }
func BenchmarkGETParallel64(b *testing.B) { benchParallel(b, 64) }

// opaque hides a reader's type so that http.NewRequest sets no GetBody.
type opaque struct{ io.Reader }

// BenchmarkPOST64KiB sends a 64 KiB POST that succeeds at once, with the
// body in each of the forms a caller gives: with GetBody (bytes.Reader),
// keyed or not; without GetBody, of declared length; and without GetBody
// or a length (sent chunked: a file, a pipe, an encoder).
func BenchmarkPOST64KiB(b *testing.B) {
	benchPOST(b, 64<<10, []postCase{
		{"GetBody", true, true, true},
		{"GetBody-nokey", true, true, false},
		{"noGetBody", false, true, true},
		{"chunked", false, false, true},
	})
}

// BenchmarkPOSTOverLimit sends a 4 MiB body that declares its length,
// over the 1 MiB buffer limit: it is never retried, so it must cost
// nothing over bare.
func BenchmarkPOSTOverLimit(b *testing.B) {
	benchPOST(b, 4<<20, []postCase{{"noGetBody", false, true, true}})
}

type postCase struct {
	name                   string
	getBody, declared, key bool
}

func benchPOST(b *testing.B, size int, cases []postCase) {
	srv := benchServer(b)
	payload := bytes.Repeat([]byte("x"), size)
	for _, pc := range cases {
		for _, c := range successContenders()[:2] {
			b.Run("body="+pc.name+"/rt="+c.name, func(b *testing.B) {
				rt := c.rt()
				defer closeIdle(rt)
				newReq := func() *http.Request {
					var body io.Reader = bytes.NewReader(payload)
					if !pc.getBody {
						body = opaque{body}
					}
					req, _ := http.NewRequest("POST", srv.URL, body)
					if pc.declared {
						req.ContentLength = int64(len(payload))
					}
					if pc.key {
						req.Header.Set(HeaderIdempotencyKey, "bench")
					}
					return req
				}
				roundTrip(b, rt, newReq())
				b.ReportAllocs()
				b.SetBytes(int64(len(payload)))
				b.ResetTimer()
				for b.Loop() {
					roundTrip(b, rt, newReq())
				}
			})
		}
	}
}

// BenchmarkRetry measures a GET that succeeds on its third attempt. "bare"
// makes the same three round trips by hand, so the difference is the cost
// of the retries themselves.
func BenchmarkRetry(b *testing.B) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%3 != 0 {
			w.Header().Set("Content-Length", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Length", "19")
		w.Write(benchBody[:19])
	}))
	defer srv.Close()
	b.Run("rt=bare", func(b *testing.B) {
		rt := benchBase()
		defer rt.CloseIdleConnections()
		req, _ := http.NewRequest("GET", srv.URL, nil)
		n.Store(0)
		b.ReportAllocs()
		for b.Loop() {
			for {
				resp, err := rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					break
				}
			}
		}
	})
	b.Run("rt=retryhttp", func(b *testing.B) {
		rt := New(benchBase(), WithBackoff(Constant(0)), WithoutBudget())
		defer rt.CloseIdleConnections()
		req, _ := http.NewRequest("GET", srv.URL, nil)
		n.Store(0)
		b.ReportAllocs()
		for b.Loop() {
			roundTrip(b, rt, req)
		}
	})
}

// BenchmarkHosts measures the per-host state with many hosts, in memory:
// the bytes each host costs (B/host), a first request to a host not seen
// before (new), and a request to one of the n known hosts (steady).
func BenchmarkHosts(b *testing.B) {
	resp := withBody(respond(200), nopBody{}, 0)
	for _, n := range []int{10, 1000, 10000, 100000} {
		tr := New(&staticTransport{resp})
		tr.c.markOwner = false
		reqs := make([]*http.Request, n)
		for i := range reqs {
			reqs[i], _ = http.NewRequest("GET", fmt.Sprintf("http://h%d.example/", i), nil)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for _, r := range reqs {
			tr.RoundTrip(r)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perHost := float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
		b.Run(fmt.Sprintf("hosts=%d/steady", n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				tr.RoundTrip(reqs[i%n])
				i++
			}
			b.ReportMetric(perHost, "B/host")
		})
		b.Run(fmt.Sprintf("hosts=%d/new", n), func(b *testing.B) {
			fresh := make([]*http.Request, 0, 1<<16)
			for i := range cap(fresh) {
				r, _ := http.NewRequest("GET", fmt.Sprintf("http://new%d.h%d.example/", i, n), nil)
				fresh = append(fresh, r)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i == len(fresh) {
					b.StopTimer()
					for j := range fresh {
						fresh[j], _ = http.NewRequest("GET", fmt.Sprintf("http://new%d.%d.h%d.example/", j, i, n), nil)
					}
					b.StartTimer()
				}
				tr.RoundTrip(fresh[i%len(fresh)])
				i++
			}
		})
	}
}

// trickle yields size bytes in pieces of 16 KiB, the way a file or an
// encoder does; it is no reader that net/http knows to be in memory.
type trickle struct {
	left int
}

func (t *trickle) Read(p []byte) (int, error) {
	if t.left == 0 {
		return 0, io.EOF
	}
	n := min(len(p), t.left, 16<<10)
	clear(p[:n])
	t.left -= n
	return n, nil
}

// BenchmarkUpload1MiB sends a 1 MiB body of unknown length (chunked, no
// GetBody) and reports the time to its first byte at the server
// (ttfb-ns/op) and in all (ns/op): bare; retryhttp, which keeps the body
// while the first attempt sends it; and read-first, which reads it all
// before sending, as a retrier that buffers first does.
func BenchmarkUpload1MiB(b *testing.B) {
	var firstByte atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var one [1]byte
		io.ReadFull(r.Body, one[:])
		firstByte.Store(time.Now().UnixNano())
		io.Copy(io.Discard, r.Body)
	}))
	b.Cleanup(srv.Close)
	readFirst := func(base http.RoundTripper) http.RoundTripper {
		return retrytest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
			body, err := io.ReadAll(r.Body)
			r.Body.Close()
			if err != nil {
				return nil, err
			}
			r2 := r.Clone(r.Context())
			r2.Body = io.NopCloser(struct{ io.Reader }{bytes.NewReader(body)})
			return base.RoundTrip(r2)
		})
	}
	for _, c := range []benchRT{
		{"bare", func() http.RoundTripper { return benchBase() }},
		{"retryhttp", func() http.RoundTripper { return New(benchBase()) }},
		{"read-first", func() http.RoundTripper { return readFirst(benchBase()) }},
	} {
		b.Run("rt="+c.name, func(b *testing.B) {
			rt := c.rt()
			defer closeIdle(rt)
			var ttfb time.Duration
			b.SetBytes(1 << 20)
			b.ReportAllocs()
			for b.Loop() {
				req, _ := http.NewRequest("PUT", srv.URL, &trickle{left: 1 << 20})
				start := time.Now()
				roundTrip(b, rt, req)
				ttfb += time.Duration(firstByte.Load() - start.UnixNano())
			}
			b.ReportMetric(float64(ttfb.Nanoseconds())/float64(b.N), "ttfb-ns/op")
		})
	}
}
