package retryhttp

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/internal/rotation"
	"github.com/retryhttp/retryhttp/retrytest"
)

// threeBackends starts three servers on one port of 127.0.0.1, .2 and .3,
// the first of them bad in the way given; over TLS (HTTP/2) if tls.
func threeBackends(t *testing.T, bad string, useTLS bool) (port string, srvs []*httptest.Server) {
	t.Helper()
	for try := 0; try < 20 && srvs == nil; try++ {
		l1, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ = net.SplitHostPort(l1.Addr().String())
		ls := []net.Listener{l1}
		for _, ip := range []string{"127.0.0.2", "127.0.0.3"} {
			l, err := net.Listen("tcp", net.JoinHostPort(ip, port))
			if err != nil {
				break // the port is taken there: try another
			}
			ls = append(ls, l)
		}
		if len(ls) < 3 {
			for _, l := range ls {
				l.Close()
			}
			continue
		}
		for i, l := range ls {
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
			if i == 0 {
				h = badHandler(bad)
			}
			s := httptest.NewUnstartedServer(h)
			s.Listener.Close()
			s.Listener = l
			if useTLS {
				s.EnableHTTP2 = true
				s.StartTLS()
			} else {
				s.Start()
			}
			t.Cleanup(s.Close)
			srvs = append(srvs, s)
		}
	}
	if srvs == nil {
		t.Skip("no port free on 127.0.0.1, .2 and .3 at once")
	}
	return port, srvs
}

func badHandler(bad string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		switch bad {
		case "503":
			w.WriteHeader(http.StatusServiceUnavailable)
		case "reset":
			if hj, ok := w.(http.Hijacker); ok {
				c, _, _ := hj.Hijack()
				c.(*net.TCPConn).SetLinger(0)
				c.Close()
				return
			}
			panic(http.ErrAbortHandler) // HTTP/2: the stream is reset
		case "hang":
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}
	}
}

// A name that resolves to three addresses, one of them bad (503, reset,
// or never answering): with WithAddressRotation every request succeeds
// within 2 attempts, over HTTP/1.1 and HTTP/2, and the good addresses'
// connections are reused.
func TestAddressRotation(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		for _, bad := range []string{"503", "reset", "hang"} {
			t.Run(fmt.Sprintf("%s tls=%v", bad, useTLS), func(t *testing.T) {
				t.Parallel() // the hangs' timeouts are waits, not work: they overlap
				port, srvs := threeBackends(t, bad, useTLS)
				var dials sync.Map // address: *atomic.Int32
				base := &http.Transport{ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 4}
				if useTLS {
					base.TLSClientConfig = &tls.Config{RootCAs: srvs[0].Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
				}
				base.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
					n, _ := dials.LoadOrStore(addr, new(atomic.Int32))
					n.(*atomic.Int32).Add(1)
					return (&net.Dialer{}).DialContext(ctx, network, addr)
				}
				var attempts atomic.Int32
				var opts []Option
				if bad == "hang" { // the only one that needs it: elsewhere, a loaded machine's slow handshake is no failure
					opts = append(opts, WithPerAttemptTimeout(200*time.Millisecond))
				}
				tr := New(base, append(opts, WithAddressRotation(), WithoutBudget(), WithBackoff(Constant(0)),
					WithAttemptHook(func(ctx context.Context, a AttemptStart) (context.Context, func(AttemptEnd)) {
						attempts.Add(1)
						return ctx, nil
					}))...)
				defer tr.CloseIdleConnections()
				tr.c.base.(*rotation.Transport).Resolve = func(context.Context, string) ([]string, error) {
					return []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}, nil
				}
				scheme := "http"
				if useTLS {
					scheme = "https"
				}
				const requests = 9
				for i := range requests {
					before := attempts.Load()
					resp, err := tr.RoundTrip(newRequest(t, "GET", scheme+"://example.com:"+port+"/", nil))
					if err != nil || resp.StatusCode != 200 {
						t.Fatalf("request %d: %v, %v", i, resp, err)
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if n := attempts.Load() - before; n > 2 {
						t.Errorf("request %d took %d attempts, want at most 2", i, n)
					}
				}
				for _, ip := range []string{"127.0.0.2", "127.0.0.3"} {
					n, _ := dials.Load(net.JoinHostPort(ip, port))
					if n == nil || n.(*atomic.Int32).Load() > 4 {
						t.Errorf("%s dialled %v times for %d requests: its connections are not reused", ip, n, requests)
					}
				}
			})
		}
	}
}

// Without WithAddressRotation, a retry goes where Go's dialer goes: the
// first address, the bad one, every time.
func TestWithoutAddressRotationTheRetryMeetsTheSameBackend(t *testing.T) {
	port, _ := threeBackends(t, "503", false)
	base := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port)) // the first of the three
	}}
	tr := New(base, WithoutBudget(), WithBackoff(Constant(0)), WithMaxAttempts(2))
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(newRequest(t, "GET", "http://example.com:"+port+"/", nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Errorf("status %d: the retry found another backend without rotation", resp.StatusCode)
	}
}

// WithAddressRotation refuses a base whose addresses it cannot choose.
func TestAddressRotationNeedsATransport(t *testing.T) {
	opaque := retrytest.RoundTripperFunc(http.DefaultTransport.RoundTrip)
	if p := catch(func() { New(opaque, WithAddressRotation()) }); p == nil {
		t.Error("WithAddressRotation over an opaque base accepted")
	}
	if p := catch(func() { New(nil, WithAddressRotation()) }); p != nil {
		t.Errorf("WithAddressRotation over the default base: %v", p)
	}
}

// Concurrent requests each keep their own tried addresses: with the bad
// backend among three and 2 attempts allowed, none of 200 requests at once
// meets it twice, whatever the others' turns.
func TestAddressRotationConcurrent(t *testing.T) {
	port, _ := threeBackends(t, "503", false)
	tr := New(&http.Transport{MaxIdleConnsPerHost: 64}, WithAddressRotation(), WithoutBudget(), WithoutRetryBreaker(),
		WithBackoff(Constant(0)), WithMaxAttempts(2))
	defer tr.CloseIdleConnections()
	tr.c.base.(*rotation.Transport).Resolve = func(context.Context, string) ([]string, error) {
		return []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}, nil
	}
	var wg sync.WaitGroup
	var failed atomic.Int32
	for range 200 {
		wg.Go(func() {
			resp, err := tr.RoundTrip(newRequest(t, "GET", "http://example.com:"+port+"/", nil))
			if err != nil || resp.StatusCode != 200 {
				failed.Add(1)
			}
			if resp != nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n != 0 {
		t.Errorf("%d of 200 requests met the bad backend twice", n)
	}
}

// Retries do not move first attempts' turn: with one of two addresses
// refusing connections, first attempts still alternate, so that half of
// them, not all, meet the dead one (each then retried on the other).
func TestAddressRotationTurnIsFirstAttempts(t *testing.T) {
	port, _ := threeBackends(t, "ok", false)
	var attempts atomic.Int32
	tr := New(&http.Transport{}, WithAddressRotation(), WithoutBudget(), WithoutRetryBreaker(), WithBackoff(Constant(0)),
		WithAttemptHook(func(ctx context.Context, a AttemptStart) (context.Context, func(AttemptEnd)) {
			attempts.Add(1)
			return ctx, nil
		}))
	defer tr.CloseIdleConnections()
	tr.c.base.(*rotation.Transport).Resolve = func(context.Context, string) ([]string, error) {
		return []string{"127.0.0.1", "127.0.0.9"}, nil // nothing listens on .9
	}
	const requests = 20
	for i := range requests {
		resp, err := tr.RoundTrip(newRequest(t, "GET", "http://example.com:"+port+"/", nil))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if n := attempts.Load(); n > requests*3/2+1 {
		t.Errorf("%d attempts for %d requests: first attempts keep meeting the dead address", n, requests)
	}
}
