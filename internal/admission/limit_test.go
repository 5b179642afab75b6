package admission

import (
	"container/heap"
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// limitSim drives one host's adaptive limit in virtual time: first
// attempts arrive evenly at rate a second; the server runs capacity(t) at
// once, each for about work (±10%), queues as many again, and answers
// the rest 503 at once. An attempt over the limit is refused here (the
// queue is a separate test). It reports what each second saw.
type limitSecond struct {
	served   int
	limit    float64 // at the second's end
	limitSum float64 // the limit at each arrival, summed
	arrivals int
	refused  int
	admitted []time.Duration
}

// meanLimit is the limit over the second, on average.
func (s limitSecond) meanLimit() float64 { return s.limitSum / float64(max(s.arrivals, 1)) }

type simEvent struct {
	at    time.Duration
	start time.Duration
}

type simHeap []simEvent

func (h simHeap) Len() int           { return len(h) }
func (h simHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h simHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *simHeap) Push(x any)        { *h = append(*h, x.(simEvent)) }
func (h *simHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

func limitSim(lo, hi int, rate float64, work time.Duration, d time.Duration, capacity func(time.Duration) int) []limitSecond {
	return limitSimJitter(lo, hi, rate, work, 0.1, false, d, capacity)
}

// limitSimJitter is limitSim with each service time drawn within ±jitter
// of work, and arrivals at random (Poisson) if poisson.
func limitSimJitter(lo, hi int, rate float64, work time.Duration, jitter float64, poisson bool, d time.Duration, capacity func(time.Duration) int) []limitSecond {
	var l limiter
	l.init(&Limit{Min: lo, Max: hi})
	base := int64(monoOffset)
	rng := rand.New(rand.NewPCG(1, 2))
	secs := make([]limitSecond, int(d/time.Second)+1)
	var running simHeap
	var queued []time.Duration // the server's queue: when each was sent
	step := time.Duration(float64(time.Second) / rate)
	serve := func(now, sent time.Duration) {
		heap.Push(&running, simEvent{at: now + time.Duration(float64(work)*(1-jitter+2*jitter*rng.Float64())), start: sent})
	}
	end := func(e simEvent) {
		s := &secs[int(e.at/time.Second)]
		s.served++
		s.admitted = append(s.admitted, e.at-e.start)
		l.observe(observation{took: true, sent: true, now: base + int64(e.at), start: base + int64(e.start), rtt: int64(e.at - e.start)})
		if len(queued) > 0 && running.Len() < capacity(e.at) {
			serve(e.at, queued[0])
			queued = queued[1:]
		}
	}
	last := 0
	for now := time.Duration(0); now < d; now += step {
		if poisson {
			now += time.Duration(rng.ExpFloat64()*float64(step)) - step
		}
		for running.Len() > 0 && running[0].at <= now {
			end(heap.Pop(&running).(simEvent))
		}
		if i := int(now / time.Second); i != last {
			secs[last].limit = l.limit
			last = i
		}
		sec := &secs[int(now/time.Second)]
		sec.arrivals++
		sec.limitSum += l.limit
		if v := l.admit(query{kind: kindFirst, now: base + int64(now)}); v.act != actSend {
			l.giveBack(permit{waiter: v.waiter}, time.Time{}) // not one to wait in line: refused
			sec.refused++
			continue
		}
		switch c := capacity(now); {
		case running.Len() < c:
			serve(now, now)
		case len(queued) < c:
			queued = append(queued, now)
		default:
			l.observe(observation{took: true, sent: true, rejected: true, now: base + int64(now), start: base + int64(now)})
		}
	}
	secs[last].limit = l.limit
	return secs[:len(secs)-1]
}

func TestConcurrencyLimitAdapts(t *testing.T) {
	const work = 10 * time.Millisecond
	// Capacity steps from 32 in flight to 8 at 10 s, back to 32 at 20 s;
	// offered 1.3 × what 32 serve.
	capacity := func(t time.Duration) int {
		if t >= 10*time.Second && t < 20*time.Second {
			return 8
		}
		return 32
	}
	rate := 1.3 * 32 / work.Seconds()
	secs := limitSim(1, 64, rate, work, 30*time.Second, capacity)
	for i, s := range secs {
		c := capacity(time.Duration(i) * time.Second)
		slices.Sort(s.admitted)
		p99 := s.admitted[len(s.admitted)*99/100]
		goodput := float64(s.served) * work.Seconds() / float64(c)
		t.Logf("second %2d: capacity %2d, limit %5.1f on average, goodput %.2f × capacity, p99 %v", i, c, s.meanLimit(), goodput, p99.Round(time.Millisecond))
		if i == 0 || i == 10 || i == 20 {
			continue // the step's own second
		}
		if goodput < 0.95 {
			t.Errorf("second %d: goodput %.2f × capacity, want at least 0.95", i, goodput)
		}
		if p99 > 2*work {
			t.Errorf("second %d: p99 of admitted attempts %v, want at most 2 × %v", i, p99, work)
		}
		if since := i % 10; since >= 2 && (s.meanLimit() > 1.25*float64(c) || s.meanLimit() < float64(c)/1.25) {
			t.Errorf("second %d, %d s after a step: limit %.1f on average, want within 1.25 × %d", i, since, s.meanLimit(), c)
		}
	}
}

func TestConcurrencyLimitDoesNotDrift(t *testing.T) {
	const work = 10 * time.Millisecond
	secs := limitSim(1, 64, 1.3*32/work.Seconds(), work, 10*time.Minute, func(time.Duration) int { return 8 })
	mean := func(ss []limitSecond) (m float64) {
		for _, s := range ss {
			m += s.limit / float64(len(ss))
		}
		return m
	}
	var ends []float64
	for _, s := range secs[5:] {
		ends = append(ends, s.limit)
	}
	slices.Sort(ends)
	first, last, p99 := mean(secs[5:65]), mean(secs[len(secs)-60:]), ends[len(ends)*99/100]
	t.Logf("10 minutes at capacity 8: mean limit %.2f in the first minute, %.2f in the last; 99%% of seconds end at most at %.1f", first, last, p99)
	if last > first*1.05 {
		t.Errorf("the limit drifted up: mean %.2f in the first minute, %.2f in the last", first, last)
	}
	if last > 1.25*8 || p99 > 1.5*8 {
		t.Errorf("the limit: mean %.2f in the last minute, want at most 1.25 × 8; %.1f at the 99th percentile, want at most 1.5 × 8", last, p99)
	}
}

// waitInLine asks c for a first attempt as admission does, waiting out
// what it asks for, within d if d > 0: it reports what it took and
// whether the attempt may go.
func waitInLine(ctx context.Context, c controller, d time.Duration) (permit, bool, error) {
	a := query{kind: kindFirst, now: mono()}
	if d > 0 {
		a.deadline = a.now + int64(d)
	}
	v, err := (&Ticket{ctx: ctx}).waitOut(c, a, c.admit(a))
	return v.permit, v.act == actSend, err
}

// A fixed limit: attempts over it wait their turn, in order, within
// their deadline, and max of them at most wait.
func TestConcurrencyLimitQueue(t *testing.T) {
	var l limiter
	l.init(&Limit{Min: 2, Max: 2})
	for range 2 {
		if v := l.admit(query{}); v.act != actSend || !v.took {
			t.Fatalf("a free slot: %+v", v)
		}
	}
	if v := l.admit(query{}); v.act != actWait || v.waiter == nil {
		t.Fatalf("over the limit: %+v, want to wait in line", v)
	} else {
		l.giveBack(permit{waiter: v.waiter}, time.Time{}) // and it leaves the line
	}
	var order []int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, got, err := waitInLine(context.Background(), &l, 0)
			if !got || err != nil {
				t.Errorf("waiter %d: %v %v", i, got, err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
		}()
		for {
			l.mu.Lock()
			n := len(l.waiters)
			l.mu.Unlock()
			if n == i+1 {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	if v := l.admit(query{}); v.act != actRefuse || v.reason != reasonLimit {
		t.Errorf("with max waiting: %+v, want refused (limit)", v)
	}
	// A waiter whose deadline passes leaves the queue, with no slot.
	_, got, err := waitInLine(context.Background(), &l, 5*time.Millisecond)
	if got || err != nil {
		t.Errorf("queue full: %v %v, want refused at once", got, err)
	}
	for want := 1; want <= 2; want++ {
		l.observe(observation{took: true}) // one slot frees: the next in line has it
		for range 1000 {
			mu.Lock()
			n := len(order)
			mu.Unlock()
			if n >= want {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	wg.Wait()
	if !slices.Equal(order, []int{0, 1}) {
		t.Errorf("served in order %v, want [0 1]", order)
	}
	l.observe(observation{took: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	_, got, err = waitInLine(ctx, &l, 5*time.Millisecond)
	if !got || err != nil {
		t.Errorf("a free slot after the others ended: %v %v", got, err)
	}
	l.observe(observation{took: true})
	l.observe(observation{took: true})
	if l.inflight != 0 || len(l.waiters) != 0 {
		t.Errorf("after all ended: %d in flight, %d waiting", l.inflight, len(l.waiters))
	}
}

// A host whose answers vary widely of themselves (±50%, or two kinds of
// request at 1 ms and 20 ms), never overloaded: the limit does not take
// that spread for queueing, and refuses nothing.
func TestConcurrencyLimitIgnoresTheHostsOwnSpread(t *testing.T) {
	const work = 10 * time.Millisecond
	for _, jitter := range []float64{0.2, 0.5, 0.9} {
		// 64 at once serve 6,400 a second; 1,600 a second offered keep
		// about 16 in flight.
		secs := limitSimJitter(1, 64, 1600, work, jitter, true, 30*time.Second, func(time.Duration) int { return 64 })
		refused, arrivals, mean := 0, 0, 0.0
		for _, s := range secs[5:] {
			refused, arrivals, mean = refused+s.refused, arrivals+s.arrivals, mean+s.meanLimit()/float64(len(secs)-5)
		}
		t.Logf("±%.0f%%: mean limit %.1f, %d of %d refused", 100*jitter, mean, refused, arrivals)
		if float64(refused) > 0.001*float64(arrivals) || mean < 32 {
			t.Errorf("±%.0f%% spread, no overload: mean limit %.1f, %d of %d refused; want no refusal and the limit well above the 16 in use", 100*jitter, mean, refused, arrivals)
		}
	}
}
