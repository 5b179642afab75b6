// This file holds the storm engine: a run of one contender in one
// scenario, on its own server (server.go); its clients, which send a
// burst, a steady stream (open loop) or one request after another (closed
// loop) through the contender's RoundTripper, each request tagged with its
// criticality in a mixed scenario; and the outcome of each request, which
// tally.go turns into a Result.

package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/retryhttp/retryhttp/bench"
)

// errorPause is how long a closed-loop worker with no think time pauses
// after a request that failed.
const errorPause = 10 * time.Millisecond

// newBase is a client's pool; refused, if set, is told of each dial
// that the server refused.
func newBase(refused func()) *http.Transport {
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil && refused != nil && errors.Is(err, syscall.ECONNREFUSED) {
				refused()
			}
			return c, err
		},
		MaxIdleConns:        2000,
		MaxIdleConnsPerHost: 2000,
		IdleConnTimeout:     30 * time.Second,
	}
}

// outcome is what became of one request: when it started, how long it
// took, whether it succeeded, and its criticality (none outside a mixed
// scenario).
type outcome struct {
	start   time.Duration
	latency time.Duration
	ok      bool
	class   class
}

// run is one contender's run in one scenario: its server, its clients
// and the outcomes of their requests.
type run struct {
	sc       Scenario
	c        bench.Contender
	s        *server
	addr     string
	url      string
	refused  func() // Refuse: counts a refused dial as an attempt
	shared   *http.Transport
	sharedRT http.RoundTripper
	fleet    []http.RoundTripper
	next     int // the fleet's next client, round-robin
	wg       sync.WaitGroup

	mu       sync.Mutex
	bases    []*http.Transport   // every pool but shared, to close
	rts      []http.RoundTripper // every RoundTripper made, to close those that are io.Closers
	outcomes []outcome
}

// Run runs one contender through the scenario, on its own server.
func Run(sc Scenario, c bench.Contender) (Result, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Result{}, err
	}
	r := newRun(sc, c, l.Addr().String())
	hs := &http.Server{Handler: r.s}
	var flips sync.WaitGroup
	stop := make(chan struct{})
	if sc.Refuse {
		flips.Add(1)
		go func() {
			defer flips.Done()
			hs = r.s.refuseSpells(r.addr, stop)
		}()
	}
	r.clients()
	r.s.start = time.Now()
	go hs.Serve(l)
	r.s.up <- hs
	r.drive()
	r.wg.Wait()
	elapsed := time.Since(r.s.start)
	close(stop)
	flips.Wait()
	hs.Close()
	r.close()
	return r.tally(elapsed), nil
}

// newRun sets up a run's server on addr: when it is down, if ever.
func newRun(sc Scenario, c bench.Contender, addr string) *run {
	s := &server{sc: sc, up: make(chan *http.Server, 1)}
	switch {
	case sc.RateCap > 0 || sc.Slots > 0 || len(sc.Steps) > 0 || sc.Quota > 0:
		s.downFrom, s.downTo = 0, 0 // never down
	case sc.Shape != "burst":
		s.downFrom, s.downTo = sc.Warmup, sc.Warmup+sc.Outage
	default:
		s.downFrom, s.downTo = 0, sc.Outage
	}
	r := &run{sc: sc, c: c, s: s, addr: addr, url: "http://" + addr + "/"}
	if sc.Refuse {
		r.refused = func() { s.count(time.Since(s.start)) }
	}
	return r
}

// newRT is the contender's RoundTripper over base, noted to be closed.
func (r *run) newRT(base *http.Transport) http.RoundTripper {
	rt := r.c.New(base)
	r.mu.Lock()
	r.rts = append(r.rts, rt)
	r.mu.Unlock()
	return rt
}

// clients makes the shared client and the fleet's, before the start.
func (r *run) clients() {
	r.shared = newBase(r.refused)
	r.sharedRT = r.newRT(r.shared)
	for range r.sc.Instances {
		b := newBase(r.refused)
		r.bases = append(r.bases, b)
		r.fleet = append(r.fleet, r.newRT(b))
	}
}

// client is the RoundTripper for the next request (or closed-loop
// worker): the fleet's next, the shared one, or one of its own.
func (r *run) client() http.RoundTripper {
	if len(r.fleet) > 0 {
		r.next++
		return r.fleet[r.next%len(r.fleet)]
	}
	if !r.sc.PerProcess && !r.sc.PerWorker {
		return r.sharedRT
	}
	b := newBase(r.refused)
	r.mu.Lock()
	r.bases = append(r.bases, b)
	r.mu.Unlock()
	return r.newRT(b)
}

// send sends request i through rt, tagged with its criticality in a mixed
// scenario if the contender tags, and notes its outcome.
func (r *run) send(rt http.RoundTripper, i int) (ok bool) {
	defer r.wg.Done()
	begin := time.Since(r.s.start)
	ctx, cancel := context.WithTimeout(context.Background(), r.sc.Timeout)
	defer cancel()
	cl := r.sc.classOf(i)
	if cl != unclassed && r.c.Tag != nil {
		ctx = r.c.Tag(ctx, cl == critical)
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", r.url, nil)
	resp, err := rt.RoundTrip(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		ok = resp.StatusCode == 200
	}
	r.mu.Lock()
	r.outcomes = append(r.outcomes, outcome{begin, time.Since(r.s.start) - begin, ok, cl})
	r.mu.Unlock()
	return ok
}

// drive sends the scenario's requests, in its shape, and returns once
// each is sent (not done: r.wg waits for those).
func (r *run) drive() {
	switch r.sc.Shape {
	case "closed":
		r.closedLoop()
	case "steady":
		total := r.sc.Warmup + r.sc.Outage + r.sc.Recovery
		n := int(total.Seconds() * float64(r.sc.Rate))
		at := arrivals(r.sc, n)
		for i := range n {
			if d := at[i] - time.Since(r.s.start); d > 0 {
				time.Sleep(d)
			}
			r.wg.Add(1)
			go func(rt http.RoundTripper) { r.send(rt, i) }(r.client())
		}
	default:
		rts := make([]http.RoundTripper, r.sc.N)
		for i := range rts {
			rts[i] = r.client()
		}
		r.wg.Add(r.sc.N)
		for i := range r.sc.N {
			go func() { r.send(rts[i], i) }()
		}
	}
}

// closedLoop starts the scenario's workers, each sending its next request
// when the last ends, until the load's time is over; worker w's j-th
// request is request w × 1,000,000 + j.
func (r *run) closedLoop() {
	total := r.sc.Warmup + r.sc.Outage + r.sc.Recovery
	for w := range r.sc.Workers {
		rt := r.client()
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			for j := 0; j < 1_000_000 && time.Since(r.s.start) < total; j++ {
				r.wg.Add(1)
				ok := r.send(rt, w*1_000_000+j)
				switch {
				case r.sc.Think > 0:
					time.Sleep(r.sc.Think)
				case !ok:
					// A caller that failed logs it and goes on: not
					// at once (a refusal that takes a microsecond
					// would spin the worker through its million).
					time.Sleep(errorPause)
				}
			}
		}()
	}
}

// close closes the run's pools' idle connections, and its RoundTrippers
// that are io.Closers (a Prioritizer's calibrations).
func (r *run) close() {
	r.shared.CloseIdleConnections()
	for _, b := range r.bases {
		b.CloseIdleConnections()
	}
	for _, rt := range r.rts {
		if c, ok := rt.(io.Closer); ok {
			c.Close()
		}
	}
}
