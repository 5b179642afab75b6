package retryhttp

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/retryhttp/retryhttp/retrytest"
)

func slow(d time.Duration, body string) retrytest.Step {
	return retrytest.Step{Reply: retrytest.Reply{Delay: d, Body: body}}
}

// A slow first attempt gets a copy after the delay; the copy's answer wins,
// the slow one is cancelled and closed.
func TestHedgeWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := retrytest.NewScriptTransport(slow(500*time.Millisecond, "slow"), slow(5*time.Millisecond, "fast"))
		m := NewMetrics()
		tr := New(base, WithMetrics(m), WithHedging(HedgeConfig{Delay: 10 * time.Millisecond}))
		start := time.Now()
		resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		synctest.Wait()
		if string(b) != "fast" || time.Since(start) != 15*time.Millisecond {
			t.Errorf("got %q after %v, want the hedge's answer after 15ms", b, time.Since(start))
		}
		if base.Count() != 2 || base.OpenBodies() != 0 {
			t.Errorf("%d attempts, %d bodies open; want 2, none", base.Count(), base.OpenBodies())
		}
		if testutil.ToFloat64(m.hedges) != 1 || testutil.ToFloat64(m.hedgeWon) != 1 {
			t.Errorf("hedges %v, won %v; want 1, 1", testutil.ToFloat64(m.hedges), testutil.ToFloat64(m.hedgeWon))
		}
	})
}

// A fast first attempt needs no hedge.
func TestHedgeNotNeeded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := retrytest.NewScriptTransport(slow(5*time.Millisecond, "fast"))
		tr := New(base, WithHedging(HedgeConfig{Delay: 10 * time.Millisecond}))
		resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if base.Count() != 1 {
			t.Errorf("%d attempts, want 1", base.Count())
		}
	})
}

// A POST without a key is never hedged, and neither is a body that has no
// GetBody; the budget and the breaker bound the hedges.
func TestHedgeGates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		run := func(name, method string, body io.Reader, opts ...Option) int {
			base := retrytest.NewScriptTransport(slow(100*time.Millisecond, "slow"), slow(time.Millisecond, "fast"))
			tr := New(base, append([]Option{WithHedging(HedgeConfig{Delay: 10 * time.Millisecond})}, opts...)...)
			resp, err := tr.RoundTrip(newRequest(t, method, "http://h/", body))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			resp.Body.Close()
			synctest.Wait()
			return base.Count()
		}
		if n := run("POST without a key", "POST", strings.NewReader("pay")); n != 1 {
			t.Errorf("POST without a key: %d attempts, want 1: never hedged", n)
		}
		if n := run("PUT without GetBody", "PUT", struct{ io.Reader }{strings.NewReader("x")}); n != 1 {
			t.Errorf("PUT without GetBody: %d attempts, want 1", n)
		}
		if n := run("budget spent", "GET", nil, WithBudget(NewBudget(0, 0))); n != 1 {
			t.Errorf("budget spent: %d attempts, want 1", n)
		}
		if n := run("keyed POST", "POST", strings.NewReader("pay"), WithIdempotencyKeys()); n != 2 {
			t.Errorf("keyed POST: %d attempts, want 2: hedged", n)
		}
		// The breaker open: no hedge.
		base := retrytest.NewScriptTransport(slow(100*time.Millisecond, "slow"), slow(time.Millisecond, "fast"))
		tr := New(base, WithHedging(HedgeConfig{Delay: 10 * time.Millisecond}))
		trip(tr, "h")
		resp, _ := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
		resp.Body.Close()
		synctest.Wait()
		if base.Count() != 1 {
			t.Errorf("breaker open: %d attempts, want 1", base.Count())
		}
	})
}

// The delay follows the host: no hedge before 20 answers are known, then
// the 95th percentile of their latencies.
func TestHedgeAdaptiveDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		steps := make([]retrytest.Step, 0, 40)
		for range 30 {
			steps = append(steps, slow(5*time.Millisecond, "ok"))
		}
		steps = append(steps, slow(time.Second, "slow"), slow(5*time.Millisecond, "fast"))
		base := retrytest.NewScriptTransport(steps...)
		tr := New(base, WithHedging(HedgeConfig{}))
		for range 30 {
			resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		if base.Count() != 30 {
			t.Fatalf("%d attempts for 30 fast requests, want no hedge", base.Count())
		}
		start := time.Now()
		resp, _ := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		synctest.Wait()
		if string(b) != "fast" || time.Since(start) > 20*time.Millisecond {
			t.Errorf("got %q after %v; want the hedge's, sent after about the p95 of 5ms", b, time.Since(start))
		}
	})
}

// Over a real connection: the slow copy that lost is cancelled, its
// connection closed, and nothing is left behind (goleak checks the
// goroutines when the package's tests end).
func TestHedgeRealServerNoLeaks(t *testing.T) {
	var n atomic.Int32
	srv := retrytest.NewServer()
	srv.Handle(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			select {
			case <-time.After(2 * time.Second):
			case <-r.Context().Done():
				return
			}
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	tr := New(nil, WithHedging(HedgeConfig{Delay: 20 * time.Millisecond}))
	start := time.Now()
	resp, err := tr.RoundTrip(newRequest(t, "GET", srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if time.Since(start) > time.Second {
		t.Errorf("answered after %v: the hedge did not win", time.Since(start))
	}
	tr.CloseIdleConnections()
	for end := time.Now().Add(3 * time.Second); srv.OpenConns() > 0 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	if c := srv.OpenConns(); c != 0 {
		t.Errorf("%d connections left open at the server", c)
	}
}

// A copy is not sent while the first attempt's body is still being read:
// a slow upload, which a copy would not speed up, and a GetBody that
// rewinds the reader it is read from would race it.
func TestHedgeWaitsForTheBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var attempts atomic.Int64
		base := retrytest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
			attempts.Add(1)
			time.Sleep(100 * time.Millisecond) // the upload, read slowly
			io.Copy(io.Discard, r.Body)
			r.Body.Close()
			return respond(200), nil
		})
		tr := New(base, WithHedging(HedgeConfig{Delay: 10 * time.Millisecond}))
		resp, err := tr.RoundTrip(newRequest(t, "PUT", "http://h/", strings.NewReader("upload")))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		synctest.Wait()
		if n := attempts.Load(); n != 1 {
			t.Errorf("%d attempts, want 1: no copy while the body is being read", n)
		}
	})
}
