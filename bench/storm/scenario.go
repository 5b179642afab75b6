// This file holds what a storm is (Scenario, Step), what a run of a
// contender in it measured (Result, Phase), the figures derived from them,
// and the draws every contender meets alike: the arrivals and which
// requests are critical.

package main

import (
	"math/rand/v2"
	"time"
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
	Critical    float64       // if > 0: the share of requests that are critical, the rest sheddable (drawn per request index, the same for every contender), each tagged so by a contender that tags; 0: none is tagged
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

	CriticalRequests, CriticalSuccesses   int // Critical > 0: the critical requests, and those that succeeded
	SheddableRequests, SheddableSuccesses int // Critical > 0: the sheddable requests, and those that succeeded
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

// class is a request's criticality in a mixed scenario.
type class int8

const (
	unclassed class = iota // not a mixed scenario: untagged
	critical
	sheddable
)

// classOf is request i's criticality: in a mixed scenario, critical if a
// draw from i alone (a hash, the same for every contender, whatever the
// order the requests go in) falls below the Critical share, else
// sheddable.
func (sc Scenario) classOf(i int) class {
	if sc.Critical <= 0 {
		return unclassed
	}
	if unit(uint64(i)) < sc.Critical {
		return critical
	}
	return sheddable
}

// unit maps x to [0, 1) by splitmix64's finalizer: evenly, and with no
// pattern between neighbours.
func unit(x uint64) float64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11) / (1 << 53)
}
