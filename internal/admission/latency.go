// This file holds a host's recent latencies, which hedging reads.

package admission

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// Latencies are a host's recent latencies of successful first attempts: a
// histogram of 4 buckets per doubling from 1µs, halved every 1,024
// samples so that it follows the host.
// minSamples is how many latencies a host needs before its percentile
// means anything.
const minSamples = 20

type Latencies struct {
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

func (l *Latencies) Record(d time.Duration) {
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

// Percentile returns the p-th percentile, or 0 with too few samples.
func (l *Latencies) Percentile(p float64) time.Duration {
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
