package retryhttp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retryhttp/retryhttp/retrytest"
)

// perRequest is a base that answers each request (told apart by its X-Id
// header) from a script of its own: codes[i] for its i-th attempt, then
// 200. It counts every request's attempts.
type perRequest struct {
	codes []int
	mu    sync.Mutex
	seen  map[string]int
	delay time.Duration
}

func (p *perRequest) RoundTrip(r *http.Request) (*http.Response, error) {
	id := r.Header.Get("X-Id")
	p.mu.Lock()
	if p.seen == nil {
		p.seen = map[string]int{}
	}
	n := p.seen[id]
	p.seen[id]++
	p.mu.Unlock()
	if p.delay > 0 {
		time.Sleep(p.delay)
	}
	code := 200
	if n < len(p.codes) {
		code = p.codes[n]
	}
	return reply(r, code, nil), nil
}

// parallel sends n requests through tr at once and returns how many got a
// 200.
func parallel(t *testing.T, tr http.RoundTripper, n int) int {
	var wg sync.WaitGroup
	var ok atomic.Int64
	for i := range n {
		wg.Go(func() {
			req := newRequest(t, "GET", "http://h/", nil)
			req.Header.Set("X-Id", string(rune('a'+i%26))+strings.Repeat("x", i/26))
			resp, err := tr.RoundTrip(req)
			if err != nil {
				return
			}
			resp.Body.Close()
			if resp.StatusCode == 200 {
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	return int(ok.Load())
}

// A user's parallel test with a fake server: 9 GETs at once through one
// Transport with Constant(0), each answered 503, 503, 200. Every one
// succeeds, with exactly the 3 attempts its script needs.
func TestParallelConstantZeroAllSucceed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &perRequest{codes: []int{503, 503}}
		tr := New(base, WithBackoff(Constant(0)))
		if ok := parallel(t, tr, 9); ok != 9 {
			t.Fatalf("%d of 9 parallel requests succeeded, want 9", ok)
		}
		for id, n := range base.seen {
			if n != 3 {
				t.Errorf("request %s: %d attempts, want 3", id, n)
			}
		}
	})
}

// The same in real time, under the race detector, as a user's test runs.
func TestParallelConstantZeroRealTime(t *testing.T) {
	for range 20 {
		base := &perRequest{codes: []int{503, 503}}
		tr := New(base, WithBackoff(Constant(0)))
		if ok := parallel(t, tr, 9); ok != 9 {
			t.Fatalf("%d of 9 parallel requests succeeded, want 9", ok)
		}
	}
}

// 200 concurrent requests that each fail once, with a sub-millisecond
// backoff or none, and no budget (as docs/testing.md advises): all
// succeed, with two attempts each.
func TestConcurrentFailOnceAllSucceed(t *testing.T) {
	for _, b := range []Backoff{FullJitter(50*time.Microsecond, time.Millisecond), Constant(0)} {
		synctest.Test(t, func(t *testing.T) {
			base := &perRequest{codes: []int{503}}
			tr := New(base, WithBackoff(b), WithoutBudget())
			if ok := parallel(t, tr, 200); ok != 200 {
				t.Fatalf("%T: %d of 200 requests succeeded, want 200", b, ok)
			}
			for id, n := range base.seen {
				if n != 2 {
					t.Errorf("%T: request %s: %d attempts, want 2", b, id, n)
				}
			}
		})
	}
}

// The same, in real time and under the race detector, as a user's test
// runs it: every request succeeds.
func TestConcurrentFailOnceRealTime(t *testing.T) {
	base := &perRequest{codes: []int{503}}
	tr := New(base, WithBackoff(FullJitter(50*time.Microsecond, time.Millisecond)), WithoutBudget())
	if ok := parallel(t, tr, 200); ok != 200 {
		t.Fatalf("%d of 200 requests succeeded, want 200", ok)
	}
}

// A retry that the budget refuses, on a host that is not failing, gives up
// at once: no wait for its Retry-After, nothing logged or counted as a
// retry.
func TestRefusedRetryGivesUpAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := retrytest.NewScriptTransport(retrytest.Step{Reply: retrytest.RetryAfter(503, "20")})
		m := NewMetrics()
		var retries int
		tr := New(base, WithBudget(NewBudget(0, 0)), WithMetrics(m),
			retryHook(func(AttemptStart) { retries++ }))
		start := time.Now()
		resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
		if err != nil || resp.StatusCode != 503 {
			t.Fatalf("RoundTrip = %v, %v; want the 503", resp, err)
		}
		resp.Body.Close()
		if d := time.Since(start); d != 0 {
			t.Errorf("a retry the budget refused came back after %v, want at once", d)
		}
		if n := sumCounter(t, m, "retryhttp_retries_total"); retries != 0 || n != 0 {
			t.Errorf("a refused retry was reported: OnRetry %d, retries_total %v", retries, n)
		}
		if got := sumCounter(t, m, "retryhttp_giveups_total"); got != 1 {
			t.Errorf("giveups_total = %v, want 1 (budget)", got)
		}
	})
}

// attempts_total equals requests plus sent retries, whatever admission
// did: here some retries are held and give up, some are refused.
func TestAttemptsAreRequestsPlusSentRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		down := true
		var mu sync.Mutex
		base := retrytest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			code := 200
			if down {
				code = 503
			}
			mu.Unlock()
			return respond(code), nil
		})
		m := NewMetrics()
		var onRetry atomic.Int64
		tr := New(base, WithMetrics(m), WithBudget(NewBudget(0.1, 1)),
			retryHook(func(AttemptStart) { onRetry.Add(1) }))
		var wg sync.WaitGroup
		for i := range 300 {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * 10 * time.Millisecond)
				resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
				if err == nil {
					resp.Body.Close()
				}
			})
		}
		time.Sleep(2 * time.Second)
		mu.Lock()
		down = false
		mu.Unlock()
		wg.Wait()
		attempts := sumCounter(t, m, "retryhttp_attempts_total")
		requests := sumCounter(t, m, "retryhttp_requests_total")
		retries := sumCounter(t, m, "retryhttp_retries_total")
		if attempts != requests+retries || int64(retries) != onRetry.Load() {
			t.Errorf("attempts %v, requests %v, retries %v, OnRetry %d: want attempts = requests + retries = requests + OnRetry",
				attempts, requests, retries, onRetry.Load())
		}
	})
}

// sumCounter adds up the series of the counter family name in m.
func sumCounter(_ *testing.T, m *Metrics, name string) float64 { return sumFamily(m, name) }

// gauge adds up the series of the gauge family name in m.
func gauge(_ *testing.T, m *Metrics, name string) float64 { return sumFamily(m, name) }

// sumFamily adds up the values of every series of the family name in m,
// counters and gauges alike.
func sumFamily(m *Metrics, name string) float64 {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	mfs, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, mt := range mf.GetMetric() {
				sum += mt.GetCounter().GetValue() + mt.GetGauge().GetValue()
			}
		}
	}
	return sum
}

// openBreaker fails first attempts to host h over time, until its breaker
// opens.
func openBreaker(t *testing.T, tr *Transport, fail *atomic.Bool) {
	t.Helper()
	fail.Store(true)
	for range 20 {
		time.Sleep(2 * time.Millisecond)
		resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil).WithContext(NoRetry(context.Background())))
		if err == nil {
			resp.Body.Close()
		}
	}
	if !hostOf(tr, "h").Open {
		t.Fatal("the breaker did not open")
	}
}

// A held retry never goes before the server's Retry-After, even when the
// breaker closes first.
func TestHeldRetryWaitsForRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fail atomic.Bool
		var sentAt []time.Duration
		start := time.Now()
		var mu sync.Mutex
		base := retrytest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
			h := http.Header{}
			code := 200
			if fail.Load() || r.Header.Get("X-Id") == "ra" && len(sentAt) == 0 {
				code = 503
				h.Set("Retry-After", "5")
			}
			if r.Header.Get("X-Id") == "ra" {
				mu.Lock()
				sentAt = append(sentAt, time.Since(start))
				mu.Unlock()
			}
			return reply(nil, code, h), nil
		})
		tr := New(base)
		openBreaker(t, tr, &fail)
		fail.Store(false)
		start = time.Now()
		go func() { // the host answers again at 1s
			time.Sleep(time.Second)
			resp, _ := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
			resp.Body.Close()
		}()
		req := newRequest(t, "GET", "http://h/", nil)
		req.Header.Set("X-Id", "ra")
		resp, err := tr.RoundTrip(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("RoundTrip = %v, %v; want 200", resp, err)
		}
		resp.Body.Close()
		if len(sentAt) != 2 || sentAt[1]-sentAt[0] < 5*time.Second {
			t.Errorf("attempts at %v: the retry went before Retry-After: 5", sentAt)
		}
	})
}

// A held retry is released within its limit: with a 260ms deadline and
// the host back at 240ms, the caller gets the 200, not a deadline error.
func TestHeldRetryReleasedWithinDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := newFailing()
		base.down.Store(false)
		fail := &base.down
		tr := New(base, WithBackoff(Constant(200*time.Millisecond)), WithRetryBreaker(BreakerConfig{ProbeBackoff: Constant(time.Hour)}))
		openBreaker(t, tr, fail)
		t0 := time.Now()
		go func() {
			time.Sleep(240 * time.Millisecond)
			fail.Store(false)
			resp, _ := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
			resp.Body.Close()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 260*time.Millisecond)
		defer cancel()
		var events []string
		ctx = WithRequestOptions(ctx, WithRetryIf(func(r *http.Response, err error) Decision {
			events = append(events, fmt.Sprint(time.Since(t0), r.StatusCode))
			return NoOpinion
		}))
		resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil).WithContext(ctx))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("RoundTrip = %v, %v; want the 200 of the released retry %v", resp, err, events)
		}
		resp.Body.Close()
	})
}

// A held retry never goes past WithMaxElapsed, not even as the probe that
// a held retry at its limit becomes once the probe in flight ends: the
// request gives up with its last response, reason max_elapsed.
func TestHeldRetryStopsAtMaxElapsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fail atomic.Bool
		var mu sync.Mutex
		sent := map[string][]time.Duration{}
		t0 := time.Now()
		base := retrytest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
			id := r.Header.Get("X-Id")
			mu.Lock()
			sent[id] = append(sent[id], time.Since(t0))
			n := len(sent[id])
			mu.Unlock()
			if id == "a" && n > 1 { // a's retry, the probe, hangs
				<-r.Context().Done()
				return nil, r.Context().Err()
			}
			code := 200
			if fail.Load() {
				code = 503
			}
			return respond(code), nil
		})
		gu := &giveUps{start: t0}
		tr := New(base, WithBackoff(Constant(10*time.Millisecond)), WithLogger(slog.New(gu)),
			WithRetryBreaker(BreakerConfig{ProbeTimeout: time.Second, MaxHold: time.Second}))
		openBreaker(t, tr, &fail)
		call := func(id string, ctx context.Context) (*http.Response, error) {
			req := newRequest(t, "GET", "http://h/", nil).WithContext(ctx)
			req.Header.Set("X-Id", id)
			return tr.RoundTrip(req)
		}
		ctxA, cancelA := context.WithCancel(context.Background())
		doneA := make(chan struct{})
		go func() {
			defer close(doneA)
			if resp, err := call("a", ctxA); err == nil {
				resp.Body.Close()
			}
		}()
		defer func() { cancelA(); <-doneA }()
		time.Sleep(50 * time.Millisecond) // a's retry is the probe in flight
		b0 := time.Since(t0)
		resp, err := call("b", WithRequestOptions(context.Background(), WithMaxElapsed(100*time.Millisecond)))
		if err != nil || resp.StatusCode != 503 {
			t.Fatalf("RoundTrip = %v, %v; want the 503", resp, err)
		}
		resp.Body.Close()
		mu.Lock()
		defer mu.Unlock()
		if len(sent["a"]) < 2 {
			t.Fatalf("a sent %v: its retry never became the probe", sent["a"])
		}
		for _, at := range sent["b"] {
			if at-b0 > 100*time.Millisecond {
				t.Errorf("b's attempt went %v after it began, past WithMaxElapsed(100ms): %v", at-b0, sent["b"])
			}
		}
		if n := len(gu.list); n == 0 || gu.list[n-1].reason != string(GiveUpMaxElapsed) {
			t.Errorf("give-ups %v, want max_elapsed last", gu.list)
		}
	})
}

// Per-request options bind hedging: NoRetry and WithMaxAttempts(1) send
// one copy.
func TestHedgeHonoursPerRequestOptions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, ctx := range []context.Context{NoRetry(context.Background()),
			WithRequestOptions(context.Background(), WithMaxAttempts(1))} {
			base := retrytest.NewScriptTransport(slow(100*time.Millisecond, "slow"), slow(time.Millisecond, "fast"))
			tr := New(base, WithHedging(HedgeConfig{Delay: 10 * time.Millisecond}))
			resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil).WithContext(ctx))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			synctest.Wait()
			if base.Count() != 1 {
				t.Errorf("%d copies sent for a request that may take one attempt, want 1", base.Count())
			}
		}
	})
}

// Under hedging, a panic of the base or of a WithRetryIf condition reaches
// the caller of RoundTrip, and the condition runs on its goroutine.
func TestHedgePanicsReachCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int64
		base := retrytest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if n.Add(1) == 2 {
				panic("base")
			}
			time.Sleep(100 * time.Millisecond)
			return respond(200), nil
		})
		tr := New(base, WithHedging(HedgeConfig{Delay: 10 * time.Millisecond}))
		if p := catch(func() { tr.RoundTrip(newRequest(t, "GET", "http://h/", nil)) }); p != "base" {
			t.Errorf("the hedge's panic reached the caller as %v, want \"base\"", p)
		}
		caller := goroutineID()
		tr = New(retrytest.NewScriptTransport(slow(100*time.Millisecond, "slow"), slow(time.Millisecond, "fast")),
			WithHedging(HedgeConfig{Delay: 10 * time.Millisecond}),
			WithRetryIf(func(*http.Response, error) Decision {
				if goroutineID() != caller {
					panic("WithRetryIf ran on another goroutine")
				}
				panic("condition")
			}))
		if p := catch(func() { tr.RoundTrip(newRequest(t, "GET", "http://h/", nil)) }); p != "condition" {
			t.Errorf("the condition's panic reached the caller as %v, want \"condition\"", p)
		}
		synctest.Wait()
	})
}

// goroutineID is the running goroutine's number, from its stack header.
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	f := strings.Fields(string(buf))
	if len(f) < 2 {
		return ""
	}
	return f[1]
}

func catch(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}

// Configurations that cannot work are refused by New, naming the option.
func TestAdmissionInvalidConfig(t *testing.T) {
	for _, tt := range []struct {
		opt  Option
		name string
	}{
		{WithRetryBreaker(BreakerConfig{Threshold: 1 << 32}), "Threshold"},
		{WithRetryBreaker(BreakerConfig{ProbeTimeout: -time.Second}), "ProbeTimeout"},
		{WithHedging(HedgeConfig{Percentile: math.NaN()}), "Percentile"},
		{WithHedging(HedgeConfig{Percentile: 1}), "Percentile"},
		{WithHedging(HedgeConfig{MaxExtra: math.MaxInt}), "MaxExtra"},
	} {
		p := catch(func() { New(nil, tt.opt) })
		if err, ok := p.(error); !ok || !strings.Contains(err.Error(), tt.name) {
			t.Errorf("New with a bad %s: panic %v, want an error naming it", tt.name, p)
		}
	}
}

// A FailFast probe that hangs counts as failed after its timeout, and the
// next probe finds the host back: the host is not refused for as long as
// the probe hangs.
func TestFailFastHungProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fail, hang atomic.Bool
		base := retrytest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if hang.Load() {
				<-r.Context().Done()
				return nil, r.Context().Err()
			}
			code := 200
			if fail.Load() {
				code = 503
			}
			return respond(code), nil
		})
		tr := New(base, WithRetryBreaker(BreakerConfig{FailFast: true, ProbeBackoff: Constant(100 * time.Millisecond)}))
		openBreaker(t, tr, &fail)
		time.Sleep(100 * time.Millisecond)
		hang.Store(true)
		ctx, cancel := context.WithCancel(context.Background())
		go tr.RoundTrip(newRequest(t, "GET", "http://h/", nil).WithContext(ctx)) // the probe, hung
		synctest.Wait()
		hang.Store(false)
		fail.Store(false)
		// Within the probe's timeout (400ms) and the next interval, a
		// request goes as the next probe and succeeds.
		var got int
		for range 100 {
			time.Sleep(20 * time.Millisecond)
			resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
			if err == nil {
				resp.Body.Close()
				got = resp.StatusCode
				break
			}
			if !errors.Is(err, ErrCircuitOpen) {
				t.Fatal(err)
			}
		}
		cancel()
		if got != 200 || hostOf(tr, "h").Open {
			t.Errorf("after a hung probe: status %d, open %v; want 200 and closed", got, hostOf(tr, "h").Open)
		}
	})
}

// A client with little traffic of its own (2 requests a second) through a
// 3s outage: its retries are held, not refused for lack of budget, and
// most requests started in the outage succeed.
func TestLowTrafficBlipSaved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		down := func() bool { d := time.Since(start); return d >= 5*time.Second && d < 8*time.Second }
		base := retrytest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
			code := 200
			if down() {
				code = 503
			}
			return respond(code), nil
		})
		tr := New(base)
		var wg sync.WaitGroup
		var started, ok atomic.Int64
		for i := range 26 { // 13 s at 2/s
			wg.Go(func() {
				time.Sleep(time.Duration(i) * 500 * time.Millisecond)
				inOutage := down()
				resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
				if inOutage {
					started.Add(1)
					if err == nil && resp.StatusCode == 200 {
						ok.Add(1)
					}
				}
				if err == nil {
					resp.Body.Close()
				}
			})
		}
		wg.Wait()
		if ok.Load()*10 < started.Load()*8 {
			t.Errorf("%d of %d requests started in the outage succeeded, want at least 80%%", ok.Load(), started.Load())
		}
	})
}

// A breaker's transitions are visible: OnStateChange with the host and
// the state; the open-hosts gauge and the transitions counter;
// a Warn record when it opens and an Info when it closes, with the name.
func TestBreakerVisible(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := newFailing()
		base.down.Store(false)
		fail := &base.down
		var events []string
		var logs strings.Builder
		m := NewMetrics()
		tr := New(base, WithName("users"), WithMetrics(m), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))),
			WithRetryBreaker(BreakerConfig{OnStateChange: func(host string, open bool) { events = append(events, fmt.Sprint(host, " open=", open)) }}))
		openBreaker(t, tr, fail)
		if g := gauge(t, m, "retryhttp_breaker_open_hosts"); g != 1 {
			t.Errorf("open hosts = %v while open, want 1", g)
		}
		fail.Store(false)
		resp, err := tr.RoundTrip(newRequest(t, "GET", "http://H:80/", nil))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := []string{"h open=true", "h open=false"}
		if fmt.Sprint(events) != fmt.Sprint(want) {
			t.Errorf("events %v, want %v", events, want)
		}
		if g := gauge(t, m, "retryhttp_breaker_open_hosts"); g != 0 {
			t.Errorf("open hosts = %v once closed, want 0", g)
		}
		if n := sumCounter(t, m, "retryhttp_breaker_transitions_total"); n != 2 {
			t.Errorf("transitions_total = %v, want 2", n)
		}
		for _, want := range []string{"level=WARN msg=\"retryhttp: breaker open\" name=users host=h score=10",
			"level=INFO msg=\"retryhttp: breaker closed\" name=users host=h"} {
			if !strings.Contains(logs.String(), want) {
				t.Errorf("logs lack %q:\n%s", want, logs.String())
			}
		}
	})
}

// An outage served as refused connections is an outage too: retries are
// held through it (a refused connection counts in the host's score,
// though it costs the budget nothing) and released when it is back, each
// request retried about once.
func TestRefusedOutageHeldAndReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := newFailing()
		base.fail = func(*http.Request) (*http.Response, error) {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
		}
		attempts, down := &base.attempts, &base.down
		tr := New(base)
		const n = 100
		var ok atomic.Int64
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				if resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil)); err == nil {
					if resp.StatusCode == 200 {
						ok.Add(1)
					}
					resp.Body.Close()
				}
			})
		}
		time.Sleep(time.Second)
		down.Store(false)
		wg.Wait()
		// The probes: one at a time, an eighth of 560-700ms apart at the
		// closest with 100 held, so at most 15 in the second.
		if ok.Load() != n || attempts.Load() > 2*n+15 {
			t.Errorf("%d of %d saved with %d attempts; want all, with one retry each and at most 15 probes", ok.Load(), n, attempts.Load())
		}
	})
}
