// This file holds the throttle, one of admission's pacers (the protocol is in admission.go): per
// host, it refuses first attempts, at random, in proportion to how much
// more the client sends than the host accepts, so that an overloaded host
// sees about ratio × what it serves, and a host that is down sees almost
// nothing until it answers again.

package admission

import (
	"math"
	"sync"
	"time"
)

const (
	// throttleShort and ThrottleLong are the time constants of the
	// throttle's two views of the host: the short one reacts to an outage
	// within a fraction of a second, the long one keeps the refusals of
	// a lasting one steady. The probability of a refusal is the larger of
	// the two views'.
	throttleShort = 250 * time.Millisecond
	ThrottleLong  = 2 * time.Second
	// throttleProbeGap is how often a request goes that the throttle
	// would refuse, to find out that the host is back: at most one a
	// second, however many are offered.
	throttleProbeGap = time.Second
	// throttleShortMin is the fewest requests the short view acts on: a
	// quiet client's two failures in a row are no outage.
	throttleShortMin = 4
)

// throttle is one host's: the Google SRE client-side throttle (a refusal
// with probability (requests − ratio × accepts) / (requests + 1)), with
// requests counting the attempts it refused, as grpc-go's does, so that
// what is sent stays near ratio × what is accepted however much is
// offered; over two decaying windows instead of one long one, so that it
// follows an outage's start within a fraction of a second; and, as the
// host answers after a spell in which it accepted nothing, its refusals
// are forgotten at once, so that a recovered host is not kept waiting
// for a window to clear.
type throttle struct {
	ratio    float64
	mu       sync.Mutex
	views    [2]throttleView
	at       int64      // mono of the last decay
	drop     float64    // the probability of a refusal, as last computed
	probed   int64      // mono of the last request let go against the odds
	credit   [3]float64 // per criticality (level + 1): the part of a send earned and not yet taken, below 1
	offered  [3]float64 // first attempts offered per criticality, decayed as the long view
	answered int64      // mono start of the latest-sent attempt the host accepted
	g        gauge      // its state, for the metrics
}

type throttleView struct {
	tau           float64 // time constant, in nanoseconds
	req, acc, ref float64 // decayed counts: requests (refused ones included), accepts, refusals
}

// newThrottle is a host's throttle, its state shown on g.
func newThrottle(ratio float64, g gauge) *throttle {
	t := new(throttle)
	t.init(ratio)
	t.g = g
	return t
}

// idle reports that forgetting the host loses nothing that matters: its
// counts decay within seconds.
func (t *throttle) idle(int64) bool { return true }

func (t *throttle) init(ratio float64) {
	t.ratio = ratio
	t.views = [2]throttleView{{tau: float64(throttleShort)}, {tau: float64(ThrottleLong)}}
}

// decay ages the counts to now; mu is held.
func (t *throttle) decay(now int64) {
	if d := now - t.at; d > 0 {
		for i := range t.views {
			v := &t.views[i]
			f := math.Exp(-float64(d) / v.tau)
			v.req, v.acc, v.ref = v.req*f, v.acc*f, v.ref*f
		}
		f := math.Exp(-float64(d) / t.views[1].tau)
		for i := range t.offered {
			t.offered[i] *= f
		}
		t.at = now
	}
}

// probability is the share of requests to refuse now, the larger of the
// two views' (the long one's with SRE's "+1", which keeps a quiet
// client's few requests from being refused); mu is held.
func (t *throttle) probability() float64 { return t.refusing(t.ratio) }

// shedRatio is the ratio the sheddable are throttled to, when the
// Transport's is larger: they yield until the host receives little more
// than it accepts, so that the others' attempts are rarely turned away.
const shedRatio = 1.05

// shedding is the share of requests to refuse, sheddable first, while
// the host turns requests away (over the short view, at least half a
// request's worth of what it received; what the throttle refused never
// reached it) and receives more than shedRatio × what it accepts over the
// long view: as many as bring what it is offered, the refused included,
// down to that ratio, so that the sheddable keep out of an overload for
// as long as it lasts; and none once the host accepts what it receives,
// so that the refusals of an overload past do not keep them out; mu is
// held.
func (t *throttle) shedding() float64 {
	s, l := &t.views[0], &t.views[1]
	r := min(t.ratio, shedRatio)
	if s.req-s.ref-s.acc < 0.5 || l.req-l.ref-r*l.acc <= 0 {
		return 0
	}
	return t.refusing(r)
}

// refusing is the share of requests to refuse for the host to receive
// ratio × what it accepts; mu is held.
func (t *throttle) refusing(ratio float64) float64 {
	s, l := &t.views[0], &t.views[1]
	p := (l.req - ratio*l.acc) / (l.req + 1)
	if s.req > throttleShortMin {
		p = max(p, 1-ratio*s.acc/s.req)
	}
	return max(p, 0)
}

// admit refuses a first attempt with the throttle's probability, and
// counts it either way; later attempts are the retry budget's. The
// refusals fall on the lowest criticality first (share).
func (t *throttle) admit(a query) verdict {
	if a.kind != kindFirst {
		return send
	}
	t.mu.Lock()
	t.decay(a.now)
	l := a.level + 1
	t.offered[l]++
	p := t.probability()
	t.drop = p
	q := p
	if t.offered[l] < t.offered[0]+t.offered[1]+t.offered[2] || l == 0 {
		q = t.share(p, l) // more than one criticality, or the sheddable's
	}
	// Refused by credit, not by a draw: each request earns 1-p of a
	// send, and one goes when a whole one is earned, so that what goes is
	// spread evenly (random refusals bunch the sends, and a host with a
	// small burst refuses some of the bunches).
	refused := false
	if q > 0 {
		// The remainder is kept: capping the credit at 1 before a
		// send took it threw the part past 1 away, so that a share of
		// 0.8 sent every second request, 0.45 every third.
		t.credit[l] += 1 - q // below 1 before, so below 2 now
		if refused = t.credit[l] < 1; !refused {
			t.credit[l]--
		}
	}
	if refused && a.now-t.probed >= int64(throttleProbeGap) {
		refused, t.probed = false, a.now // the probe of this second
	}
	if refused {
		for i := range t.views {
			t.views[i].req++ // a request sent is counted as it ends
			t.views[i].ref++
		}
	}
	t.mu.Unlock()
	if refused {
		t.g.set(p)
		return refuse(reasonThrottled)
	}
	return send
}

// share is the probability of refusing a first attempt of criticality l
// (level + 1) when p of all are to be refused; mu is held. The refusals
// fall on the sheddable first, as far as they go, then on the default,
// then on the critical, by the share of each among those offered of late;
// and the sheddable yield further, until the host receives shedRatio ×
// what it accepts (if the Transport's ratio is larger). With only the
// default offered, it is p.
func (t *throttle) share(p float64, l int8) float64 {
	total := t.offered[0] + t.offered[1] + t.offered[2]
	shed := 0.0 // refusals of the sheddable, in offered attempts
	if t.offered[0] > 0 {
		shed = min(t.offered[0], total*max(p, t.shedding()))
	}
	if l == 0 {
		return shed / t.offered[0]
	}
	left := p*total - shed // refusals still to place
	for i := int8(1); i < l; i++ {
		left -= t.offered[i]
	}
	return min(max(left/t.offered[l], 0), 1)
}

func (t *throttle) giveBack(permit, time.Time) {}

// observe counts a first attempt as a request, as it ends (counted as it
// was sent, one still in flight would look refused), and any attempt the
// host accepted as an accept. Requests are first attempts only: a retry
// is the budget's to limit, and a host that serves every request at its
// second attempt (a bad backend behind a balancer) serves them all, and
// is not throttled.
func (t *throttle) observe(o observation) change {
	if !o.sent {
		return change{}
	}
	t.mu.Lock()
	if o.rejected && o.start < t.answered {
		// Sent before an attempt the host has accepted since: its
		// refusal is stale, and says nothing of the host now.
		t.mu.Unlock()
		return change{}
	}
	t.decay(o.now)
	if !o.retry {
		for i := range t.views {
			t.views[i].req++
		}
	}
	if o.rejected {
		t.drop = t.probability()
		t.mu.Unlock()
		return change{}
	}
	t.answered = max(t.answered, o.start)
	if t.views[0].acc < 0.5 && t.drop > 0 {
		// Nothing accepted lately, and this is: the host is back.
		// Forget the refusals, keep the accepts.
		for i := range t.views {
			t.views[i].req, t.views[i].ref = t.views[i].acc, 0
		}
	}
	for i := range t.views {
		t.views[i].acc++
	}
	t.drop = t.probability()
	p := t.drop
	t.mu.Unlock()
	t.g.set(p)
	return change{}
}
