package admission

import (
	"math/rand/v2"
	"sync"
	"testing"
	"unsafe"
)

// A host's state is small: 56 bytes, 64 with its map entry (the size
// class of 64 bytes), its budget's counts two words of it.
func TestHostStateIsSmall(t *testing.T) {
	if n := unsafe.Sizeof(hostEntry[hostState]{}); n > 64 {
		t.Errorf("a host's map entry is %d bytes, want at most 64", n)
	}
	if n := unsafe.Sizeof(hostBudget{}); n != 16 {
		t.Errorf("a host's budget counts are %d bytes in its state, want 16", n)
	}
}

// pair is one host's budget driven twice: in an owned Share, its counts
// in the host's state, and in a shared one, its counts in the Share's
// entry.
type pair struct {
	own, shared *budgetCtl
}

func newPair(ratio, floor float64) pair {
	own := share(ratio, floor)
	own.Own()
	return pair{attached(own, "h", 0), attached(share(ratio, floor), "h", 0)}
}

// both asks both the same, and fails t if they answer apart.
func (p pair) both(t *testing.T, step string, f func(c *budgetCtl) any) {
	t.Helper()
	if a, b := f(p.own), f(p.shared); a != b {
		t.Fatalf("%s: owned %v, shared %v", step, a, b)
	}
}

// An owned Share counts and decides as a shared one does: the same first
// attempts in the window, whatever seconds they come in (a host seen
// once, every few seconds, each second, after a pause; a writer whose
// second is one behind), the same retries charged, refused, given back
// and lent, and the same first attempts in the window as were sent.
func TestOwnCountsAsShared(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 1))
		p := newPair([]float64{0.1, 0.5, 0}[seed%3], []float64{0, 1, 10}[seed%3])
		sent := map[int64]int{}     // first attempts by second
		sec := int64(1_800_000_000) // a multiple of the window: the first words' and the buckets' seconds wrap alike
		for i := range 300 {
			switch k := r.IntN(10); {
			case k < 3:
				sec += int64(r.IntN(3))
			case k < 4:
				sec += int64(r.IntN(25))
			}
			at := sec
			if r.IntN(8) == 0 {
				at-- // read its clock a second before the others
			}
			for range r.IntN(4) {
				sent[at]++
				p.own.countFirst(at)
				p.shared.countFirst(at)
			}
			want := 0
			for s := sec - budgetBuckets + 1; s <= sec; s++ {
				want += sent[s]
			}
			p.both(t, "firsts", func(c *budgetCtl) any { return c.h.firstsIn(sec, budgetBuckets) })
			if got := p.own.h.firstsIn(sec, budgetBuckets); got != float64(want) {
				t.Fatalf("seed %d step %d: %v first attempts in the window, want %d", seed, i, got, want)
			}
			p.retry(t, r, sec)
		}
	}
}

// retry drives one of the retries' moves on both sides of p at sec.
func (p pair) retry(t *testing.T, r *rand.Rand, sec int64) {
	t.Helper()
	q := query{kind: kindRetry, sec: sec, healthy: r.IntN(2) == 0, level: int8(r.IntN(3) - 1)}
	switch r.IntN(6) {
	case 0:
		p.both(t, "admit", func(c *budgetCtl) any { return c.admit(q).act })
	case 1:
		p.both(t, "give back", func(c *budgetCtl) any {
			c.giveBack(permit{charged: true, chargedSec: sec}, q.at)
			return sum(&c.h.retried().buckets, sec, budgetBuckets)
		})
	case 2:
		if p.own.b.ratio > 0 && r.IntN(4) == 0 {
			p.both(t, "lend", func(c *budgetCtl) any { c.lend(sec); return c.solvent() })
		}
	case 3:
		p.both(t, "observe", func(c *budgetCtl) any {
			c.observe(observation{answered: true, lent: sec})
			return c.h.retried().owed.Load()
		})
	}
	p.both(t, "room", func(c *budgetCtl) any { return c.room(sec) })
}

// First attempts counted at once across seconds, as a host's first word
// gives way to its buckets, are all counted: none is lost.
func TestOwnCountsLoseNone(t *testing.T) {
	for round := range 50 {
		b := share(0.1, 0)
		b.Own()
		c := attached(b, "h", 0)
		sec := int64(1_800_000_000 + round)
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 500 {
					c.countFirst(sec + int64((g+i)%3))
				}
			})
		}
		wg.Wait()
		if got := c.h.firstsIn(sec+2, budgetBuckets); got != 8*500 {
			t.Fatalf("round %d: %v first attempts counted, want %d", round, got, 8*500)
		}
	}
}

// A host seen once keeps no counts beyond its first word; one seen again
// within the window in another second gets its buckets; one seen again
// after the window, none still.
func TestOwnCountsMadeAtNeed(t *testing.T) {
	b := share(0.1, 10)
	b.Own()
	c := attached(b, "h", 0)
	sec := int64(1_800_000_000)
	c.countFirst(sec)
	c.countFirst(sec)
	c.countFirst(sec + budgetBuckets)
	if c.h.more.Load() != nil {
		t.Fatal("a host seen in one second at a time made its buckets")
	}
	c.countFirst(sec + budgetBuckets + 1)
	if c.h.more.Load() == nil || c.h.firstsIn(sec+budgetBuckets+1, budgetBuckets) != 2 {
		t.Fatalf("a host seen in two seconds of the window: buckets %v, %v first attempts counted, want 2",
			c.h.more.Load() != nil, c.h.firstsIn(sec+budgetBuckets+1, budgetBuckets))
	}
	if b.Hosts() != 0 {
		t.Errorf("an owned Share's map holds %d hosts, want none", b.Hosts())
	}
}

// An owned Share is one Gate's: a second Gate given it panics.
func TestOwnedShareHasOneGate(t *testing.T) {
	b := share(0.1, 10)
	b.Own()
	New(Settings{Budget: b})
	defer func() {
		if recover() == nil {
			t.Error("a second Gate took an owned Share")
		}
	}()
	New(Settings{Budget: b})
}
