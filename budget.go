// This file holds the retry Budget: a per-host cap on retries as a share of
// first attempts over a sliding window, so that a fleet of clients cannot
// multiply an overload. The Transport consults it in transport.go.

package retryhttp

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

const (
	budgetBuckets = 10 // one a second: a sliding window of about 10 s
	budgetWindow  = budgetBuckets * time.Second
)

// A Budget caps the retries sent to each destination host (req.URL.Host):
// over a sliding window of about 10 seconds, retries may add at most ratio
// × the first attempts sent to that host, plus minPerSecond × 10 s as a
// floor, so that a client with little traffic can still retry. When a
// host's budget is spent, requests to it give up at once and return their
// last response.
//
// The floor is lent only to a host that is not failing: once its health
// score has reached 4 (4 attempts to it in a row have failed, each answer
// taking two off) over at least 10ms, only the ratio is left until the
// host answers again. So in a long outage a fleet of clients adds at most
// ratio × its traffic in retries, however many instances it has: the
// floors, which would add up across instances to more than the traffic
// itself, are learnt back from successes. A retry that the budget refuses
// while the host is failing is held by the retry breaker, if it is on,
// and released by the host's next success.
//
// A Budget is safe for concurrent use, and one Budget may be shared by
// several Transports so that they spend one allowance. Recording a first
// attempt costs one atomic operation and no lock. The zero Budget allows no
// retries at all; use NewBudget.
type Budget struct {
	ratio float64
	floor float64
	hosts hostMap[hostBudget]
}

// NewBudget returns a Budget that lets retries add at most ratio × first
// attempts per host over about 10 s, plus minPerSecond retries a second.
// NewBudget(0.1, 10) is the default of every Transport.
//
// It panics if ratio or minPerSecond is negative, NaN or infinite.
func NewBudget(ratio, minPerSecond float64) *Budget {
	if ratio < 0 || math.IsNaN(ratio) || math.IsInf(ratio, 0) {
		panic(fmt.Sprintf("retryhttp: NewBudget: ratio %v must be a finite number >= 0", ratio))
	}
	if minPerSecond < 0 || math.IsNaN(minPerSecond) || math.IsInf(minPerSecond, 0) {
		panic(fmt.Sprintf("retryhttp: NewBudget: minPerSecond %v must be a finite number >= 0", minPerSecond))
	}
	return &Budget{ratio: ratio, floor: minPerSecond * budgetWindow.Seconds()}
}

// hostBudget counts one host's first attempts and retries in one-second
// buckets. Each bucket packs the second it belongs to (high 32 bits) with
// its count (low 32 bits), so that moving a bucket on to a new second and
// counting in it is a single compare-and-swap.
type hostBudget struct {
	firsts  [budgetBuckets]atomic.Uint64
	retries [budgetBuckets]atomic.Uint64
}

func bucketAdd(b *atomic.Uint64, sec int64) {
	epoch := uint64(uint32(sec))
	for {
		old := b.Load()
		next := epoch<<32 | 1
		if old>>32 == epoch {
			if uint32(old) == math.MaxUint32 {
				return
			}
			next = old + 1
		}
		if b.CompareAndSwap(old, next) {
			return
		}
	}
}

// sum adds the counts of the buckets that lie in the window ending at sec.
func sum(bs *[budgetBuckets]atomic.Uint64, sec int64) float64 {
	var n uint64
	for i := range bs {
		v := bs[i].Load()
		if age := uint32(sec) - uint32(v>>32); age < budgetBuckets {
			n += uint64(uint32(v))
		}
	}
	return float64(n)
}

// allow reports whether host's budget has room for one more retry, with
// the floor or without it, and, if it has, spends it. The admission is one compare-and-swap on the
// current second's bucket, made only if the count it saw still leaves room,
// so that goroutines deciding at the same instant cannot overshoot the
// limit together.
func (b *Budget) allow(h *hostBudget, sec int64, floor bool) bool {
	limit := b.ratio * sum(&h.firsts, sec)
	if floor {
		limit += b.floor
	}
	cur := &h.retries[uint64(sec)%budgetBuckets]
	epoch := uint64(uint32(sec))
	for {
		old := cur.Load()
		others := sum(&h.retries, sec)
		next := epoch<<32 | 1
		if old>>32 == epoch {
			others -= float64(uint32(old))
			next = old + 1
		}
		if others+float64(uint32(next)) > limit {
			return false
		}
		if cur.CompareAndSwap(old, next) {
			return true
		}
	}
}

// refund gives back a retry spent in second sec that was never sent, if
// its bucket still counts that second.
func (b *Budget) refund(h *hostBudget, sec int64) {
	cur := &h.retries[uint64(sec)%budgetBuckets]
	epoch := uint64(uint32(sec))
	for {
		old := cur.Load()
		if old>>32 != epoch || uint32(old) == 0 || cur.CompareAndSwap(old, old-1) {
			return
		}
	}
}
