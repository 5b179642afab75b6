package admission

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The budget's rule, driven alone: a retry fits the share (ratio × first
// attempts over 10 s) or, on a host that is not failing, the floor
// (minPerSecond over 3 s, or over the span that holds one retry); the
// floor does not add to the share.
func TestBudgetRatioAndFloor(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		ratio, perSecond float64
		firsts           int
		floor            bool // the host is not failing
		want             int  // retries allowed
	}{
		{0.1, 0, 100, true, 10},
		{0.1, 0, 0, true, 0},
		{0, 1, 50, true, 3},     // floor: 1/s over 3 s
		{0, 1, 50, false, 0},    // no floor for a failing host
		{0.1, 1, 100, true, 10}, // the larger of the two, not their sum
		{0.1, 10, 100, true, 30},
		{0.1, 10, 100, false, 10},
		{0, 0.1, 0, true, 1}, // 0.1/s: one retry over 10 s
		{0.5, 0, 7, true, 3},
	}
	for _, tt := range tests {
		b := share(tt.ratio, tt.perSecond)
		for range tt.firsts {
			b.recordFirst("a", nil, now.Unix())
		}
		got := 0
		for range 1000 {
			if !b.allow(b.head("a"), now.Unix(), tt.floor, 1) {
				break
			}
			got++
		}
		if got != tt.want {
			t.Errorf("share(%v, %v) after %d first attempts (floor %v) allows %d retries, want %d",
				tt.ratio, tt.perSecond, tt.firsts, tt.floor, got, tt.want)
		}
		if b.Allows("b", now.Unix()) != (tt.perSecond > 0) {
			t.Errorf("share(%v, %v): another host shares the first host's account", tt.ratio, tt.perSecond)
		}
	}
}

// The floor counts over 3 s: spent now, it is back 3 s later, not 10.
func TestBudgetFloorSpan(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	b := share(0, 10)
	h := b.head("h")
	n := 0
	for range 100 {
		if b.allow(h, t0.Unix(), true, 1) {
			n++
		}
	}
	if n != 30 {
		t.Fatalf("floor of 10/s allowed %d retries in one instant, want 30", n)
	}
	if b.allow(h, t0.Unix()+2, true, 1) {
		t.Error("floor spent at t0 allowed a retry 2s later")
	}
	if !b.allow(h, t0.Unix()+3, true, 1) {
		t.Error("floor spent at t0 still spent 3s later")
	}
}

func TestBudgetWindowSlides(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	b := share(0.1, 0)
	for range 100 {
		b.recordFirst("h", nil, t0.Unix())
	}
	for range 10 {
		if !b.Allows("h", t0.Unix()) {
			t.Fatal("retry refused within the budget")
		}
	}
	if b.Allows("h", t0.Add(5*time.Second).Unix()) {
		t.Error("budget spent at t0 allowed a retry 5s later")
	}
	// 10 s on, the first attempts and the retries of t0 are out of the window.
	if b.Allows("h", t0.Add(10*time.Second).Unix()) {
		t.Error("first attempts older than the window still count")
	}
	for range 10 {
		b.recordFirst("h", nil, t0.Add(10*time.Second).Unix())
	}
	if !b.Allows("h", t0.Add(10*time.Second).Unix()) {
		t.Error("retries older than the window still count")
	}
}

func TestBudgetConcurrentAdmissionsDoNotOvershoot(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	b := share(0.1, 0)
	for range 1000 {
		b.recordFirst("h", nil, now.Unix())
	}
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if b.Allows("h", now.Unix()) {
					allowed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if allowed.Load() != 100 {
		t.Errorf("50 goroutines were allowed %d retries, want exactly 100 (10%% of 1000)", allowed.Load())
	}
}

// head is the counts of host in b as a Gate's host state sees them.
func (b *Share) head(host string) *hostBudget {
	h := new(hostBudget)
	h.more.Store(b.hosts.get(host))
	return h
}

// attached is the budget's controller of a new host state for host,
// attached to b in second sec.
func attached(b *Share, host string, sec int64) *budgetCtl {
	c := &budgetCtl{b: b, h: new(hostBudget)}
	if !b.own {
		c.h.attach(b, host, sec)
	}
	return c
}

// recordFirst counts a first attempt to host in second sec.
func (b *Share) recordFirst(host string, _ []byte, sec int64) {
	h := b.hosts.get(host)
	bucketAdd(&h.firsts[uint64(sec)%budgetBuckets], sec)
}

// A recovery's loan: each retry lent beyond the share is owed, 1/ratio
// first attempts, and the budget is solvent (may lend again) only once
// they are sent; with no ratio, nothing is ever lent.
func TestBudgetLoan(t *testing.T) {
	b := share(0.1, 10)
	c := attached(b, "h", unixSecond())
	sec := unixSecond()
	if !c.solvent() {
		t.Fatal("a new budget owes something")
	}
	for range 3 {
		c.lend(sec)
	}
	if c.solvent() {
		t.Fatal("solvent after lending 3")
	}
	if got := sum(&c.h.retried().buckets, sec, budgetBuckets); got != 3 {
		t.Errorf("%v retries counted, want the 3 lent", got)
	}
	for range 29 {
		c.countFirst(sec)
	}
	if c.solvent() {
		t.Error("solvent after 29 of the 30 first attempts owed")
	}
	c.countFirst(sec)
	if !c.solvent() {
		t.Error("not solvent once the 30 first attempts owed were sent")
	}
	none := attached(share(0, 10), "h", unixSecond())
	if none.solvent() {
		t.Error("a budget with no ratio may lend")
	}
}

// A lent retry that the host answered is given back whole: no longer
// counted among the retries, and owing nothing; one that failed stays
// counted and owed, to be repaid by first attempts; one never sent owes
// nothing.
func TestBudgetLoanAnswered(t *testing.T) {
	b := share(0.1, 10)
	c := attached(b, "h", unixSecond())
	sec := unixSecond()
	for range 3 {
		c.lend(sec)
	}
	c.observe(observation{answered: true, lent: sec})
	c.observe(observation{answered: true, retry: true}) // not lent: repays nothing
	if got := sum(&c.h.retried().buckets, sec, budgetBuckets); got != 2 {
		t.Errorf("%v retries counted after one lent retry was answered, want 2", got)
	}
	if got := c.h.retried().owed.Load(); got != 20 {
		t.Errorf("%d first attempts owed after one of 3 lent retries was answered, want 20", got)
	}
	c.observe(observation{failed: true, lent: sec})
	if got := c.h.retried().owed.Load(); got != 20 {
		t.Errorf("%d first attempts owed after a lent retry failed, want 20 still", got)
	}
	c.giveBack(permit{charged: true, chargedSec: sec, lent: true}, time.Time{}) // the third, never sent
	if got := c.h.retried().owed.Load(); got != 10 {
		t.Errorf("%d first attempts owed after a lent retry was not sent, want 10", got)
	}
	for range 10 {
		c.countFirst(sec)
	}
	c.observe(observation{answered: true, lent: sec}) // an answer after the debt is paid: nothing below 0
	if !c.solvent() || c.h.retried().owed.Load() != 0 {
		t.Errorf("owed %d once every lent retry was answered, sent back or repaid, want 0", c.h.retried().owed.Load())
	}
}

// The budget holds no retry: on a failing host, one that only the floor
// would let go is refused, reason budget (the floor is withdrawn, not
// lent later); on a healthy host, the floor charges it.
func TestBudgetHoldsNone(t *testing.T) {
	c := attached(share(0.1, 10), "h", unixSecond())
	sec := unixSecond()
	if v := c.admit(query{kind: kindRetry, sec: sec}); v.act != actRefuse || v.reason != reasonBudget {
		t.Errorf("a retry that only the floor fits, on a failing host: %v (%s), want refused, budget", v.act, v.reason)
	}
	if v := c.admit(query{kind: kindRetry, sec: sec, healthy: true}); v.act != actSend || !v.charged {
		t.Errorf("the same on a healthy host: %v, want sent and charged", v.act)
	}
}
