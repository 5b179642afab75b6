// This file holds the simulator's draw of criticality (drawCriticality,
// on a stream of its own, so that the seeds drawn before it still draw
// what they did; it draws the fallback too, sim_fallback_test.go) and the
// invariants of criticality it checks, on top of sim_test.go's, which
// hold whatever each request's criticality (its attempts' bounds, its
// deadline, no slot of a pacer, body or response left behind):
//
//   - every attempt tells the request's criticality: in the header that
//     WithCriticalityHeader names, to the attempt hook, in the metrics' and
//     the give-up log records' labels;
//   - the concurrency limit's line lets no first attempt go while a more
//     critical one waits in it (and a sheddable waiter still leaves it by
//     its deadline: sim_test.go checks every caller's);
//   - on a healthy host, criticality changes nothing: every request to it
//     gets its 200 from its first attempt, in the host's latency.

package retryhttp

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// simLevelHeader is the header that WithCriticalityHeader names, when
// drawn (in either case).
const simLevelHeader = "X-Criticality"

// simCrit is what drawCriticality drew for a run, and what the fallback
// function and the attempt hook were handed.
type simCrit struct {
	mixed     bool                         // callers of every criticality; otherwise all default
	transport Criticality                  // WithCriticality on the Transport: a request's own replaces it
	header    bool                         // WithCriticalityHeader
	fallback  bool                         // WithFallback(s.fallback)
	policy    *Fallback                    // a policy's fallback section, if drawn
	calls     map[string][]simFallbackCall // per caller, the fallback's calls; s.mu
	hook      map[string][]Criticality     // per caller, what the attempt hook was told; s.mu
}

// simCallerCrit is a caller's criticality, and what the fallback function
// makes of its request.
type simCallerCrit struct {
	level    Criticality // through WithRequestOptions, if set
	set      bool
	fallback simFallbackMode
}

var simLevels = [3]Criticality{Critical, "", Sheddable}

// drawCriticality draws, on a stream of its own, the requests'
// criticalities (all default in a third of runs; otherwise each
// critical, sheddable, "default" or, unset, the Transport's, which is
// drawn now and then), with a concurrency limit now and then a burst of
// callers to make its line, WithCriticalityHeader, and the fallbacks
// (drawFallback).
func (s *simulation) drawCriticality(r *rand.Rand) {
	cr := &s.crit
	cr.hook = map[string][]Criticality{}
	if cr.mixed = r.IntN(3) != 0; cr.mixed {
		if r.IntN(5) == 0 {
			cr.transport = simLevels[r.IntN(3)]
			s.opts = append(s.opts, WithCriticality(cr.transport))
			s.desc = append(s.desc, "criticality="+levelName(cr.transport))
		}
		if s.concurrency && r.IntN(3) == 0 {
			s.drawBurst(r)
		}
		n := [3]int{}
		for i := range s.callers {
			c := &s.callers[i]
			switch r.IntN(8) {
			case 0, 1:
				c.crit.level, c.crit.set = Critical, true
			case 2, 3:
				c.crit.level, c.crit.set = Sheddable, true
			case 4:
				c.crit.level, c.crit.set = "default", true
			case 5:
				c.crit.level, c.crit.set = "", true
			} // else the Transport's
			n[simRank(s.levelOf(*c))+1]++
		}
		s.desc = append(s.desc, fmt.Sprintf("criticality: critical=%d default=%d sheddable=%d", n[2], n[1], n[0]))
	}
	if r.IntN(4) == 0 {
		cr.header = true
		s.opts = append(s.opts, WithCriticalityHeader([]string{simLevelHeader, strings.ToLower(simLevelHeader)}[r.IntN(2)]))
		s.desc = append(s.desc, "criticality-header")
	}
	s.drawFallback(r) // last: what is added to this stream goes after it
}

// drawBurst adds GETs to h0 that all start at one instant, half of them
// with a deadline, so that the concurrency limit's line fills with
// requests of every criticality.
func (s *simulation) drawBurst(r *rand.Rand) {
	n, at := 10+r.IntN(60), time.Duration(r.IntN(3000))*time.Millisecond
	for range n {
		c := simCaller{id: strconv.Itoa(len(s.callers)), host: "h0", method: "GET", at: at}
		if r.IntN(2) == 0 {
			c.deadline = time.Duration(50+r.IntN(2000)) * time.Millisecond
		}
		if s.faults.failOnce {
			s.faults.failFirst[c.id] = 1
		}
		s.callers = append(s.callers, c)
	}
	s.desc = append(s.desc, fmt.Sprintf("line-burst=%d at %v", n, at))
}

// levelOf is c's criticality: its request's own, or the Transport's.
func (s *simulation) levelOf(c simCaller) Criticality {
	if c.crit.set {
		return c.crit.level
	}
	return s.crit.transport
}

// simRank is c's admission level: -1 sheddable, 0 default, 1 critical.
func simRank(c Criticality) int8 {
	l, _ := c.level()
	return l
}

// levelName is what metrics, logs and the header call c.
func levelName(c Criticality) string { return levelText(simRank(c)) }

// hookLevel records what the attempt hook was told of a request's
// criticality.
func (s *simulation) hookLevel(id string, c Criticality) {
	s.mu.Lock()
	s.crit.hook[id] = append(s.crit.hook[id], c)
	s.mu.Unlock()
}

// checkCriticality checks the invariants of criticality and of the
// fallbacks.
func (s *simulation) checkCriticality(b *simBase, m *Metrics, gu *giveUps, outcomes []simOutcome, fail func(string, ...any)) {
	gave := map[string][]simGiveUp{}
	for _, g := range gu.list {
		gave[g.id] = append(gave[g.id], g)
	}
	for i, c := range s.callers {
		s.checkLevel(c, b.sent[c.id], gave[c.id], fail)
		if outcomes[i].panicked == nil {
			s.checkFallback(c, outcomes[i], gave[c.id], fail)
			s.checkPolicyFallback(c, outcomes[i], gave[c.id], fail)
		}
	}
	s.checkLevelMetrics(m, gave, fail)
	s.checkLine(b, outcomes, fail)
	s.checkHealthy(b, outcomes, fail)
}

// checkLevel checks that every attempt of c's request told its
// criticality: in the header, when drawn, to the attempt hook, and in
// its give-up log record.
func (s *simulation) checkLevel(c simCaller, sent []simAttempt, gave []simGiveUp, fail func(string, ...any)) {
	want := levelName(s.levelOf(c))
	header := ""
	if s.crit.header {
		header = want
	}
	for j, a := range sent {
		if a.level != header {
			fail("caller %s (%s): attempt %d carried %s: %q, want %q", c.id, want, j+1, simLevelHeader, a.level, header)
		}
	}
	s.mu.Lock()
	told := s.crit.hook[c.id]
	s.mu.Unlock()
	for _, l := range told {
		if levelName(l) != want {
			fail("caller %s (%s): the attempt hook was told criticality %q", c.id, want, l)
		}
	}
	for _, g := range gave {
		if cmp.Or(g.level, "default") != want {
			fail("caller %s (%s): its give-up record says criticality %q", c.id, want, g.level)
		}
	}
}

// checkLevelMetrics checks the metrics' criticality labels: the requests
// of each, its give-ups (as the log records them); and that the
// fallbacks counted are the responses the fallback function made.
func (s *simulation) checkLevelMetrics(m *Metrics, gave map[string][]simGiveUp, fail func(string, ...any)) {
	var requests, giveUps [3]int
	made := 0
	for _, c := range s.callers {
		l := simRank(s.levelOf(c)) + 1
		requests[l]++
		giveUps[l] += len(gave[c.id])
		for _, k := range s.crit.calls[c.id] {
			if k.made != nil {
				made++
			}
		}
	}
	for l := range 3 {
		name := criticalityLevels[l]
		if got := sumLabeled(m, "retryhttp_requests_total", "criticality", name); int(got) != requests[l] {
			fail("retryhttp_requests_total{criticality=%q} = %v, for %d requests", name, got, requests[l])
		}
		if got := sumLabeled(m, "retryhttp_giveups_total", "criticality", name); int(got) != giveUps[l] {
			fail("retryhttp_giveups_total{criticality=%q} = %v, for %d give-ups logged", name, got, giveUps[l])
		}
	}
	if got := sumCounter(nil, m, "retryhttp_fallbacks_total"); int(got) != made {
		fail("retryhttp_fallbacks_total = %v, but the fallback function made %d responses", got, made)
	}
}

// sumLabeled adds up the series of the family name in m whose label is
// value.
func sumLabeled(m *Metrics, name, label, value string) float64 {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	mfs, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, mt := range mf.GetMetric() {
			for _, lp := range mt.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					sum += mt.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// checkLine checks the concurrency limit's priority line, where it is the
// only pacer that makes a first attempt wait: no first attempt is let
// through while one of a higher criticality to its host, which started
// before it did, still waits (not yet sent, nor ended). One that started
// later may be passed: the line serves a waiter passed over as often as
// it is long.
func (s *simulation) checkLine(b *simBase, outcomes []simOutcome, fail func(string, ...any)) {
	if !s.concurrency || s.rated || s.quotaWait > 0 || !s.crit.mixed {
		return
	}
	for i, lo := range s.callers {
		sent := b.sent[lo.id]
		if len(sent) == 0 || outcomes[i].panicked != nil {
			continue
		}
		at := sent[0].at
		for j, hi := range s.callers {
			if hi.host != lo.host || simRank(s.levelOf(hi)) <= simRank(s.levelOf(lo)) || outcomes[j].start >= outcomes[i].start {
				continue
			}
			his := b.sent[hi.id]
			if (len(his) > 0 && his[0].at > at) || (len(his) == 0 && outcomes[j].end > at) {
				fail("host %s: caller %s (%s) was let through the concurrency limit's line at %v, while caller %s (%s) waited in it since %v",
					lo.host, lo.id, levelName(s.levelOf(lo)), at, hi.id, levelName(s.levelOf(hi)), outcomes[j].start)
				return
			}
		}
	}
}

// checkHealthy checks that criticality changes nothing on a healthy host:
// one that answered every attempt sent to it with a 200 (whatever the
// script, admission saw it fail nothing), with no quota to state and no
// pacer that lines attempts up (a concurrency or rate limit): every
// request to it whose own limits are longer than the host's latency gets
// its 200 from its first attempt (and hedged copies), in that latency,
// whatever its criticality.
func (s *simulation) checkHealthy(b *simBase, outcomes []simOutcome, fail func(string, ...any)) {
	f := &s.faults
	if f.quota > 0 || s.limited {
		return
	}
	sick := map[string]bool{}
	for _, c := range s.callers {
		for _, a := range b.sent[c.id] {
			sick[c.host] = sick[c.host] || a.status != http.StatusOK
		}
	}
	longer := func(d time.Duration) bool { return d == 0 || d > f.latency }
	for i, c := range s.callers {
		o, sent := outcomes[i], b.sent[c.id]
		if sick[c.host] || !longer(c.deadline) || !longer(c.cancelAt) || !longer(s.perAtt) || (c.op && !longer(s.op.elapsed)) {
			continue
		}
		if o.resp == nil || o.resp.StatusCode != http.StatusOK || len(sent) == 0 || len(sent) > 1+s.hedge || o.end-o.start != f.latency {
			fail("caller %s (%s) to the healthy host %s: ended with %v, %v after %d attempts in %v; want a 200 from its first, in the latency %v",
				c.id, levelName(s.levelOf(c)), c.host, simStatus(o.resp), o.err, len(sent), o.end-o.start, f.latency)
		}
	}
}
