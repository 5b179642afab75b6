package retryhttp

import (
	"math/rand/v2"
	"testing"
	"time"
)

// throttleRun drives one host's throttle in virtual time: rate first
// attempts a second, evenly spaced, for d, against a server that accepts
// up to capacity(t) a second (a token bucket holding a twentieth of a
// second's worth) and refuses the rest at once. It counts, per phase
// (before and after split), what was offered, sent and accepted.
type throttlePhase struct{ offered, sent, accepted int }

func throttleRun(ratio float64, rate int, d time.Duration, capacity func(t time.Duration) float64, split time.Duration) (before, after throttlePhase) {
	var th throttle
	th.init(ratio)
	base := int64(monoOffset)
	tokens, last := max(capacity(0)/20, 1), time.Duration(0)
	step := time.Second / time.Duration(rate)
	for t := time.Duration(0); t < d; t += step {
		c := capacity(t)
		tokens = min(tokens+(t-last).Seconds()*c, max(c/20, 1))
		last = t
		ph := &before
		if t >= split {
			ph = &after
		}
		ph.offered++
		now := base + int64(t)
		if th.admit(ask{kind: kindFirst, now: now}).act != actSend {
			continue
		}
		ph.sent++
		ok := c > 0 && tokens >= 1
		if ok {
			tokens--
			ph.accepted++
		}
		th.observe(seen{sent: true, rejected: !ok, now: now})
	}
	return before, after
}

func TestThrottle(t *testing.T) {
	const C = 500.0
	constant := func(c float64) func(time.Duration) float64 { return func(time.Duration) float64 { return c } }
	for _, k := range []float64{2, 4} {
		// With no throttle (a ratio so large it never refuses), and with.
		_, bare := throttleRun(1e9, int(k*C), 20*time.Second, constant(C), 5*time.Second)
		_, got := throttleRun(1.25, int(k*C), 20*time.Second, constant(C), 5*time.Second)
		secs := 15.0
		sent, done, bareDone := float64(got.sent)/secs/C, float64(got.accepted)/secs/C, float64(bare.accepted)/secs/C
		t.Logf("offered %gC: the server sees %.2fC, completes %.2fC (with no throttle: %.2fC)", k, sent, done, bareDone)
		if sent > 1.5 {
			t.Errorf("offered %gC: the server sees %.2fC, want at most 1.5C", k, sent)
		}
		if done < 0.85*bareDone {
			t.Errorf("offered %gC: it completes %.2fC, want at least 0.85 × %.2fC", k, done, bareDone)
		}
	}

	// A small host, whose burst is one request: what goes must be spread
	// evenly, or it refuses some of it.
	for _, c := range []float64{10, 20} {
		for _, k := range []float64{2, 4} {
			_, bare := throttleRun(1e9, int(k*c), 40*time.Second, constant(c), 10*time.Second)
			_, got := throttleRun(1.5, int(k*c), 40*time.Second, constant(c), 10*time.Second)
			t.Logf("capacity %g, offered %gC: the server sees %.2fC, completes %.2f × what it does with no throttle",
				c, k, float64(got.sent)/30/c, float64(got.accepted)/float64(bare.accepted))
			if float64(got.accepted) < 0.85*float64(bare.accepted) || float64(got.sent)/30/c > 1.5 {
				t.Errorf("capacity %g, offered %gC: the server sees %.2fC and completes %d, want at most 1.5C and at least 0.85 × %d",
					c, k, float64(got.sent)/30/c, got.accepted, bare.accepted)
			}
		}
	}

	// A healthy host: nothing refused.
	_, healthy := throttleRun(1.25, 200, 10*time.Second, constant(1000), 0)
	if healthy.sent != healthy.offered {
		t.Errorf("a healthy host: %d of %d sent, want all", healthy.sent, healthy.offered)
	}

	// A 30 s outage after 5 s healthy, then 10 s healthy again.
	outage := func(t time.Duration) float64 {
		if t >= 5*time.Second && t < 35*time.Second {
			return 0
		}
		return 1000
	}
	_, in := throttleRun(1.5, 200, 35*time.Second, outage, 5*time.Second)
	_, back := throttleRun(1.5, 200, 45*time.Second, outage, 37*time.Second)
	t.Logf("outage: %d of %d sent (%.2f%%); from 2 s after it: %d of %d accepted",
		in.sent, in.offered, 100*float64(in.sent)/float64(in.offered), back.accepted, back.offered)
	if float64(in.sent) > 0.02*float64(in.offered) {
		t.Errorf("outage: %d of %d sent, want at most 2%%", in.sent, in.offered)
	}
	if float64(back.accepted) < 0.99*float64(back.offered) {
		t.Errorf("2 s after the outage: %d of %d first attempts succeed, want 99%%", back.accepted, back.offered)
	}
}

// A healthy host whose answers are slow: requests in flight are not
// taken for refused ones, however the arrivals bunch.
func TestThrottleSlowHealthyHost(t *testing.T) {
	var th throttle
	th.init(1.1)
	rng := rand.New(rand.NewPCG(3, 4))
	base := int64(monoOffset)
	var inFlight []int64 // when each ends
	refused, now := 0, int64(0)
	for range 20000 {
		now += int64(rng.ExpFloat64() * float64(20*time.Millisecond)) // 50 a second, at random
		for len(inFlight) > 0 && inFlight[0] <= now {
			th.observe(seen{sent: true, now: base + inFlight[0]})
			inFlight = inFlight[1:]
		}
		if th.admit(ask{kind: kindFirst, now: base + now}).act != actSend {
			refused++
			continue
		}
		inFlight = append(inFlight, now+int64(500*time.Millisecond))
	}
	if refused > 0 {
		t.Errorf("%d of 20000 requests to a healthy host that answers in 500 ms refused, want none", refused)
	}
}
