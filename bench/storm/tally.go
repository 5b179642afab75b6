// This file holds the tally of a run: what the server saw (its attempts
// per 100 ms, what it served, shed and refused, per capacity step and per
// quota window) and what became of each request (success, latency, when
// it started, its criticality), made into the run's Result.

package main

import (
	"sort"
	"time"
)

// tally is the run's Result, once every request is done, elapsed after
// the start.
func (r *run) tally(elapsed time.Duration) Result {
	s := r.s
	s.mu.Lock()
	series := append([]int64(nil), s.series...)
	s.mu.Unlock()
	res := Result{Contender: r.c.Name, Requests: len(r.outcomes), Series: series, Elapsed: elapsed}
	res.ShedAfter = s.shed.Load()
	s.mu.Lock()
	res.FirstOK, res.OKAfter2s, res.Served, res.ServedOffered = -1, s.okAfter, s.served, s.servedOffered
	if s.firstOK > 0 {
		res.FirstOK = s.firstOK - s.downTo
	}
	s.mu.Unlock()
	lat, failLat := tallyOutcomes(&res, s, r.outcomes)
	tallySeries(&res, s, series)
	s.mu.Lock()
	res.TooMany = s.tooMany
	res.QuotaUsed = s.quotaUsed()
	res.Phases = s.phases()
	s.mu.Unlock()
	sort.Slice(failLat, func(i, j int) bool { return failLat[i] < failLat[j] })
	if len(failLat) > 0 {
		res.FailP99 = failLat[min(len(failLat)-1, len(failLat)*99/100)]
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) > 0 {
		res.P50 = lat[len(lat)*50/100]
		res.P99 = lat[min(len(lat)-1, len(lat)*99/100)]
	}
	return res
}

// tallyOutcomes counts the requests into res: those that succeeded, that
// started in the outage and in the 2 s after it, and per criticality; it
// returns the latencies of those that succeeded and of those that failed.
func tallyOutcomes(res *Result, s *server, outcomes []outcome) (lat, failLat []time.Duration) {
	for _, o := range outcomes {
		inOutage := s.down(o.start)
		if inOutage {
			res.OutageRequests++
		}
		after := o.start >= s.downTo && o.start < s.downTo+2*time.Second
		if after {
			res.AfterRequests++
			if o.ok {
				res.AfterSuccess++
			}
		}
		res.tallyClass(o)
		if !o.ok {
			failLat = append(failLat, o.latency)
		}
		if o.ok {
			res.Successes++
			lat = append(lat, o.latency)
			if inOutage {
				res.OutageSuccess++
			}
		}
	}
	return lat, failLat
}

// tallyClass counts o into its criticality's requests and successes.
func (r *Result) tallyClass(o outcome) {
	ok := 0
	if o.ok {
		ok = 1
	}
	switch o.class {
	case critical:
		r.CriticalRequests++
		r.CriticalSuccesses += ok
	case sheddable:
		r.SheddableRequests++
		r.SheddableSuccesses += ok
	}
}

// tallySeries counts the attempts of each 100 ms into res: in all, in the
// outage, and the peaks in it, after it and in the 2 s after it.
func tallySeries(res *Result, s *server, series []int64) {
	for i, v := range series {
		res.Attempts += v
		t := time.Duration(i) * bucket
		switch {
		case s.down(t):
			res.OutageAttempts += v
			res.PeakOutage = max(res.PeakOutage, v)
		case t >= s.downTo:
			res.PeakRecovery = max(res.PeakRecovery, v)
			if t < s.downTo+2*time.Second {
				res.PeakAfter2s = max(res.PeakAfter2s, v)
			}
		}
	}
}

// quotaUsed is, for a Quota server, what it served over the quota of the
// windows the load was offered in; mu is held.
func (s *server) quotaUsed() float64 {
	sc := s.sc
	if sc.Quota <= 0 {
		return 0
	}
	offered := int64((sc.Warmup + sc.Outage + sc.Recovery) / sc.QuotaWindow)
	var used int
	for w := range offered {
		used += s.used[w]
	}
	return float64(used) / float64(max(offered, 1)*int64(sc.Quota))
}

// phases is, for a Steps server, what it did in each phase, measured from
// settle after its step; mu is held.
func (s *server) phases() []Phase {
	sc := s.sc
	var out []Phase
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
		out = append(out, ph)
	}
	return out
}
