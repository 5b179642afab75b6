package retryhttp

// Faults on real loopback connections, HTTP/2 and TLS, leaks, side effects
// and load. Every test here bounds its own time.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/retryhttp/retryhttp/retrytest"
)

// tlsServer starts an HTTP/2 TLS server that logs nothing.
func tlsServer(t *testing.T, script ...retrytest.Reply) *retrytest.Server {
	t.Helper()
	s := retrytest.NewUnstartedServer(script...)
	s.EnableHTTP2 = true
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

func TestHTTP2StreamResetRetriedForGETOnly(t *testing.T) {
	for _, tc := range []struct {
		method string
		key    bool
		want   int
	}{{"GET", false, 2}, {"POST", true, 2}, {"POST", false, 1}} {
		t.Run(fmt.Sprintf("%s key=%v", tc.method, tc.key), func(t *testing.T) {
			srv := tlsServer(t, retrytest.Reply{Fault: retrytest.Reset})
			base := srv.Client().Transport.(*http.Transport)
			tr, _ := testTransport(base, WithBackoff(Constant(0)))
			defer tr.CloseIdleConnections()
			req := newRequest(t, tc.method, srv.URL, strings.NewReader("payload"))
			if tc.key {
				req.Header.Set(HeaderIdempotencyKey, "k")
			}
			resp, err := tr.RoundTrip(req)
			if err == nil {
				if resp.ProtoMajor != 2 {
					t.Errorf("served over HTTP/%d, want HTTP/2", resp.ProtoMajor)
				}
				resp.Body.Close()
			}
			if srv.Count() != tc.want {
				t.Errorf("server received %d attempts, want %d (err %v)", srv.Count(), tc.want, err)
			}
			if tc.want == 1 && err == nil {
				t.Error("a bare POST whose stream was reset returned no error")
			}
		})
	}
}

func TestHTTP2DiscardedBodiesDoNotLeakStreams(t *testing.T) {
	for _, size := range []int{8 << 10, 200 << 10} { // drained, and closed unread
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			var n atomic.Int64
			big := strings.Repeat("x", size)
			srv := tlsServer(t)
			srv.Handle(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if n.Add(1)%2 == 1 {
					w.WriteHeader(503)
					io.WriteString(w, big)
					return
				}
				io.WriteString(w, "ok")
			}))
			tr, _ := testTransport(srv.Client().Transport, WithBackoff(Constant(0)))
			tr.c.markOwner = false
			defer tr.CloseIdleConnections()
			// More than the server's 250 concurrent streams: a leaked
			// stream per discarded body would stall or need new connections.
			for i := range 300 {
				resp, err := tr.RoundTrip(newRequest(t, "GET", srv.URL, nil))
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Fatalf("request %d: %d", i, resp.StatusCode)
				}
			}
			if srv.Count() != 600 || srv.NewConns() != 1 {
				t.Errorf("%d attempts on %d connections, want 600 on 1", srv.Count(), srv.NewConns())
			}
		})
	}
}

func TestTLSUnknownAuthorityNotRetried(t *testing.T) {
	srv := tlsServer(t)
	tr, _ := testTransport(nil, WithBackoff(Constant(0))) // does not trust the test certificate
	defer tr.CloseIdleConnections()
	_, err := tr.RoundTrip(newRequest(t, "GET", srv.URL, nil))
	var re *Error
	if !errors.As(err, &re) || re.Attempts != 1 || re.Reason != "" {
		t.Fatalf("error %v, want a single attempt", err)
	}
	if srv.NewConns() != 1 || srv.Count() != 0 {
		t.Errorf("%d handshakes, %d requests; want 1 handshake, no request", srv.NewConns(), srv.Count())
	}
}

// TestFaultsPerMethod states the decision for each fault and method, and
// checks what the server received.
func TestFaultsPerMethod(t *testing.T) {
	type want struct{ get, post, keyedPost int }
	tests := []struct {
		name  string
		reply retrytest.Reply
		want  want
	}{
		// Accepted and never answered: the per-attempt timeout ends it, and
		// the server may have acted, so only GET and a keyed POST go again.
		{"hang", retrytest.Reply{Fault: retrytest.Hang}, want{3, 1, 3}},
		// Headers slower than the per-attempt timeout: the same.
		{"slow headers", retrytest.Reply{Delay: time.Second}, want{3, 1, 3}},
		// Reset before any response byte.
		{"reset", retrytest.Reply{Fault: retrytest.Reset}, want{3, 1, 3}},
		// 503: retried unless the method is unsafe without a key.
		{"503", retrytest.Status(503), want{3, 1, 3}},
	}
	for _, tt := range tests {
		for _, m := range []struct {
			name   string
			method string
			key    bool
			want   int
		}{{"GET", "GET", false, tt.want.get}, {"POST", "POST", false, tt.want.post}, {"keyed POST", "POST", true, tt.want.keyedPost}} {
			t.Run(tt.name+"/"+m.name, func(t *testing.T) {
				t.Parallel() // the timeouts are waits, not work: they overlap
				srv := retrytest.NewServer()
				srv.Then = tt.reply
				defer srv.Close()
				tr, _ := testTransport(nil, WithMaxAttempts(3), WithBackoff(Constant(0)), WithPerAttemptTimeout(50*time.Millisecond))
				defer tr.CloseIdleConnections()
				req := newRequest(t, m.method, srv.URL, strings.NewReader("order"))
				if m.key {
					req.Header.Set(HeaderIdempotencyKey, "k")
				}
				resp, err := tr.RoundTrip(req)
				if err == nil {
					resp.Body.Close()
				}
				if srv.Count() != m.want {
					t.Errorf("server received %d attempts, want %d (result %v)", srv.Count(), m.want, err)
				}
				if err := retrytest.CheckSameBody(srv.Attempts(), []byte("order")); err != nil {
					t.Error(err)
				}
			})
		}
	}
}

// A server that closes each connection after its reply, without saying so:
// a bare POST must reach it exactly once per call, never twice.
func TestServerClosingIdleConnections(t *testing.T) {
	srv := retrytest.NewServer()
	srv.Then = retrytest.Reply{Body: "ok", Fault: retrytest.CloseAfterReply}
	defer srv.Close()
	tr, _ := testTransport(nil, WithBackoff(Constant(0)))
	defer tr.CloseIdleConnections()
	var failed int
	for range 30 {
		resp, err := tr.RoundTrip(newRequest(t, "POST", srv.URL, strings.NewReader("x")))
		if err != nil {
			failed++
			continue
		}
		resp.Body.Close()
	}
	if srv.Count() != 30 {
		t.Errorf("30 bare POSTs reached the server %d times (%d failed)", srv.Count(), failed)
	}
}

// TestNoLeaks sends 1,000 requests with retries, cancellations and
// per-attempt timeouts, and checks that no goroutine and no connection is
// left behind.
func TestNoLeaks(t *testing.T) {
	var n atomic.Int64
	srv := retrytest.NewServer()
	srv.Handle(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) % 7 {
		case 1, 4:
			w.WriteHeader(503)
		case 2:
			select { // hang until the client gives up
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		case 3:
			panic(http.ErrAbortHandler) // the connection is dropped
		default:
			io.WriteString(w, "ok")
		}
	}))
	tr, _ := testTransport(nil, WithBackoff(Constant(0)), WithPerAttemptTimeout(20*time.Millisecond))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 50)
	var outcomes atomic.Int64
	for i := range 1000 {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ctx := context.Background()
			if i%10 == 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Duration(rand.IntN(30))*time.Millisecond)
				defer cancel()
			}
			resp, err := tr.RoundTrip(newRequest(t, "GET", srv.URL, nil).WithContext(ctx))
			if (resp == nil) == (err == nil) {
				t.Errorf("RoundTrip = %v, %v", resp, err)
			}
			if resp != nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			outcomes.Add(1)
		}()
	}
	wg.Wait()
	tr.CloseIdleConnections()
	if outcomes.Load() != 1000 {
		t.Fatalf("%d of 1000 requests ended", outcomes.Load())
	}
	deadline := time.Now().Add(5 * time.Second)
	for srv.OpenConns() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if c := srv.OpenConns(); c != 0 {
		t.Errorf("%d connections still open at the server", c)
	}
	srv.Close()
	goleak.VerifyNone(t)
}

// paymentServer charges once per Idempotency-Key, and on some first
// attempts charges and then drops the connection before answering: the
// "charged, but the answer was lost" case.
type paymentServer struct {
	mu      sync.Mutex
	charges map[string]int // key -> times charged
	seen    map[string]bool
	bare    int // charges without a key
	lose    func() bool
}

func (p *paymentServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	key := r.Header.Get(HeaderIdempotencyKey)
	p.mu.Lock()
	first := key == "" || !p.seen[key] // without a key, every request is new
	switch {
	case key == "":
		p.bare++
	case first:
		p.charges[key]++
	}
	p.seen[key] = true
	p.mu.Unlock()
	if first && p.lose() {
		panic(http.ErrAbortHandler) // charged; the answer is lost
	}
	io.WriteString(w, "charged")
}

func TestPaymentsChargedExactlyOnce(t *testing.T) {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(1, 2))
	ps := &paymentServer{charges: map[string]int{}, seen: map[string]bool{}, lose: func() bool {
		mu.Lock()
		defer mu.Unlock()
		return rng.IntN(3) == 0
	}}
	srv := retrytest.NewServer()
	srv.Handle(ps)
	defer srv.Close()

	run := func(opts ...Option) (ok, failed int) {
		// The breaker is off: its holds make no sense on the fake clock
		// that a thousand concurrent requests move on together.
		tr, _ := testTransport(nil, append([]Option{WithBackoff(Constant(time.Millisecond)),
			WithoutRetryBreaker()}, opts...)...)
		defer tr.CloseIdleConnections()
		var wg sync.WaitGroup
		var okN, failN atomic.Int64
		for range 1000 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := tr.RoundTrip(newRequest(t, "POST", srv.URL+"/charges", strings.NewReader(`{"amount":100}`)))
				if err != nil {
					if failN.Add(1) == 1 {
						t.Log(err)
					}
					return
				}
				resp.Body.Close()
				okN.Add(1)
			}()
		}
		wg.Wait()
		return int(okN.Load()), int(failN.Load())
	}

	ok, failed := run(WithIdempotencyKeys(), WithMaxAttempts(10))
	if ok != 1000 || failed != 0 {
		t.Errorf("with keys: %d succeeded, %d failed; want all 1000 to succeed", ok, failed)
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	twice := 0
	for _, n := range ps.charges {
		if n != 1 {
			twice++
		}
	}
	if len(ps.charges) != 1000 || twice != 0 || ps.bare != 0 {
		t.Errorf("with keys: %d keys charged, %d more than once, %d without key; want 1000, 0, 0", len(ps.charges), twice, ps.bare)
	}

	// Without keys, a POST whose answer was lost is not sent again: the
	// caller sees the failure instead of a second charge.
	ps.mu.Unlock()
	ok, failed = run()
	ps.mu.Lock()
	if ps.bare != 1000 || ok+failed != 1000 || failed == 0 {
		t.Errorf("without keys: %d charges for 1000 POSTs (%d ok, %d failed); want exactly 1000, some failed", ps.bare, ok, failed)
	}
}

// TestLoad drives 200 goroutines of 20 requests each through one Transport
// against a flaky server: no race, every logical request ends visibly, and
// the counters agree (every attempt is a first attempt or a retry).
func TestLoad(t *testing.T) {
	var n atomic.Int64
	srv := retrytest.NewServer()
	srv.Handle(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) % 10 {
		case 0, 5:
			w.WriteHeader(503)
		case 7:
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(429)
		default:
			io.WriteString(w, "ok")
		}
	}))
	defer srv.Close()
	m := NewMetrics()
	tr, _ := testTransport(nil, WithMetrics(m), WithBackoff(Constant(0)), WithBudget(NewBudget(0.5, 100)))
	defer tr.CloseIdleConnections()
	var calls, ended atomic.Int64
	var wg sync.WaitGroup
	goroutines, each := loadSize(200, 50), 20
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				calls.Add(1)
				resp, err := tr.RoundTrip(newRequest(t, "GET", srv.URL, nil))
				if (resp == nil) == (err == nil) {
					t.Errorf("RoundTrip = %v, %v", resp, err)
					continue
				}
				if resp != nil {
					resp.Body.Close()
				}
				ended.Add(1)
			}
		}()
	}
	wg.Wait()
	requests := testutil.ToFloat64(m.requests.WithLabelValues(defaultName, "GET", "default"))
	var attempts, retries float64
	for _, o := range []string{"200", "503", "429"} {
		attempts += testutil.ToFloat64(m.attempts.WithLabelValues(defaultName, o))
		retries += testutil.ToFloat64(m.retries.WithLabelValues(defaultName, o, "default"))
	}
	if calls.Load() != ended.Load() || float64(calls.Load()) != requests {
		t.Errorf("%d calls, %d ended, %v counted", calls.Load(), ended.Load(), requests)
	}
	// Only retries that are sent are counted: one held by the breaker
	// until its schedule ended is a give-up, not a retry.
	if attempts != requests+retries || int64(attempts) != int64(srv.Count()) {
		t.Errorf("attempts %v, requests %v + retries %v; server saw %d", attempts, requests, retries, srv.Count())
	}
	if calls.Load() != int64(goroutines*each) {
		t.Errorf("%d calls, want %d", calls.Load(), goroutines*each)
	}
}

// TestLoad10kHeld sends 10,000 concurrent requests through one Transport
// to a server that is down, then back: with the breaker on (the default)
// and no budget, the retries are held, then released. Every call ends once, no goroutine
// or connection is left, and the memory a held request costs is bounded.
func TestLoad10kHeld(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 concurrent requests")
	}
	var down atomic.Bool
	down.Store(true)
	srv := retrytest.NewServer()
	srv.Handle(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			w.WriteHeader(503)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	base := &http.Transport{MaxIdleConnsPerHost: 100, MaxConnsPerHost: 100}
	// No budget: every held retry is charged as it leaves, and a budget
	// would let 10% go; what is measured here is the hold itself.
	tr := New(base, WithMaxAttempts(3), WithBackoff(Constant(10*time.Millisecond)), WithoutBudget(),
		WithRetryBreaker(BreakerConfig{MaxHold: 20 * time.Second}))
	n := loadSize(10000, 1000) // make test runs the 10,000 without the race detector
	var wg sync.WaitGroup
	var ended, ok atomic.Int64
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			resp, err := tr.RoundTrip(newRequest(t, "GET", srv.URL, nil).WithContext(ctx))
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					ok.Add(1)
				}
			}
			ended.Add(1)
		}()
	}
	// Wait until every request is held (or done), then measure.
	host := strings.TrimPrefix(srv.URL, "http://")
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		held := hostOf(tr, host).Held
		if int64(held)+ended.Load() >= int64(n)*99/100 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	var during runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&during)
	held := hostOf(tr, host).Held
	if held > 0 {
		t.Logf("%d requests held: %d bytes of heap each", held, int64(during.HeapAlloc-before.HeapAlloc)/int64(held))
		if per := int64(during.HeapAlloc-before.HeapAlloc) / int64(held); per > 32<<10 {
			t.Errorf("%d bytes of heap per held request, want at most 32 KiB", per)
		}
	}
	down.Store(false)
	wg.Wait()
	tr.CloseIdleConnections()
	// A request whose last attempt went out as a probe that failed, or
	// before the breaker opened, ends with its 503: a few at most.
	if ended.Load() != int64(n) || ok.Load() < int64(n)-20 {
		t.Errorf("%d calls ended, %d succeeded; want all %d to end, all but a few to succeed", ended.Load(), ok.Load(), n)
	}
	for end := time.Now().Add(5 * time.Second); srv.OpenConns() > 0 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	if c := srv.OpenConns(); c != 0 {
		t.Errorf("%d connections still open at the server", c)
	}
}

// resetFirst resets the first n connections it accepts as soon as their
// first bytes arrive (for TLS, during the handshake), and hands the others
// on.
type resetFirst struct {
	net.Listener
	n atomic.Int32
}

func (l *resetFirst) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil || l.n.Add(-1) < 0 {
			return c, err
		}
		buf := make([]byte, 16)
		c.Read(buf)
		c.(*net.TCPConn).SetLinger(0)
		c.Close()
	}
}

// A reset during the TLS handshake happens before any byte of the request
// was written: a bare POST is retried, and reaches the server once.
func TestTLSHandshakeResetPOSTRetried(t *testing.T) {
	var posts atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		io.Copy(io.Discard, r.Body)
	}))
	l := &resetFirst{Listener: srv.Listener}
	l.n.Store(1)
	srv.Listener = l
	srv.StartTLS()
	defer srv.Close()
	tr := New(srv.Client().Transport, WithBackoff(Constant(time.Millisecond)))
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(newRequest(t, "POST", srv.URL, strings.NewReader("pay")))
	if err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || posts.Load() != 1 {
		t.Errorf("status %d, server saw %d POSTs; want 200 after one", resp.StatusCode, posts.Load())
	}
}

// 10,000 requests waiting behind a host that answers 503 with a 64 KiB
// error page hold no more than the Transport's bound on kept bodies
// (defaultHeldBodyMemory) beyond their own state: about 700 MB without
// the bound. The one that gives up with a cut page reads what was kept,
// then ErrHeldBodyTruncated.
func TestLoad10kHeldLargePages(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 concurrent requests")
	}
	page := bytes.Repeat([]byte("x"), 64<<10)
	base := newFailing()
	base.fail = func(*http.Request) (*http.Response, error) {
		return withBody(respond(503), io.NopCloser(bytes.NewReader(page)), int64(len(page))), nil
	}
	down := &base.down
	tr := New(base, WithMaxAttempts(3), WithBackoff(Constant(10*time.Millisecond)),
		WithRetryBreaker(BreakerConfig{MaxHold: 20 * time.Second, ProbeBackoff: Constant(time.Hour)}))
	n := loadSize(10000, 1000)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	var ended atomic.Int64
	for range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil).WithContext(ctx))
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			ended.Add(1)
		})
	}
	host := "h"
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		held := hostOf(tr, host).Held
		if int64(held)+ended.Load() >= int64(n)*99/100 {
			break
		}
	}
	var during runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&during)
	grown := int64(during.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d requests waiting behind 64 KiB pages: %d KiB of heap in all, %d bytes each",
		n, grown>>10, grown/int64(n))
	if limit := int64(defaultHeldBodyMemory) + int64(n)*8<<10; grown > limit {
		t.Errorf("%d bytes of heap for %d waiting requests, want at most %d (the bound, and 8 KiB each)", grown, n, limit)
	}
	down.Store(false)
	resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil)) // the host answers: all are released
	if err == nil {
		resp.Body.Close()
	}
	wg.Wait()
	if ended.Load() != int64(n) {
		t.Errorf("%d of %d calls ended", ended.Load(), n)
	}
	if free := tr.c.held.free.Load(); free != defaultHeldBodyMemory {
		t.Errorf("%d bytes of the bound still taken after every call ended", defaultHeldBodyMemory-free)
	}
}

// A response kept by a waiting retry, past its share of the bound, reads
// what was kept and then ErrHeldBodyTruncated; one within it reads whole.
func TestHeldBodyTruncated(t *testing.T) {
	pool := newMemPool(100)
	long := withBody(respond(0), io.NopCloser(strings.NewReader(strings.Repeat("y", 300))), 300)
	detach(long, pool)
	b, err := io.ReadAll(long.Body)
	if len(b) != 100 || !errors.Is(err, ErrHeldBodyTruncated) {
		t.Errorf("cut body: %d bytes, %v; want the 100 kept and ErrHeldBodyTruncated", len(b), err)
	}
	short := withBody(respond(0), io.NopCloser(strings.NewReader("abc")), -1)
	detach(short, pool) // the pool is spent: nothing kept
	if b, err := io.ReadAll(short.Body); len(b) != 0 || !errors.Is(err, ErrHeldBodyTruncated) {
		t.Errorf("with the bound spent: %q, %v; want nothing and ErrHeldBodyTruncated", b, err)
	}
	long.Body.Close()
	short.Body.Close()
	again := withBody(respond(0), io.NopCloser(strings.NewReader("abc")), -1)
	detach(again, pool)
	if b, err := io.ReadAll(again.Body); string(b) != "abc" || err != nil {
		t.Errorf("after the memory came back: %q, %v; want \"abc\" whole", b, err)
	}
	again.Body.Close()
	if pool.free.Load() != 100 {
		t.Errorf("%d bytes free after every body was closed, want 100", pool.free.Load())
	}
}
