package admission

import (
	"math/rand/v2"
	"slices"
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
	return throttleRunArrivals(ratio, rate, false, d, capacity, split)
}

// throttleRunArrivals is throttleRun with the arrivals at random
// (Poisson) if poisson.
func throttleRunArrivals(ratio float64, rate int, poisson bool, d time.Duration, capacity func(t time.Duration) float64, split time.Duration) (before, after throttlePhase) {
	rng := rand.New(rand.NewPCG(7, 8))
	var th throttle
	th.init(ratio)
	base := int64(monoOffset)
	tokens, last := max(capacity(0)/20, 1), time.Duration(0)
	step := time.Second / time.Duration(rate)
	for t := time.Duration(0); t < d; t += step {
		if poisson {
			t += time.Duration(rng.ExpFloat64()*float64(step)) - step
		}
		c := capacity(t)
		tokens = min(tokens+(t-last).Seconds()*c, max(c/20, 1))
		last = t
		ph := &before
		if t >= split {
			ph = &after
		}
		ph.offered++
		now := base + int64(t)
		if th.admit(query{kind: kindFirst, now: now}).act != actSend {
			continue
		}
		ph.sent++
		ok := c > 0 && tokens >= 1
		if ok {
			tokens--
			ph.accepted++
		}
		th.observe(observation{sent: true, rejected: !ok, now: now})
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

	// A small host, whose burst is one request, offered evenly spaced or
	// random arrivals: what goes is spread over what is offered (credit,
	// not a draw), and no more than the ratio's share of it is lost to
	// the host's refusals of what comes close together. (A credit that
	// kept no remainder sent less than the share, which met evenly spaced
	// arrivals at 2C and 4C exactly, every second or third one, and lost
	// random ones: 0.67 to 0.73 of what no throttle serves.)
	for _, c := range []float64{10, 20} {
		for _, k := range []float64{2, 4} {
			for _, poisson := range []bool{false, true} {
				_, bare := throttleRunArrivals(1e9, int(k*c), poisson, 40*time.Second, constant(c), 10*time.Second)
				_, got := throttleRunArrivals(1.5, int(k*c), poisson, 40*time.Second, constant(c), 10*time.Second)
				t.Logf("capacity %g, offered %gC, random arrivals %v: the server sees %.2fC, completes %.2f × what it does with no throttle",
					c, k, poisson, float64(got.sent)/30/c, float64(got.accepted)/float64(bare.accepted))
				if float64(got.accepted) < 0.7*float64(bare.accepted) || float64(got.sent)/30/c > 1.5 {
					t.Errorf("capacity %g, offered %gC, random arrivals %v: the server sees %.2fC and completes %d, want at most 1.5C and at least 0.7 × %d",
						c, k, poisson, float64(got.sent)/30/c, got.accepted, bare.accepted)
				}
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
			th.observe(observation{sent: true, now: base + inFlight[0]})
			inFlight = inFlight[1:]
		}
		if th.admit(query{kind: kindFirst, now: base + now}).act != actSend {
			refused++
			continue
		}
		inFlight = append(inFlight, now+int64(500*time.Millisecond))
	}
	if refused > 0 {
		t.Errorf("%d of 20000 requests to a healthy host that answers in 500 ms refused, want none", refused)
	}
}

// throttleLoss drives one host's throttle in virtual time against a
// server of slots × work (it serves up to slots at once, each for work,
// and refuses at once what finds them all busy: a loss system), offered
// rate first attempts a second for d, evenly spaced or at random
// (Poisson). It counts what was sent and accepted after warm.
func throttleLoss(ratio float64, rate float64, poisson bool, slots int, work, d, warm time.Duration) (sent, accepted int) {
	var th throttle
	th.init(ratio)
	base := int64(monoOffset)
	rng := rand.New(rand.NewPCG(5, 6))
	var busy []time.Duration // when each request in service ends, sorted
	step := float64(time.Second) / rate
	for t := time.Duration(0); t < d; {
		if poisson {
			t += time.Duration(rng.ExpFloat64() * step)
		} else {
			t += time.Duration(step)
		}
		for len(busy) > 0 && busy[0] <= t {
			th.observe(observation{sent: true, now: base + int64(busy[0]), start: base + int64(busy[0]-work)})
			busy = busy[1:]
		}
		now := base + int64(t)
		if th.admit(query{kind: kindFirst, now: now}).act != actSend {
			continue
		}
		if t >= warm {
			sent++
		}
		if len(busy) >= slots {
			th.observe(observation{sent: true, rejected: true, now: now, start: now})
			continue
		}
		if t >= warm {
			accepted++
		}
		i, _ := slices.BinarySearch(busy, t+work)
		busy = slices.Insert(busy, i, t+work)
	}
	return sent, accepted
}

// A host of few slots refuses bursts of random (Poisson) arrivals below
// its capacity (an Erlang loss system: 5 slots at 2× their capacity
// refuse 56% and serve 0.87 of capacity), and the SRE rule reads each
// refusal as overload: with ratio K it settles where the host refuses
// 1 − 1/K of what is sent, 20% for 1.25, which random arrivals meet at
// 0.64 of capacity. What it must do is keep the share it computes: the
// credit kept no remainder past one send, so that a share of 0.8 sent
// every second request (1.25 served 0.74 of what no throttle does,
// 2 served 0.89).
func TestThrottleLossServer(t *testing.T) {
	const slots, work = 5, 10 * time.Millisecond
	capacity := float64(slots) / work.Seconds()
	for _, poisson := range []bool{false, true} {
		_, bare := throttleLoss(1e9, 2*capacity, poisson, slots, work, 20*time.Second, 5*time.Second)
		for _, c := range []struct{ ratio, want float64 }{{1.25, 0.85}, {1.5, 0.9}, {2, 0.95}} {
			sent, done := throttleLoss(c.ratio, 2*capacity, poisson, slots, work, 20*time.Second, 5*time.Second)
			got := float64(done) / float64(bare)
			t.Logf("random arrivals %v, offered 2C, ratio %g: the server sees %.2fC, serves %.2f of what it serves with no throttle (%.2fC)",
				poisson, c.ratio, float64(sent)/15/capacity, got, float64(bare)/15/capacity)
			if got < c.want {
				t.Errorf("random arrivals %v, ratio %g: %.2f of what no throttle serves, want at least %.2f", poisson, c.ratio, got, c.want)
			}
			if r := float64(sent) / float64(done); r > c.ratio*1.05 {
				t.Errorf("random arrivals %v, ratio %g: %.2f sent per success, want at most the ratio", poisson, c.ratio, r)
			}
		}
	}
}
