package main

// The storm engine: a server that goes down for D, then serves a bounded
// capacity (and, if weak, a fixed rate, refusing the excess at once), or,
// for overload, serves a fixed rate and refuses the excess at once, never
// down; clients that send a burst, a steady stream (open loop) or one
// request after another (closed loop) through a contender's RoundTripper;
// and what the server saw, per 100 ms.

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/retryhttp/retryhttp/bench"
)

// Scenario describes one storm.
type Scenario struct {
	Name        string
	Shape       string        // "burst": N requests at t=0; "steady": Rate a second; "closed": Workers, each sending its next request when the last ends
	N           int           // burst size
	Rate        int           // steady arrivals a second
	Warmup      time.Duration // steady: healthy time before the outage
	Outage      time.Duration // D: the server answers 503 to everything
	Recovery    time.Duration // steady: arrivals go on this long after the outage
	Capacity    int           // after the outage: requests served at once; the excess gets 503
	Work        time.Duration // time to serve one request
	RetryAfter  string        // if set, sent with every 503 during the outage; "lo-hi" sends a random whole number of seconds in [lo, hi]
	PerProcess  bool          // one client (RoundTripper) per request, sharing nothing
	Instances   int           // steady: if > 1, arrivals go round-robin to this many clients, each its own RoundTripper and pool (a fleet)
	Timeout     time.Duration // each request's context deadline
	Workers     int           // closed: callers, each one request at a time
	Think       time.Duration // closed: pause between a worker's requests
	PerWorker   bool          // closed: each worker its own client (a fleet of sequential clients); else one shared
	RateCap     int           // if > 0: the server serves this many requests a second (at once) and refuses the excess with 503 at once, and is never down
	Slots       int           // if > 0: the server serves this many requests at once, each for Work, and refuses one that finds them all busy with 503 at once (no queue: an Erlang loss system), and is never down
	Poisson     bool          // steady: arrivals at random (exponential gaps, mean 1/Rate, the same draw for every contender) instead of evenly spaced
	Steps       []Step        // if set: the server runs Capacity(t) requests at once, each for Work, queues as many again, and answers 503 beyond; never down
	Quota       int           // if > 0: the server serves this many requests per QuotaWindow, says what is left (RateLimit), and answers 429 beyond; never down
	QuotaWindow time.Duration
	Flap        time.Duration // if set: through the outage, the server is down for Flap and up for Flap, in turn, starting down
	Refuse      bool          // if set: the outage refuses connections (the listener is closed, its connections too) instead of answering 503; each refused dial counts as an attempt
	WeakRate    int           // if > 0: from the end of the outage, the server serves at most this many requests a second (RateCap's bucket) and refuses the excess with 503 at once, as well as its Capacity
}

// Step is a change of the server's capacity, at a time from the start.
type Step struct {
	At       time.Duration
	Capacity int
}

// Phase is what the server did between two capacity steps.
type Phase struct {
	Capacity int
	Goodput  float64       // requests served a second, over capacity / Work
	P99      time.Duration // of the time the served requests spent at the server, queued and served
}

const bucket = 100 * time.Millisecond

// errorPause is how long a closed-loop worker with no think time pauses
// after a request that failed.
const errorPause = 10 * time.Millisecond

// Result is what one run of a contender in a scenario measured.
type Result struct {
	Contender      string
	Requests       int
	Attempts       int64
	Successes      int
	OutageRequests int           // requests that started during the outage
	OutageAttempts int64         // attempts the server received during the outage
	OutageSuccess  int           // of the OutageRequests, those that succeeded
	PeakOutage     int64         // most attempts in one 100 ms during the outage
	PeakRecovery   int64         // most attempts in one 100 ms after it
	PeakAfter2s    int64         // most attempts in one 100 ms in the 2 s after it
	ShedAfter      int64         // 503s sent by the recovered server for want of capacity
	AfterRequests  int           // requests that started in the 2 s after the outage
	AfterSuccess   int           // of those, the ones that succeeded
	FailP99        time.Duration // 99th percentile of the time a failed request took to fail
	P50, P99       time.Duration
	Series         []int64 // attempts per 100 ms from the start
	Elapsed        time.Duration
	FirstOK        time.Duration // from the end of the outage to the server's first 200 after it (-1: none)
	OKAfter2s      int64         // 200s the server answered in the 2 s after the outage
	Served         int64         // 200s the server answered in all
	ServedOffered  int64         // 200s the server answered while the load was offered
	Phases         []Phase       // Steps: per phase
	TooMany        int64         // Quota: 429s answered
	QuotaUsed      float64       // Quota: served over the quota of the windows the load was offered in
}

// server is the storm's flaky server.
type server struct {
	sc       Scenario
	start    time.Time
	downFrom time.Duration
	downTo   time.Duration
	inflight atomic.Int64
	shed     atomic.Int64
	mu       sync.Mutex
	series   []int64
	firstOK  time.Duration // since start, the first 200 at or after downTo; 0: none yet
	okAfter  int64
	served   int64
	tokens   float64 // RateCap: the bucket
	refilled time.Duration
	running  int             // Steps: requests being served
	waiting  []chan struct{} // Steps: queued, in order
	sojourn  []served        // Steps: each request served, in order
	used     map[int64]int   // Quota: per window
	tooMany  int64
	up       chan *http.Server // Refuse: the server serving when the run starts

	servedOffered int64 // 200s answered while the load was offered
}

// served is a request the Steps server served: when, and how long it
// spent there, queued and served.
type served struct{ done, took time.Duration }

// settle is how long after a step its phase is measured from: the time a
// limit is given to find the new capacity.
const settle = 2 * time.Second

// down reports whether the server is down at t: in the outage, and, if
// it flaps, in one of its down spells.
func (s *server) down(t time.Duration) bool {
	if t < s.downFrom || t >= s.downTo {
		return false
	}
	return s.sc.Flap == 0 || int((t-s.downFrom)/s.sc.Flap)%2 == 0
}

// count counts an attempt that arrived at t.
func (s *server) count(t time.Duration) {
	s.mu.Lock()
	i := int(t / bucket)
	for len(s.series) <= i {
		s.series = append(s.series, 0)
	}
	s.series[i]++
	s.mu.Unlock()
}

// capacityAt is the Steps server's capacity at t.
func (s *server) capacityAt(t time.Duration) (int, int) {
	c, phase := s.sc.Capacity, 0
	for i, st := range s.sc.Steps {
		if t >= st.At {
			c, phase = st.Capacity, i
		}
	}
	return c, phase
}

// stepped serves a request on the Steps server: at once if a slot is
// free, after a wait if the queue has room, else 503 at once.
func (s *server) stepped(w http.ResponseWriter, arrived time.Duration) {
	s.mu.Lock()
	c, _ := s.capacityAt(arrived)
	switch {
	case s.running < c:
		s.running++
		s.mu.Unlock()
	case len(s.waiting) < c:
		ch := make(chan struct{})
		s.waiting = append(s.waiting, ch)
		s.mu.Unlock()
		<-ch // the slot is ours
	default:
		s.mu.Unlock()
		s.shed.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	time.Sleep(s.sc.Work)
	done := time.Since(s.start)
	s.mu.Lock()
	s.running--
	c, _ = s.capacityAt(done)
	for len(s.waiting) > 0 && s.running < c {
		s.running++
		close(s.waiting[0])
		s.waiting = s.waiting[1:]
	}
	s.sojourn = append(s.sojourn, served{done, done - arrived})
	s.mu.Unlock()
	s.ok(done)
	io.WriteString(w, "ok")
}

// quota serves a request on the Quota server: it spends one of the
// window's quota and says what is left, or answers 429 once it is spent.
func (s *server) quota(w http.ResponseWriter, t time.Duration) {
	win := int64(t / s.sc.QuotaWindow)
	left := time.Duration(win+1)*s.sc.QuotaWindow - t
	s.mu.Lock()
	if s.used == nil {
		s.used = map[int64]int{}
	}
	ok := s.used[win] < s.sc.Quota
	if ok {
		s.used[win]++
	} else {
		s.tooMany++
	}
	rem := s.sc.Quota - s.used[win]
	s.mu.Unlock()
	h := w.Header()
	h.Set("RateLimit", `"default";r=`+strconv.Itoa(rem)+`;t=`+strconv.Itoa(int((left+time.Second-1)/time.Second)))
	h.Set("RateLimit-Policy", `"default";q=`+strconv.Itoa(s.sc.Quota)+`;w=`+strconv.Itoa(int(s.sc.QuotaWindow/time.Second)))
	if !ok {
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	s.ok(t)
	io.WriteString(w, "ok")
}

// admit takes a token of a bucket that fills at rate a second (a
// twentieth of a second's worth at most: RateCap's, or WeakRate's once the
// outage is over), at t; mu is held.
func (s *server) admit(rate float64, t time.Duration) bool {
	s.tokens = min(s.tokens+(t-s.refilled).Seconds()*rate, max(rate/20, 1))
	s.refilled = t
	if s.tokens < 1 {
		return false
	}
	s.tokens--
	return true
}

// ok notes a 200 answered at t.
func (s *server) ok(t time.Duration) {
	s.mu.Lock()
	s.served++
	if t < s.sc.Warmup+s.sc.Outage+s.sc.Recovery {
		s.servedOffered++
	}
	if t >= s.downTo && s.downTo > 0 {
		if s.firstOK == 0 {
			s.firstOK = t
		}
		if t < s.downTo+2*time.Second {
			s.okAfter++
		}
	}
	s.mu.Unlock()
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	t := time.Since(s.start)
	s.count(t)
	s.mu.Lock()
	if len(s.sc.Steps) > 0 {
		s.mu.Unlock()
		s.stepped(w, t)
		return
	}
	if s.sc.Quota > 0 {
		s.mu.Unlock()
		s.quota(w, t)
		return
	}
	if s.sc.RateCap > 0 {
		ok := s.admit(float64(s.sc.RateCap), t)
		s.mu.Unlock()
		if !ok {
			s.shed.Add(1)
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		s.ok(t)
		io.WriteString(w, "ok")
		return
	}
	weak := s.sc.WeakRate > 0 && t >= s.downTo && !s.admit(float64(s.sc.WeakRate), t)
	s.mu.Unlock()
	if weak {
		s.shed.Add(1) // recovered, but weak: the excess over WeakRate is shed
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if s.down(t) {
		if s.sc.Refuse {
			// Caught on a connection made before the listener closed:
			// dropped, as a process that went away drops it.
			if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
				c.Close()
			}
			return
		}
		if v := retryAfter(s.sc.RetryAfter); v != "" {
			w.Header().Set("Retry-After", v)
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	capacity := s.sc.Capacity
	if s.sc.Slots > 0 {
		capacity = s.sc.Slots
	}
	if s.inflight.Add(1) > int64(capacity) {
		s.inflight.Add(-1)
		if t >= s.downTo {
			s.shed.Add(1)
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	time.Sleep(s.sc.Work)
	s.inflight.Add(-1)
	s.ok(time.Since(s.start))
	io.WriteString(w, "ok")
}

// retryAfter returns the Retry-After value for spec: spec itself, or for
// "lo-hi" a random whole number of seconds in [lo, hi], the way a server
// spreads the clients it turns away.
func retryAfter(spec string) string {
	lo, hi, ok := strings.Cut(spec, "-")
	if !ok {
		return spec
	}
	l, err1 := strconv.Atoi(lo)
	h, err2 := strconv.Atoi(hi)
	if err1 != nil || err2 != nil || h < l {
		return spec
	}
	return strconv.Itoa(l + rand.IntN(h-l+1))
}

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

type outcome struct {
	start   time.Duration
	latency time.Duration
	ok      bool
}

// Run runs one contender through the scenario, on its own server.
func Run(sc Scenario, c bench.Contender) (Result, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Result{}, err
	}
	s := &server{sc: sc, up: make(chan *http.Server, 1)}
	switch {
	case sc.RateCap > 0 || sc.Slots > 0 || len(sc.Steps) > 0 || sc.Quota > 0:
		s.downFrom, s.downTo = 0, 0 // never down
	case sc.Shape != "burst":
		s.downFrom, s.downTo = sc.Warmup, sc.Warmup+sc.Outage
	default:
		s.downFrom, s.downTo = 0, sc.Outage
	}
	hs := &http.Server{Handler: s}
	addr := l.Addr().String()
	url := "http://" + addr + "/"
	var refused func()
	var flips sync.WaitGroup
	stop := make(chan struct{})
	if sc.Refuse {
		refused = func() { s.count(time.Since(s.start)) }
		flips.Add(1)
		go func() {
			defer flips.Done()
			hs = s.refuseSpells(addr, stop)
		}()
	}
	newBase := func() *http.Transport { return newBase(refused) }

	shared := newBase()
	sharedRT := c.New(shared)
	var bases []*http.Transport
	var basesMu sync.Mutex
	var fleet []http.RoundTripper
	for range sc.Instances {
		b := newBase()
		bases = append(bases, b)
		fleet = append(fleet, c.New(b))
	}
	next := 0
	client := func() http.RoundTripper {
		if len(fleet) > 0 {
			next++
			return fleet[next%len(fleet)]
		}
		if !sc.PerProcess && !sc.PerWorker {
			return sharedRT
		}
		b := newBase()
		basesMu.Lock()
		bases = append(bases, b)
		basesMu.Unlock()
		return c.New(b)
	}

	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		outcomes []outcome
	)
	s.start = time.Now()
	go hs.Serve(l)
	s.up <- hs
	send := func(rt http.RoundTripper) (ok bool) {
		defer wg.Done()
		begin := time.Since(s.start)
		ctx, cancel := context.WithTimeout(context.Background(), sc.Timeout)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		resp, err := rt.RoundTrip(req)
		ok = false
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			ok = resp.StatusCode == 200
		}
		mu.Lock()
		outcomes = append(outcomes, outcome{begin, time.Since(s.start) - begin, ok})
		mu.Unlock()
		return ok
	}
	switch sc.Shape {
	case "closed":
		total := sc.Warmup + sc.Outage + sc.Recovery
		for range sc.Workers {
			rt := client()
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 1_000_000 && time.Since(s.start) < total; i++ {
					wg.Add(1)
					ok := send(rt)
					switch {
					case sc.Think > 0:
						time.Sleep(sc.Think)
					case !ok:
						// A caller that failed logs it and goes on: not
						// at once (a refusal that takes a microsecond
						// would spin the worker through its million).
						time.Sleep(errorPause)
					}
				}
			}()
		}
	case "steady":
		total := sc.Warmup + sc.Outage + sc.Recovery
		n := int(total.Seconds() * float64(sc.Rate))
		at := arrivals(sc, n)
		for i := range n {
			if d := at[i] - time.Since(s.start); d > 0 {
				time.Sleep(d)
			}
			wg.Add(1)
			go func(rt http.RoundTripper) { send(rt) }(client())
		}
	default:
		rts := make([]http.RoundTripper, sc.N)
		for i := range rts {
			rts[i] = client()
		}
		wg.Add(sc.N)
		for i := range sc.N {
			go func() { send(rts[i]) }()
		}
	}
	wg.Wait()
	elapsed := time.Since(s.start)
	close(stop)
	flips.Wait()
	hs.Close()
	shared.CloseIdleConnections()
	for _, b := range bases {
		b.CloseIdleConnections()
	}

	s.mu.Lock()
	series := append([]int64(nil), s.series...)
	s.mu.Unlock()
	r := Result{Contender: c.Name, Requests: len(outcomes), Series: series, Elapsed: elapsed}
	r.ShedAfter = s.shed.Load()
	s.mu.Lock()
	r.FirstOK, r.OKAfter2s, r.Served, r.ServedOffered = -1, s.okAfter, s.served, s.servedOffered
	if s.firstOK > 0 {
		r.FirstOK = s.firstOK - s.downTo
	}
	s.mu.Unlock()
	var lat, failLat []time.Duration
	for _, o := range outcomes {
		inOutage := s.down(o.start)
		if inOutage {
			r.OutageRequests++
		}
		after := o.start >= s.downTo && o.start < s.downTo+2*time.Second
		if after {
			r.AfterRequests++
			if o.ok {
				r.AfterSuccess++
			}
		}
		if !o.ok {
			failLat = append(failLat, o.latency)
		}
		if o.ok {
			r.Successes++
			lat = append(lat, o.latency)
			if inOutage {
				r.OutageSuccess++
			}
		}
	}
	for i, v := range series {
		r.Attempts += v
		t := time.Duration(i) * bucket
		switch {
		case s.down(t):
			r.OutageAttempts += v
			r.PeakOutage = max(r.PeakOutage, v)
		case t >= s.downTo:
			r.PeakRecovery = max(r.PeakRecovery, v)
			if t < s.downTo+2*time.Second {
				r.PeakAfter2s = max(r.PeakAfter2s, v)
			}
		}
	}
	s.mu.Lock()
	r.TooMany = s.tooMany
	if sc.Quota > 0 {
		offered := int64((sc.Warmup + sc.Outage + sc.Recovery) / sc.QuotaWindow)
		var used int
		for w := range offered {
			used += s.used[w]
		}
		r.QuotaUsed = float64(used) / float64(max(offered, 1)*int64(sc.Quota))
	}
	for i, st := range sc.Steps {
		end := sc.Warmup + sc.Outage + sc.Recovery
		if i+1 < len(sc.Steps) {
			end = sc.Steps[i+1].At
		}
		ph := Phase{Capacity: st.Capacity}
		var so []time.Duration
		for _, sv := range s.sojourn {
			if sv.done >= st.At+settle && sv.done < end {
				so = append(so, sv.took)
			}
		}
		sort.Slice(so, func(a, b int) bool { return so[a] < so[b] })
		if len(so) > 0 {
			ph.P99 = so[min(len(so)-1, len(so)*99/100)]
		}
		perSecond := float64(len(so)) / (end - st.At - settle).Seconds()
		ph.Goodput = perSecond * sc.Work.Seconds() / float64(st.Capacity)
		r.Phases = append(r.Phases, ph)
	}
	s.mu.Unlock()
	sort.Slice(failLat, func(i, j int) bool { return failLat[i] < failLat[j] })
	if len(failLat) > 0 {
		r.FailP99 = failLat[min(len(failLat)-1, len(failLat)*99/100)]
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) > 0 {
		r.P50 = lat[len(lat)*50/100]
		r.P99 = lat[min(len(lat)-1, len(lat)*99/100)]
	}
	return r, nil
}

func (r Result) Amplification() float64 { return float64(r.Attempts) / float64(max(r.Requests, 1)) }

// arrivals are the times from the start at which a steady scenario's n
// requests arrive: evenly spaced, or (Poisson) at random with a fixed
// seed, so that every contender meets the same arrivals.
func arrivals(sc Scenario, n int) []time.Duration {
	at := make([]time.Duration, n)
	interval := time.Second / time.Duration(sc.Rate)
	rng := rand.New(rand.NewPCG(1, 2))
	var t time.Duration
	for i := range at {
		at[i] = time.Duration(i) * interval
		if sc.Poisson {
			at[i] = t
			t += time.Duration(rng.ExpFloat64() * float64(interval))
		}
	}
	return at
}

// perSecond is what a server that is never down serves a second at most:
// RateCap, or Slots each Work.
func (sc Scenario) perSecond() float64 {
	if sc.Slots > 0 {
		return float64(sc.Slots) / sc.Work.Seconds()
	}
	return float64(sc.RateCap)
}

// OutageRate is the attempts a second the server received in the outage.
func (r Result) OutageRate(sc Scenario) float64 {
	return float64(r.OutageAttempts) / max(sc.Outage.Seconds(), 1e-9)
}

// Load is what the server received, as a multiple of its capacity
// (perSecond) over the time the load was offered, and what it served, as a
// multiple of its capacity over the whole run (a contender whose retries
// go on after the offered load ends is served longer, at less than its
// capacity) and over the time the load was offered.
func (r Result) Load(sc Scenario) (arrivals, goodput, offeredGoodput float64) {
	offered := sc.perSecond() * (sc.Warmup + sc.Outage + sc.Recovery).Seconds()
	run := sc.perSecond() * max(r.Elapsed.Seconds(), 1e-9)
	return float64(r.Attempts) / max(offered, 1), float64(r.Served) / max(run, 1), float64(r.ServedOffered) / max(offered, 1)
}

// OutageAmplification is attempts during the outage over the requests that
// started in it.
func (r Result) OutageAmplification() float64 {
	return float64(r.OutageAttempts) / float64(max(r.OutageRequests, 1))
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// refuseSpells closes the serving server (its listener and connections) when
// each down spell begins, and serves again on the same address when it
// ends, until stop; it returns the server serving last.
func (s *server) refuseSpells(addr string, stop <-chan struct{}) *http.Server {
	hs := <-s.up
	at := func(t time.Duration) <-chan time.Time { return time.After(time.Until(s.start.Add(t))) }
	for t := s.downFrom; t < s.downTo; {
		end := s.downTo
		if s.sc.Flap > 0 {
			end = min(t+s.sc.Flap, s.downTo)
		}
		select {
		case <-stop:
			return hs
		case <-at(t):
		}
		hs.Close()
		select {
		case <-stop:
			return hs
		case <-at(end):
		}
		var l net.Listener
		for range 100 { // the port is ours again at once, but for a TIME_WAIT race
			var err error
			if l, err = net.Listen("tcp", addr); err == nil {
				break
			}
			time.Sleep(time.Millisecond)
		}
		if l == nil {
			panic("storm: cannot listen again on " + addr)
		}
		hs = &http.Server{Handler: s}
		go hs.Serve(l)
		t = end
		if s.sc.Flap > 0 {
			t = end + s.sc.Flap
		}
	}
	return hs
}
