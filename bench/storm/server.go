// This file holds the storm's server: down for an outage (answering 503,
// flapping, or refusing connections), then serving a bounded capacity, or
// never down but overloaded (a rate, slots, capacity steps or a quota),
// and what it saw, per 100 ms.

package main

import (
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

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

// ServeHTTP counts each attempt, then serves it as the scenario's server
// does.
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
		s.capped(w, t) // unlocks mu
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

// capped serves a request on the RateCap server: if its bucket has a
// token, else 503 at once; mu is held, and unlocked.
func (s *server) capped(w http.ResponseWriter, t time.Duration) {
	ok := s.admit(float64(s.sc.RateCap), t)
	s.mu.Unlock()
	if !ok {
		s.shed.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	s.ok(t)
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
