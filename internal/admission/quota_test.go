package admission

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/internal/ratelimit"
)

// quotaSim drives clients' quota pacing in virtual time against a server
// with a quota of limit per window, shared by all (its RateLimit field
// on every answer, 429 once spent): offered requests a second in all,
// evenly, round-robin over the clients, for d; each request may wait
// until its deadline, timeout after it arrives.
type quotaResult struct {
	sends, tooMany, refused, late int
	firstFields                   bool
	tooManyAfterFields            int // 429s of the first client after its first answer with the fields
	used, available               int
}

// quotaSimWild is quotaSim whose server, with wild, answers the first
// request with a wild reading (a billion left) and truthfully after.
func quotaSimWild(clients int, limit int, window time.Duration, offered float64, d, timeout time.Duration, spread, wild bool) quotaResult {
	return quotaSimSeeded(clients, limit, window, offered, d, timeout, spread, wild, 0)
}

// quotaSimSeeded is quotaSimWild whose clients draw their jitter from a
// source seeded with seed, if it is not 0.
func quotaSimSeeded(clients int, limit int, window time.Duration, offered float64, d, timeout time.Duration, spread, wild bool, seed uint64) quotaResult {
	qs := make([]quota, clients)
	cfg := &Quota{MaxWait: timeout, Spread: spread}
	for i := range qs {
		qs[i].init(cfg)
		if seed != 0 {
			qs[i].jitter = rand.New(rand.NewPCG(seed, uint64(i))).Int64N
		}
	}
	base := int64(monoOffset)
	wall := time.Unix(1_800_000_000, 0)
	var r quotaResult
	used := map[int64]int{}
	var sends simHeap // at: when it goes (or asks again); start: its client (as a duration)
	type waiting struct{ c, deadline time.Duration }
	asks := map[time.Duration][]waiting{}
	send := func(s simEvent) {
		c := int(s.start)
		win := int64(s.at / window)
		left := time.Duration(win+1)*window - s.at
		h := http.Header{}
		status := 200
		r.sends++
		if used[win] < limit {
			used[win]++
		} else {
			status = http.StatusTooManyRequests
			r.tooMany++
			if c == 0 && r.firstFields {
				r.tooManyAfterFields++
			}
		}
		h.Set("RateLimit", fmt.Sprintf(`"default";r=%d;t=%d`, limit-used[win], int(math.Ceil(left.Seconds()))))
		if wild && r.sends == 1 {
			h.Set("RateLimit", `"default";r=1000000000;t=1`)
		}
		if c == 0 {
			r.firstFields = true
		}
		qs[c].observe(observation{took: true, header: h, status: status, now: base + int64(s.at), wall: wall.Add(s.at)})
	}
	// ask asks client c's pacing at now, for a request due by deadline:
	// it goes, is refused, or asks again later.
	ask_ := func(c int, now, deadline time.Duration) {
		v := qs[c].admit(query{kind: kindFirst, now: base + int64(now), deadline: base + int64(deadline)})
		switch v.act {
		case actRefuse:
			r.refused++
		case actWait:
			if now+v.wait >= deadline {
				r.late++
			}
			at := now + v.wait
			asks[at] = append(asks[at], waiting{time.Duration(c), deadline})
			heap.Push(&sends, simEvent{at: at, start: -1})
		default:
			send(simEvent{at: now, start: time.Duration(c)})
		}
	}
	step := time.Duration(float64(time.Second) / offered)
	i := 0
	drain := func(until time.Duration) {
		for sends.Len() > 0 && sends[0].at <= until {
			e := heap.Pop(&sends).(simEvent)
			for _, w := range asks[e.at] {
				ask_(int(w.c), e.at, w.deadline)
			}
			delete(asks, e.at)
		}
	}
	for now := time.Duration(0); now < d; now += step {
		drain(now)
		ask_(i%clients, now, now+timeout)
		i++
	}
	drain(d - 1)
	for w := range int64(d / window) {
		r.used += used[w]
		r.available += limit
	}
	return r
}

func TestQuotaPacing(t *testing.T) {
	const limit, window = 100, 10 * time.Second
	offered := 3.0 * limit / window.Seconds()
	for _, tc := range []struct {
		clients int
		spread  bool
	}{{1, false}, {1, true}, {10, false}, {10, true}} {
		// The jitter of the waits is random, drawn from fixed seeds: the
		// median of 15 runs (a run's own share of 429s spreads from 0.5 to
		// 2.6% for ten clients), 3 under the race detector, which makes
		// each run ten times slower.
		var rs []quotaResult
		for seed := range uint64(loadSize(15, 3)) {
			rs = append(rs, quotaSimSeeded(tc.clients, limit, window, offered, 2*time.Minute, 30*time.Second, tc.spread, false, seed+1))
		}
		slices.SortFunc(rs, func(a, b quotaResult) int { return a.tooMany - b.tooMany })
		r := rs[len(rs)/2]
		share := float64(r.tooMany) / float64(r.sends)
		use := float64(r.used) / float64(r.available)
		t.Logf("%d clients, spread %v: %d sends, %d answered 429 (%.1f%%), quota used %.1f%%, %d refused at once",
			tc.clients, tc.spread, r.sends, r.tooMany, 100*share, 100*use, r.refused)
		if r.late > 0 {
			t.Errorf("%d clients: %d waits past the deadline", tc.clients, r.late)
		}
		// Spreading paces the last of a window up to the reset it was
		// told in whole seconds, and a fleet's clients each pace what is
		// left as if alone: it gives up some of the quota.
		if want := map[bool]float64{false: 0.98, true: 0.85}[tc.spread]; use < want {
			t.Errorf("%d clients, spread %v: %.1f%% of the quota used, want %.0f%%", tc.clients, tc.spread, 100*use, 100*want)
		}
		if tc.clients == 1 && r.tooManyAfterFields > 0 {
			t.Errorf("one client: %d answers 429 after the first answer with the fields, want none", r.tooManyAfterFields)
		}
		if share > 0.02 {
			t.Errorf("%d clients: %.1f%% of sends answered 429, want at most 2%%", tc.clients, 100*share)
		}
	}
}

// quotaSimLatency is quotaSim with answers that take lat to come back
// (the server counts each attempt halfway), for the fleet case.
func quotaSimLatency(clients, limit int, window time.Duration, offered float64, d, timeout, lat time.Duration, spread bool) quotaResult {
	qs := make([]quota, clients)
	cfg := &Quota{MaxWait: timeout, Spread: spread}
	for i := range qs {
		qs[i].init(cfg)
	}
	base := int64(monoOffset)
	wall := time.Unix(1_800_000_000, 0)
	var r quotaResult
	used := map[int64]int{}
	type ev struct {
		at           time.Duration
		kind         int // 0: ask, 1: answer
		c            int
		deadline     time.Duration
		status, left int
		reset        time.Duration
	}
	var evs []ev
	push := func(e ev) {
		i, _ := slices.BinarySearchFunc(evs, e, func(a, b ev) int { return int(a.at - b.at) })
		for i < len(evs) && evs[i].at == e.at {
			i++
		}
		evs = slices.Insert(evs, i, e)
	}
	ask := func(c int, now, deadline time.Duration) {
		v := qs[c].admit(query{kind: kindFirst, now: base + int64(now), deadline: base + int64(deadline)})
		switch v.act {
		case actRefuse:
			r.refused++
		case actWait:
			push(ev{at: now + v.wait, kind: 0, c: c, deadline: deadline})
		default:
			r.sends++
			at := now + lat/2
			win := int64(at / window)
			status := 200
			if used[win] < limit {
				used[win]++
			} else {
				status = http.StatusTooManyRequests
				r.tooMany++
			}
			reset := time.Duration(win+1)*window - at
			push(ev{at: now + lat, kind: 1, c: c, status: status, left: limit - used[win], reset: reset})
		}
	}
	step := time.Duration(float64(time.Second) / offered)
	i := 0
	for now := time.Duration(0); now < d; now += step {
		for len(evs) > 0 && evs[0].at <= now {
			e := evs[0]
			evs = evs[1:]
			if e.kind == 0 {
				ask(e.c, e.at, e.deadline)
				continue
			}
			h := http.Header{}
			h.Set("RateLimit", fmt.Sprintf(`"default";r=%d;t=%d`, e.left, int(math.Ceil(e.reset.Seconds()))))
			qs[e.c].observe(observation{took: true, header: h, status: e.status, now: base + int64(e.at), wall: wall.Add(e.at)})
		}
		ask(i%clients, now, now+timeout)
		i++
	}
	for w := range int64(d / window) {
		r.used += used[w]
		r.available += limit
	}
	return r
}

// Ten clients whose answers take 20 ms: what each knows of the quota is a
// round trip old, and after a reset every client's waiting requests go
// before the first answers say how fast the quota goes. Spread mode
// paces them. The figures are logged; the bounds are what the design can
// promise at this latency.
func TestQuotaPacingFleetWithLatency(t *testing.T) {
	const limit, window = 100, 10 * time.Second
	offered := 3.0 * limit / window.Seconds()
	for _, spread := range []bool{false, true} {
		r := quotaSimLatency(10, limit, window, offered, 2*time.Minute, 30*time.Second, 20*time.Millisecond, spread)
		share, use := float64(r.tooMany)/float64(r.sends), float64(r.used)/float64(r.available)
		t.Logf("10 clients, 20 ms answers, spread %v: %.1f%% of sends answered 429, %.1f%% of the quota used", spread, 100*share, 100*use)
		if spread && share > 0.02 {
			t.Errorf("spread: %.1f%% of sends answered 429, want at most 2%%", 100*share)
		}
		if use < 0.85 {
			t.Errorf("spread %v: %.1f%% of the quota used, want at least 85%%", spread, 100*use)
		}
	}
}

// One wild reading does not stall pacing: a host that allows 5 a second
// and once says a billion are left, then the truth, gets about what an
// honest host gets from the same client (which used to send 10 in 10 s,
// where the honest run sent 50): the host's later words correct it.
func TestQuotaPacingWildReading(t *testing.T) {
	honest := quotaSimWild(1, 5, time.Second, 10, 20*time.Second, 2*time.Second, false, false)
	wild := quotaSimWild(1, 5, time.Second, 10, 20*time.Second, 2*time.Second, false, true)
	t.Logf("honest: %d sends, %d used; one wild reading: %d sends, %d used", honest.sends, honest.used, wild.sends, wild.used)
	if float64(wild.used) < 0.9*float64(honest.used) {
		t.Errorf("after one wild reading, %d of the quota used in 20 s; the honest run used %d", wild.used, honest.used)
	}
	if wild.tooMany > honest.tooMany+10 {
		t.Errorf("after one wild reading, %d answers 429 (honest: %d)", wild.tooMany, honest.tooMany)
	}
}

// RateLimit-Policy, on the draft's own examples: items keyed by name and
// partition key, each with its quota and window.
func TestQuotaPolicyField(t *testing.T) {
	h := http.Header{}
	h.Add("RateLimit-Policy", `"burst";q=100;w=60,"daily";q=1000;w=86400`)
	h.Add("RateLimit-Policy", `"peruser";q=100;w=60;pk=:cHsdsRa894=:`)
	h.Add("RateLimit-Policy", `"bad";q=-1;w=60, "nowindow";q=5, "toolong";q=1;w=999999999`)
	got := ratelimit.Policies(h, quotaHorizon, make([]ratelimit.Policy, 0, maxQuotaParts))
	want := []ratelimit.Policy{{Key: `"burst"`, Quota: 100, Window: time.Minute}, {Key: `"daily"`, Quota: 1000, Window: 24 * time.Hour},
		{Key: `"peruser";:cHsdsRa894=:`, Quota: 100, Window: time.Minute}}
	if !slices.Equal(got, want) {
		t.Errorf("ratelimit.Policies = %v, want %v", got, want)
	}
	// Keyed as RateLimit's items: a policy's size reaches its quota.
	var q quota
	q.init(&Quota{MaxWait: time.Minute})
	base := int64(monoOffset)
	h.Set("RateLimit", `"peruser";r=0;t=1;pk=:cHsdsRa894=:`)
	q.observe(observation{took: true, header: h, status: 200, now: base, wall: time.Unix(1_800_000_000, 0)})
	if len(q.parts) != 1 || q.parts[0].limit != 100 || q.parts[0].window != int64(time.Minute) {
		t.Fatalf("parts = %+v; want the peruser quota sized 100 per minute", q.parts)
	}
}

// With the window's size stated, a quota spent until its reset rolls
// over full: after the reset, the client sends the whole quota at once,
// where, learning it, it would send one and wait for the host's word.
func TestQuotaPolicyRollsOverFull(t *testing.T) {
	for _, stated := range []bool{false, true} {
		var q quota
		q.init(&Quota{MaxWait: time.Minute})
		base := int64(monoOffset)
		h := http.Header{"Ratelimit": {`"default";r=0;t=1`}}
		if stated {
			h.Set("RateLimit-Policy", `"default";q=5;w=1`)
		}
		q.admit(query{kind: kindFirst, now: base})
		q.observe(observation{took: true, header: h, status: 200, now: base, wall: time.Unix(1_800_000_000, 0)})
		sent := 0
		for i := range 10 { // ten attempts just after the reset, no answer yet
			if q.admit(query{kind: kindFirst, now: base + int64(time.Second) + int64(i)}).act == actSend {
				sent++
			}
		}
		if want := map[bool]int{false: 1, true: 5}[stated]; sent != want {
			t.Errorf("policy stated %v: %d sent after the reset, want %d", stated, sent, want)
		}
	}
}

// A word that answers an attempt sent after the host's last word replaces
// what the client knew, whatever its reset; one that crossed that word,
// with a reset more than a second sooner, is a late answer from a window
// that has ended, and is dropped.
func TestQuotaFreshWordReplaces(t *testing.T) {
	var q quota
	q.init(&Quota{MaxWait: time.Minute})
	base, sec := int64(monoOffset), int64(time.Second)
	word := func(v string, now, start int64) {
		h := http.Header{"Ratelimit": {v}}
		q.observe(observation{took: true, header: h, status: 200, now: base + now, start: base + start, wall: time.Unix(1_800_000_000, 0)})
	}
	word(`"default";r=0;t=30`, sec, 0)
	word(`"default";r=5;t=2`, 2*sec, sec/2) // sent before the first word came
	if wait := q.due(base+2*sec, 0); wait < 29*sec {
		t.Fatalf("after a late answer: wait %v, want the 29 s the host's last word says", time.Duration(wait))
	}
	word(`"default";r=5;t=2`, 3*sec, 2*sec) // sent after it
	if wait := q.due(base+3*sec, 0); wait != 0 {
		t.Errorf("after the host's next word (5 left): wait %v, want none", time.Duration(wait))
	}
}
