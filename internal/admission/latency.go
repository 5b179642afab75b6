// This file holds a host's recent latencies, which hedging reads, and
// the breaker's estimate of how long the host usually takes to answer,
// which a held retry's probe must leave time for.

package admission

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// minSamples is how many latencies a host needs before its percentile
// means anything.
const minSamples = 20

// latencies are a host's recent latencies of successful first attempts: a
// histogram of 4 buckets per doubling from 1µs, halved every 1,024
// samples so that it follows the host.
type latencies struct {
	counts [160]atomic.Uint32
	total  atomic.Uint32
}

func latencyBucket(d time.Duration) int {
	us := uint64(max(d/time.Microsecond, 1))
	exp := bits.Len64(us) - 1 // 2^exp <= us
	frac := 0
	if exp >= 2 {
		frac = int(us>>(exp-2)) & 3
	}
	return min(exp*4+frac, 159)
}

// bucketTop is the upper bound of a bucket.
func bucketTop(i int) time.Duration {
	exp, frac := i/4, i%4
	us := (uint64(1) << exp) * uint64(4+frac+1) / 4
	return time.Duration(us) * time.Microsecond
}

func (l *latencies) record(d time.Duration) {
	l.counts[latencyBucket(d)].Add(1)
	if l.total.Add(1) >= 1024 {
		l.total.Store(0)
		for i := range l.counts {
			l.counts[i].Store(l.counts[i].Load() / 2)
		}
		var t uint32
		for i := range l.counts {
			t += l.counts[i].Load()
		}
		l.total.Store(t)
	}
}

// percentile returns the p-th percentile, or 0 with too few samples.
func (l *latencies) percentile(p float64) time.Duration {
	var n uint32
	for i := range l.counts {
		n += l.counts[i].Load()
	}
	if n < minSamples {
		return 0
	}
	want := uint32(p * float64(n))
	var sum uint32
	for i := range l.counts {
		if sum += l.counts[i].Load(); sum > want {
			return bucketTop(i)
		}
	}
	return bucketTop(len(l.counts) - 1)
}

// usualWeight makes a circuit's usual answer time move by an eighth of
// the way to each new answer's round trip, so that one slow answer moves
// it little.
const usualWeight = 8

// noteAnswer takes the round trip of an attempt the host answered,
// whatever the status, into the circuit's usual answer time; mu is held.
// The circuit is told of answers only while it is open or holds
// retries: it follows what the host answers then (503s in an outage),
// and costs the success path nothing.
func (cb *circuit) noteAnswer(rtt time.Duration) {
	if cb.usual == 0 {
		cb.usual = max(rtt, 0)
		return
	}
	cb.usual += (rtt - cb.usual) / usualWeight
}

// tooLate reports whether the held retry w, due as the probe at now, has
// no more time left before its context's deadline than the host usually
// takes to answer: the probe's answer would come past the deadline, and
// its caller get the deadline's error instead of the response it holds.
// The usual answer is the circuit's, or, before the circuit has seen
// one, how long w's own request's last answer took; with neither, or no
// deadline, the probe goes. mu is held.
func (cb *circuit) tooLate(w *holder, now time.Time) bool {
	usual := cb.usual
	if usual == 0 {
		usual = w.answer
	}
	return usual > 0 && !w.deadline.IsZero() && w.deadline.Sub(now) <= usual
}
