// This file holds what the retry budget (budget.go) counts of one host:
// its first attempts and its retries in one-second buckets, and what a
// recovery lent it. A host that has only ever had first attempts within
// one second keeps one word of counts, in its host state.

package admission

import (
	"math"
	"sync/atomic"
)

// hostBudget is one host's budget counts, as its host state keeps them:
// two words. With a Share that is its Gate's alone, first is the bucket
// of the host's first attempts in one second, and more, made when first
// cannot take a first attempt or at the first retry, the rest of its
// counts; with a shared Share, first is unused (0) and more is the
// Share's entry for the host, set as the host is made.
type hostBudget struct {
	first atomic.Uint64 // second<<32 | count, as a bucket packs them
	more  atomic.Pointer[budgetCounts]
}

// budgetCounts are the buckets of a host's first attempts that its
// hostBudget's first word does not hold (with a shared Share, all of
// them), and its retries' counts, made at its first retry: one that never
// retries keeps none.
type budgetCounts struct {
	firsts  buckets
	retries atomic.Pointer[retryCounts]
	refs    atomic.Int32 // with a shared Share: the host states that point here; it is not evicted while any does
}

// buckets are a count's one-second buckets. Each packs the second it
// belongs to (high 32 bits) with its count (low 32 bits), so that moving
// a bucket on to a new second and counting in it is a single
// compare-and-swap.
type buckets [budgetBuckets]atomic.Uint64

// retryCounts are a host's retries' buckets, the last Unix second in
// which the share had no room for a retry that was not sheddable, and
// what a recovery lent: the first attempts still to be sent before the
// next recovery may lend again, 1/ratio for each retry it released beyond
// the share that the host has not answered (see lend and repay). A host
// owes only once it has retried: its retries' counts are made then.
type retryCounts struct {
	buckets
	contested atomic.Int64
	owed      atomic.Int64
}

// noRetries are the retries' buckets of a host that has made none: all
// zero, and only read.
var noRetries retryCounts

// counts is h's counts beyond its first word, made if it has none.
func (h *hostBudget) counts() *budgetCounts {
	if m := h.more.Load(); m != nil {
		return m
	}
	h.more.CompareAndSwap(nil, new(budgetCounts))
	return h.more.Load()
}

// retried is h's retries' counts, noRetries if it has made none: to read.
func (h *hostBudget) retried() *retryCounts {
	if m := h.more.Load(); m != nil {
		if r := m.retries.Load(); r != nil {
			return r
		}
	}
	return &noRetries
}

// counting is h's retries' counts, made if it has none: to count in.
func (h *hostBudget) counting() *retryCounts {
	m := h.counts()
	if r := m.retries.Load(); r != nil {
		return r
	}
	m.retries.CompareAndSwap(nil, new(retryCounts))
	return m.retries.Load()
}

// contestedAt reports whether a retry that was not sheddable found the
// share spent in second sec or the one before.
func (h *hostBudget) contestedAt(sec int64) bool {
	r := h.retried()
	return r != &noRetries && r.contested.Load() >= sec-1
}

// countFirst counts a first attempt in second sec, and repays one of
// what a recovery lent. With a Share of its Gate's alone (own), the
// first word takes it if it counts second sec, or a second that no
// window holds any more (at least budgetBuckets before sec) or nothing;
// otherwise it goes in the bucket of sec, as it always does with a shared
// Share. Either way it is counted once, and stays counted while the
// window holds its second.
func (h *hostBudget) countFirst(sec int64, own bool) {
	if !own || !h.countInFirst(sec) {
		bucketAdd(&h.counts().firsts[uint64(sec)%budgetBuckets], sec)
	}
	if m := h.more.Load(); m != nil {
		if r := m.retries.Load(); r != nil && r.owed.Load() > 0 {
			r.owed.Add(-1)
		}
	}
}

// countInFirst counts a first attempt in second sec in h's first word,
// and reports whether it did: the word counts sec, or a second at least
// budgetBuckets before it (not one after it), or nothing.
func (h *hostBudget) countInFirst(sec int64) bool {
	epoch := uint64(uint32(sec))
	for {
		old := h.first.Load()
		next := epoch<<32 | 1
		switch {
		case old>>32 == epoch && uint32(old) != 0:
			if uint32(old) == math.MaxUint32 {
				return true
			}
			next = old + 1
		case uint32(old) != 0 && int32(uint32(sec)-uint32(old>>32)) < budgetBuckets:
			return false // a second the window may still hold, or a later one
		}
		if h.first.CompareAndSwap(old, next) {
			return true
		}
	}
}

// firstsIn adds h's first attempts of the span seconds ending at sec.
func (h *hostBudget) firstsIn(sec int64, span int) float64 {
	var n float64
	if v := h.first.Load(); uint32(sec)-uint32(v>>32) < uint32(span) {
		n = float64(uint32(v))
	}
	if m := h.more.Load(); m != nil {
		n += sum(&m.firsts, sec, span)
	}
	return n
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

// sum adds the counts of the buckets that lie in the span seconds ending
// at sec.
func sum(bs *buckets, sec int64, span int) float64 {
	var n uint64
	for i := range bs {
		v := bs[i].Load()
		if age := uint32(sec) - uint32(v>>32); age < uint32(span) {
			n += uint64(uint32(v))
		}
	}
	return float64(n)
}
