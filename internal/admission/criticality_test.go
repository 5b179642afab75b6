package admission

import (
	"net/http"
	"testing"
	"time"
)

// A sheddable retry fits half of the budget's share, the other half is
// the default's and the critical's; the floor of a quiet host is the same
// for all.
func TestBudgetKeepsHalfFromTheSheddable(t *testing.T) {
	for _, floor := range []float64{0, 10} {
		var b Share
		b.Init(0.1, floor)
		sec := int64(1_800_000_000)
		c := attached(&b, "h", sec)
		for range 100 {
			c.admit(query{kind: kindFirst, sec: sec})
		}
		count := func(level int8) (n int) {
			for range 20 {
				if c.admit(query{kind: kindRetry, sec: sec, level: level, healthy: true}).act == actSend {
					n++
				}
			}
			return n
		}
		shed, crit := count(-1), count(1)
		want := [2]int{5, 5} // of the 10 the share allows
		if floor > 0 {
			want = [2]int{20, 10} // 30 in the floor's 3 s
		}
		if shed != want[0] || crit != want[1] {
			t.Errorf("floor %v: %d sheddable then %d critical retries; want %d and %d", floor, shed, crit, want[0], want[1])
		}
		if floor > 0 {
			continue
		}
		// The critical found the share spent: for the rest of this second
		// and the next, the sheddable have none of what frees up.
		for range 200 {
			c.admit(query{kind: kindFirst, sec: sec + 1})
		}
		if n := count(-1); n != 0 {
			t.Errorf("after a critical retry was refused: %d sheddable retries, want none", n)
		}
		sec += 2
		if n := count(-1); n == 0 {
			t.Errorf("2 s after a critical retry was refused: no sheddable retry, want some")
		}
	}
}

// The throttle's refusals fall on the sheddable first, then the default,
// then the critical; one criticality alone takes them all, as before.
func TestThrottleRefusesTheSheddableFirst(t *testing.T) {
	var th throttle
	th.offered = [3]float64{70, 0, 30}
	if p := th.share(0.5, 0); p < 0.71 || p > 0.72 {
		t.Errorf("half refused, 70%% sheddable: a sheddable one is refused with %.3f, want 0.714", p)
	}
	if p := th.share(0.5, 2); p != 0 {
		t.Errorf("half refused, 70%% sheddable: a critical one is refused with %.3f, want 0", p)
	}
	if p := th.share(0.9, 2); p < 0.66 || p > 0.67 {
		t.Errorf("0.9 refused: a critical one is refused with %.3f, want 0.667", p)
	}
	th.offered = [3]float64{0, 100, 0}
	if p := th.share(0.4, 1); p != 0.4 {
		t.Errorf("one criticality: refused with %.3f, want 0.4", p)
	}
	// A host that accepts half of what it is sent: at the ratio 1.25, 37%
	// are refused; the sheddable yield until it is sent 1.05 × what it
	// accepts (47% refused), and the critical none.
	th.init(1.25)
	th.views[0].req, th.views[0].acc = 20, 10 // turning away half now
	th.views[1].req, th.views[1].acc = 1000, 500
	p := th.probability()
	th.offered = [3]float64{70, 0, 30}
	if s, c := th.share(p, 0), th.share(p, 2); s < 0.677 || s > 0.679 || c != 0 {
		t.Errorf("70%% sheddable: refused %.3f of the sheddable, %.3f of the critical; want 0.678 and 0", s, c)
	}
	th.offered = [3]float64{100, 0, 0}
	if s := th.share(p, 0); s < 0.474 || s > 0.475 {
		t.Errorf("only sheddable: refused %.3f, want 0.474 (the ratio 1.05)", s)
	}
}

// The concurrency limit's line grants the most critical first, and keeps
// its second half from the sheddable.
func TestLimitLineLetsTheCriticalFirst(t *testing.T) {
	l := newLimiter(&Limit{Min: 1, Max: 4}, gauge{})
	l.limit = 1 // one slot, and a line of 4
	ask := func(level int8) verdict { return l.admit(query{kind: kindFirst, level: level}) }
	if v := ask(0); v.act != actSend {
		t.Fatalf("the first attempt waits: %+v", v)
	}
	shed, def := ask(-1), ask(0)
	if shed.act != actWait || def.act != actWait {
		t.Fatalf("with the one slot taken: %v, %v; want both in line", shed.act, def.act)
	}
	if v := ask(-1); v.act != actRefuse {
		t.Errorf("a sheddable attempt at a line half full: %v, want refused", v.act)
	}
	crit := ask(1)
	if crit.act != actWait {
		t.Fatalf("a critical attempt at a line half full: %v, want in line", crit.act)
	}
	l.giveBack(permit{took: true}, time.Time{})
	if !crit.waiter.granted() || def.waiter.granted() || shed.waiter.granted() {
		t.Errorf("the slot went to critical %v, default %v, sheddable %v; want the critical, last in line",
			crit.waiter.granted(), def.waiter.granted(), shed.waiter.granted())
	}
	l.giveBack(permit{took: true}, time.Time{})
	if !def.waiter.granted() || shed.waiter.granted() {
		t.Errorf("the next slot: default %v, sheddable %v; want the default", def.waiter.granted(), shed.waiter.granted())
	}
}

// Quota pacing keeps a tenth of a quota from the sheddable, and lets the
// critical go first at a reset, within half the jitter that spreads the
// others past it.
func TestQuotaReserveAndCriticalFirst(t *testing.T) {
	var q quota
	q.init(&Quota{MaxWait: time.Minute})
	q.jitter = func(n int64) int64 { return n - 1 }
	base, sec := int64(monoOffset), int64(time.Second)
	word := func(v string, now int64) {
		q.observe(observation{took: true, header: http.Header{"Ratelimit": {v}}, status: 200, now: base + now, start: base + now - 1, wall: time.Unix(1_800_000_000, 0)})
	}
	word(`"default";r=99;t=30`, sec) // a quota of 100 a window
	word(`"default";r=5;t=20`, 2*sec)
	if w := q.due(base+2*sec, 0); w != 0 {
		t.Errorf("5 of 100 left: a default attempt waits %v, want none", time.Duration(w))
	}
	if w := q.due(base+2*sec, -1); w < 20*sec {
		t.Errorf("5 of 100 left: a sheddable attempt waits %v, want the 20 s to the reset", time.Duration(w))
	}
	word(`"default";r=0;t=20`, 2*sec)
	crit, def := q.due(base+2*sec, 1), q.due(base+2*sec, 0)

	if crit <= 20*sec || def <= crit {
		t.Errorf("spent: the critical waits %v, the default %v; want the critical past the reset, the default after it", time.Duration(crit), time.Duration(def))
	}
}

// A release gives its earliest turns to the most critical retries, each
// never before its own wait nor past half of what is left of its limit;
// with one criticality it changes nothing.
func TestReleaseCriticalFirst(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	end := at(1000)
	shed := &holder{level: -1, turn: at(0), limit: at(40)} // its turn may be no later than 20 ms: half of what is left
	def := &holder{level: 0, turn: at(10), limit: end}
	late := &holder{level: 1, turn: at(20), notBefore: at(15), limit: end}
	crit := &holder{level: 1, turn: at(30), limit: end}
	ws := []*holder{shed, def, late, crit}
	criticalFirst(ws, t0)
	if ws[0] != late || ws[1] != crit || ws[2] != def || ws[3] != shed {
		t.Fatalf("order %v, %v, %v, %v; want the two critical, then the default, then the sheddable", ws[0].level, ws[1].level, ws[2].level, ws[3].level)
	}
	if !late.turn.Equal(at(15)) || !crit.turn.Equal(at(10)) || !def.turn.Equal(at(20)) || !shed.turn.Equal(at(20)) {
		t.Errorf("turns %v %v %v %v; want 15 ms (its own wait), 10, 20, 20 (within its limit)", late.turn.Sub(t0), crit.turn.Sub(t0), def.turn.Sub(t0), shed.turn.Sub(t0))
	}
	one := []*holder{{turn: at(5), limit: end}, {turn: at(1), limit: end}}
	criticalFirst(one, t0)
	if !one[0].turn.Equal(at(5)) || !one[1].turn.Equal(at(1)) {
		t.Errorf("one criticality: the turns moved")
	}
}

// A sheddable attempt in the limit's line is served, however many more
// critical ones arrive after it: passed over as often as the line is
// long, it goes first.
func TestLimitLineServesTheSheddableInTime(t *testing.T) {
	l := newLimiter(&Limit{Min: 1, Max: 4}, gauge{})
	l.limit = 1
	if v := l.admit(query{kind: kindFirst}); v.act != actSend {
		t.Fatalf("the first attempt: %v", v.act)
	}
	shed := l.admit(query{kind: kindFirst, level: -1})
	if shed.act != actWait {
		t.Fatalf("a sheddable attempt with the slot taken: %v, want in line", shed.act)
	}
	for round := 1; round <= 10; round++ {
		if v := l.admit(query{kind: kindFirst}); v.act != actWait {
			t.Fatalf("round %d: a default attempt: %v, want in line", round, v.act)
		}
		l.giveBack(permit{took: true}, time.Time{})
		if shed.waiter.granted() {
			if round != 5 {
				t.Errorf("the sheddable attempt was served at round %d, want 5: after 4 passes, the line's length", round)
			}
			return
		}
	}
	t.Fatal("the sheddable attempt was never served")
}

// Once the host accepts all it is sent, the sheddable are sent again: the
// refusals of an overload past, which never reached the host, do not
// keep them out (they did, counted as the host's: a fifth sheddable kept
// the host "sent" 1.25 × what it accepted, and so on for ever).
func TestThrottleLetsTheSheddableBackIn(t *testing.T) {
	th := newThrottle(2, gauge{})
	th.views[0].req, th.views[0].acc = 20, 5 // an overload, just past
	th.views[1].req, th.views[1].acc = 400, 100
	base := int64(1 << 40)
	th.at = base
	refused := 0
	for i := range 10_000 { // 1,000 a second for 10 s, a fifth sheddable, all accepted
		now := base + int64(i)*int64(time.Millisecond)
		level := int8(0)
		if i%5 == 0 {
			level = -1
		}
		if v := th.admit(query{kind: kindFirst, now: now, level: level}); v.act != actSend {
			if i >= 5_000 {
				refused++
			}
			continue
		}
		th.observe(observation{sent: true, now: now, start: now})
	}
	if refused > 10 {
		t.Errorf("%d of the last 5 s' 5,000 requests refused by a throttle whose host accepts all it is sent; want none", refused)
	}
}
