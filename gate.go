// This file holds admission: per host, a short fixed list of controllers,
// each with its own state and rules, asked in one order whether an
// attempt goes now, is held or is refused, and told the fresh outcome of
// every attempt. The controllers are the retry budget (budget.go) and the
// retry breaker (breaker.go); the host's health (health.go) is the one
// score they read. The rules, in full, are in the package documentation,
// "Admission".

package retryhttp

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// A controller is one rule of a host's admission. It sees only its own
// state and what it is asked or told: never a request, another controller
// or the gate. Questions and answers are values, so that asking costs no
// allocation.
type controller interface {
	// admit decides an attempt: send (noting what it took, such as a
	// budget charge or a probe), hold (the breaker's queue keeps it
	// until it may go) or refuse, with a reason.
	admit(a ask) verdictOf
	// undo gives back what admit took for an attempt that is not sent,
	// at.
	undo(t taken, at time.Time)
	// observe takes the fresh outcome of an attempt to the host, and
	// reports a transition it made.
	observe(o seen) change
}

// kind is what asks for admission.
type kind uint8

const (
	kindFirst kind = iota // a request's first attempt
	kindRetry             // a retry whose wait is about to start
	kindLeave             // a retry leaving a hold: released, or at its limit
	kindProbe             // a held retry going as the breaker's probe
	kindHedge             // a hedged copy of a first attempt
	kindSend              // a retry about to be sent, its wait over (pacers only)
)

// ask is one question to the controllers.
type ask struct {
	kind     kind
	sec      int64         // the Unix second asked in
	healthy  bool          // the host is not failing
	free     bool          // never reached the server: costs it nothing
	now      int64         // pacers: mono when asked
	deadline int64         // pacers: mono by which the attempt must have gone, 0 if none
	waited   time.Duration // pacers: how long the attempt has waited for them already
	at       time.Time     // the breaker: when asked
}

type act uint8

const (
	actSend act = iota
	actHold
	actRefuse
	actWait  // pacers: wait for verdictOf.wait, then go
	actQueue // the concurrency limit, the static rate: wait in its line (verdictOf.q)
)

// A queuer is a pacer's line: queue waits in it until the attempt may go
// (what it took then), ctx ends, or the deadline (mono, 0: none) passes.
type queuer interface {
	queue(ctx context.Context, deadline int64) (taken, bool, error)
}

// taken is what the controllers took for an attempt that goes.
type taken struct {
	charged    bool // the budget charged it, in chargedSec
	chargedSec int64
	probe      uint64 // the breaker made it the probe with this ticket
	quota      bool   // quota pacing counted it
	slot       bool   // it holds a slot of the concurrency limit
	turn       bool   // the static rate's turn it took, given back if it is not sent
}

// verdictOf is a controller's answer.
type verdictOf struct {
	act    act
	reason GiveUpReason  // with actRefuse; with actWait and actQueue, if it cannot wait
	q      queuer        // with actQueue: the line to wait in
	wait   time.Duration // with actWait
	again  bool          // with actWait: ask again once the wait is over
	taken
}

var (
	send = verdictOf{act: actSend}
	hold = verdictOf{act: actHold}
)

func refuse(r GiveUpReason) verdictOf { return verdictOf{act: actRefuse, reason: r} }

// seen is the outcome of an attempt, as the controllers are told it.
type seen struct {
	answered bool   // the host did its job
	failed   bool   // a fresh failure worth retrying
	retry    bool   // the attempt was a retry or a probe
	trip     bool   // the host's score has reached the breaker's threshold over 10ms
	lend     bool   // answered by a host that served no one, whose budget owes nothing
	probe    uint64 // the attempt was this probe

	// For the pacers, of every attempt they let go:
	sent     bool        // it reached the host, or may have, and was not canceled
	canceled bool        // its context ended: how long it took is a lower bound
	rejected bool        // the host turned it away: 429, 502, 503, 504, a timeout or a connection error
	slot     bool        // it held a slot of the concurrency limit
	quota    bool        // quota pacing counted it
	now      int64       // mono when it ended
	start    int64       // mono when it was sent
	rtt      int64       // how long it took, in nanoseconds
	status   int         // its response's status, 0 if none
	header   http.Header // its response's header, nil if none
	wall     time.Time   // when it ended, by the wall clock, with a header
	at       time.Time   // the breaker: when it ended, if it is told
}

// change is a controller's transition: the breaker's, which it also
// queues for the gate to report, in order (circuit.takeEvents).
type change struct{ opened, closed bool }

// gate is a Transport's admission: its budget, breaker and hedging, its
// pacers (pacing.go), and the state of every host it has sent to.
type gate struct {
	budget   *Budget        // nil: no budget
	breaker  *BreakerConfig // resolved; nil: no breaker
	hedge    *HedgeConfig   // nil: no hedging
	throttle float64        // WithThrottle's ratio; 0: none
	rate     *rateConfig    // nil: no static rate limit
	quota    *quotaConfig   // nil: no quota pacing
	limit    *limitConfig   // nil: no concurrency limit
	paced    bool           // any pacer is on
	gauges   *gauges        // the pacers' state, for the metrics; nil: none
	hosts    hostMap[hostState]
	tickets  atomic.Uint64 // names probes; its count is the probes claimed
	// notify reports a breaker transition (metrics, a log record, the
	// user's callback), and onRelease a held retry released (the
	// simulator's): the config's, so that no gate method needs a request.
	notify    func(ctx context.Context, host string, open bool, score int)
	onRelease func(host string, lent bool)
}

// hostState is one host's admission: its health and its controllers.
type hostState struct {
	health health
	bud    budgetCtl // with a budget
	cb     circuit   // with a breaker
	ctls   []controller
	buf    [2]controller // ctls' array: the list costs no allocation
	lat    *latencies    // recent latencies, with hedging only
	host   string        // the canonical host, for breaker events
	pacers []controller  // the pacers that are on, in their order
	pbuf   [4]controller // pacers' array
	thr    throttle
	rate   staticRate
	quo    quota
	lim    limiter
	// evMu orders the reports of this host's breaker transitions: taken
	// before the breaker's lock is let go, held while they are reported.
	evMu sync.Mutex
}

// ticket is one request's admission state: what the gate's methods are
// given, in place of the request.
type ticket struct {
	hs         *hostState      // the host's admission state; nil with no budget, breaker, hedging or pacer
	ctx        context.Context // the request's
	meEnd      time.Time       // when WithMaxElapsed ends it, zero if never
	start      int64           // mono: when the attempt in flight started
	sec        int64           // the Unix second the request began in
	firstFail  time.Time       // when its first attempt failed
	span       time.Duration   // how long after firstFail a retry of it may be held (its share of the schedule)
	wasHeld    bool            // a retry of it was held
	retry      bool            // the attempt in flight is a retry or a probe
	charged    bool            // the next attempt is charged to the budget, in chargedSec
	chargedSec int64
	probe      uint64 // the attempt in flight is this probe, if not 0
	quota      bool   // the attempt in flight was counted by quota pacing
	slot       bool   // the attempt in flight holds a slot of the concurrency limit
	lastDelay  time.Duration
}

func newGate(c *config, breaker *BreakerConfig) *gate {
	g := &gate{budget: c.budget, breaker: breaker, hedge: c.hedge,
		throttle: c.throttle, rate: c.rate, quota: c.quota, limit: c.limit, paced: c.paced(),
		notify: c.breakerChanged, onRelease: c.onRelease}
	if g.paced {
		g.gauges = c.metrics.gauges()
	}
	g.hosts.init = func(key string, h *hostState) {
		h.host = key
		h.ctls = h.buf[:0]
		if g.budget != nil {
			h.bud.attach(g.budget, key)
			h.ctls = append(h.ctls, &h.bud)
		}
		if g.breaker != nil {
			h.cb.init(g.breaker, &g.tickets)
			h.ctls = append(h.ctls, &h.cb)
		}
		if g.hedge != nil {
			h.lat = new(latencies)
		}
		g.initPacers(h)
	}
	g.hosts.evictable = func(h *hostState) bool {
		if !h.cb.idle() || h.health.score.Load() != 0 || !h.pacersQuiet() {
			return false
		}
		h.bud.detach() // evicted: the shared Budget's entry may go once no one points to it
		return true
	}
	return g
}

// enter finds the request's host and notes when its first attempt starts.
func (g *gate) enter(t *ticket, scheme, host string) {
	var buf [maxHostKey]byte
	key, kb := canonicalHost(scheme, host, &buf)
	t.start = mono()
	t.sec = secondOf(t.start)
	t.hs = g.hosts.getKey(key, kb, t.sec)
}

// admitFirst asks the controllers for a first attempt: the budget counts
// it, and only FailFast refuses one, while the host's breaker is open;
// then the pacers (pacing.go), if any is on. It returns why the attempt
// may not go, or the context's error if it ended while the attempt waited
// for a pacer.
func (g *gate) admitFirst(t *ticket) (GiveUpReason, error) {
	hs := t.hs
	if !hs.cb.opened() {
		// The success path: while the breaker is closed, only the budget
		// has anything to do with a first attempt (count it), and it
		// refuses none; asked directly, it costs no dispatch.
		hs.bud.countFirst(t.sec)
	} else {
		v := g.ask(hs, ask{kind: kindFirst, sec: t.sec, healthy: true, at: time.Now()})
		if v.act != actSend {
			return v.reason, nil
		}
		t.probe = v.probe
	}
	if g.paced {
		if reason, err := g.pace(t, 1); reason != "" || err != nil {
			g.abandon(t) // the probe it may have been
			return reason, err
		}
	}
	return "", nil
}

// ask asks each controller in order: the first refusal decides; a hold
// decides if no one refuses. An attempt that does not go takes nothing.
func (g *gate) ask(hs *hostState, a ask) verdictOf {
	v := send
	for _, c := range hs.ctls {
		w := c.admit(a)
		v.charged, v.chargedSec = v.charged || w.charged, max(v.chargedSec, w.chargedSec)
		v.probe = max(v.probe, w.probe)
		switch w.act {
		case actRefuse:
			g.undo(hs, v.taken)
			return w
		case actHold:
			v.act = actHold
		}
	}
	if v.act == actHold {
		g.undo(hs, v.taken)
		return hold
	}
	return v
}

// undo gives back what the controllers took for an attempt not sent.
func (g *gate) undo(hs *hostState, t taken) {
	if t != (taken{}) {
		now := time.Now()
		for _, c := range hs.ctls {
			c.undo(t, now)
		}
	}
}

// sending notes attempt n, about to go: when it started, and whether it
// is a retry (or a probe), whose failure shows that retries fail too.
func (g *gate) sending(t *ticket, n int) {
	if n > 1 {
		t.start = mono()
	}
	t.retry = n > 1 || t.probe != 0
}

// record takes an attempt's result into the host's health and tells the
// controllers, once. A failure of an attempt that started before an
// answer from the host is stale: it changes nothing.
func (g *gate) record(t *ticket, r *result) {
	hs := t.hs
	if hs == nil {
		return
	}
	if g.paced {
		g.paceRecord(t, r)
	}
	o := g.seenOf(t, r)
	if o.answered && o.probe == 0 && hs.cb.quiet() {
		return // the success path: an answer from a host with nothing held tells the controllers nothing
	}
	o.at = time.Now()
	var ch change
	for _, c := range hs.ctls {
		if x := c.observe(o); x.opened || x.closed {
			ch = x
		}
	}
	if ch.closed {
		hs.health.reset()
	}
	if ch.opened || ch.closed {
		g.report(t)
	}
}

// seenOf takes an attempt's result into the host's health, and says what
// the controllers are told of it: an answer (lend: from a host that
// served no one, with a budget that owes nothing), a fresh failure (trip:
// one that opens the breaker), or nothing (a stale failure, a cancel).
func (g *gate) seenOf(t *ticket, r *result) seen {
	hs := t.hs
	o := seen{retry: t.retry, probe: t.probe}
	t.probe = 0
	switch {
	case r.err == nil && !r.retryable:
		m := mono()
		o.lend = hs.health.outage(m) && (g.budget == nil || hs.bud.solvent())
		hs.health.answer(t.start, m)
		o.answered = true
	case r.retryable && (!r.notSent || isDialError(r.err)) && !hs.health.stale(t.start):
		// A refused connection reached no application, but says that
		// the host serves no one: it counts, though it costs nothing.
		m := mono()
		s := hs.health.fail(m, g.scoreCap())
		o.failed = true
		o.trip = g.breaker != nil && s >= int32(g.breaker.Threshold) && hs.health.lasted(m)
	}
	return o
}

// report reports the breaker's transitions that no one has reported yet,
// in the order they happened: whoever reports holds the host's evMu, so
// that calls for one host come in order, never at once, and no
// controller's lock is held while they run.
func (g *gate) report(t *ticket) {
	hs := t.hs
	hs.evMu.Lock()
	defer hs.evMu.Unlock()
	var buf [4]bool
	for range maxReports {
		evs := hs.cb.takeEvents(buf[:0])
		if len(evs) == 0 {
			return
		}
		for _, open := range evs {
			var score int // the host's health score when it opened (the threshold); 0 when it closed
			if open {
				score = int(hs.health.score.Load())
			}
			g.notify(t.ctx, hs.host, open, score)
		}
	}
}

// maxReports bounds the rounds of one report: each reports what was
// queued since the last, which other attempts' transitions can refill
// only while the callbacks run.
const maxReports = 1 << 10

// scoreCap is where the score stops: no higher than what opens the
// breaker, so that a long outage is forgotten as fast as a short one.
func (g *gate) scoreCap() int32 {
	if g.breaker != nil {
		return int32(max(g.breaker.Threshold, failingAfter))
	}
	return failingAfter
}

// abandon ends the probe in flight without a result, and gives back what
// the pacers took for the attempt: the base panicked, or the attempt is
// not sent after all.
func (g *gate) abandon(t *ticket) {
	if t.hs != nil && t.probe != 0 {
		t.hs.cb.undo(taken{probe: t.probe}, time.Now())
		t.probe = 0
	}
	if t.hs != nil && (t.quota || t.slot) {
		g.unpace(t.hs, taken{quota: t.quota, slot: t.slot})
		t.quota, t.slot = false, false
	}
}

// admission is what becomes of a retry that the ladder allows.
type admission uint8

const (
	admitWait admission = iota // wait for the delay, then send
	admitHold                  // hold until it may go, or its limit
)

// admitRetry asks the controllers for a retry that the ladder (decide.go)
// allows: it waits and goes (charged to the budget, unless it never
// reached the server), is held, or gives up now, without a wait.
func (g *gate) admitRetry(t *ticket, r *result) (admission, GiveUpReason) {
	hs := t.hs
	t.charged = false
	if hs == nil {
		return admitWait, ""
	}
	m := mono()
	if hs.health.outage(m) && g.mayHold(hs, m) {
		return admitHold, "" // the host serves no one: wait for it, uncharged
	}
	a := g.question(hs, kindRetry)
	a.free = r.notSent
	v := g.ask(hs, a)
	switch v.act {
	case actRefuse:
		if v.reason == GiveUpBudget && (hs.health.down(m) || hs.cb.lends()) && g.mayHold(hs, m) {
			// Failures in an instant from a host that does not answer (an
			// outage not yet sure), or a recovery under way: held, to go
			// with the host's next answer, charged then.
			return admitHold, ""
		}
		return admitWait, v.reason
	case actHold:
		if g.breaker == nil {
			return admitWait, GiveUpBudget // no queue to hold it in
		}
		return admitHold, ""
	}
	t.charged, t.chargedSec, t.probe = v.charged, v.chargedSec, v.probe
	return admitWait, ""
}

// mayHold reports whether a retry to hs may be held at m for the host's
// recovery: the breaker holds retries (it is on, and not FailFast), and
// something will pay for the retry when the recovery releases it: no
// budget, a recovery under way that may still lend, a budget that owes
// nothing (the recovery will lend), or the share's room now. Otherwise
// it gives up at once: the budget never makes a caller wait for a retry
// that will not be sent.
func (g *gate) mayHold(hs *hostState, m int64) bool {
	switch {
	case g.breaker == nil || g.breaker.FailFast:
		return false
	case g.budget == nil || hs.cb.lends() || hs.bud.solvent():
		return true
	}
	return hs.bud.room(secondOf(m))
}

// question is a new question of kind about host hs, now.
func (g *gate) question(hs *hostState, kd kind) ask {
	m := mono()
	return ask{kind: kd, sec: secondOf(m), healthy: !hs.health.failing(m), at: time.Now()}
}

// afterWait passes a retry whose wait has ended: if the breaker opened
// meanwhile, it is held (with FailFast, it goes only as the probe).
func (g *gate) afterWait(t *ticket, notBefore, limit time.Time) (GiveUpReason, error) {
	hs := t.hs
	if hs == nil || g.breaker == nil || t.probe != 0 {
		return "", nil
	}
	if !hs.cb.opened() {
		if m := mono(); !hs.health.outage(m) || !g.mayHold(hs, m) {
			return "", nil
		}
	}
	if g.breaker.FailFast {
		v := hs.cb.admit(ask{kind: kindProbe, at: time.Now()})
		if v.act == actRefuse {
			g.refund(t)
			return v.reason, nil
		}
		t.probe = v.probe
		return "", nil
	}
	return g.hold(t, notBefore, limit)
}

// hold holds a retry in the breaker's queue until it may go (charged to
// the budget as it leaves), or gives up: at its limit (GiveUpBreaker, or
// GiveUpMaxElapsed past WithMaxElapsed), or when the budget has no room
// for it as it leaves (GiveUpBudget). A context that ends first ends the
// hold with its error, unless its deadline is the limit.
func (g *gate) hold(t *ticket, notBefore, limit time.Time) (GiveUpReason, error) {
	hs := t.hs
	g.refund(t)
	t.wasHeld = true
	for range maxHoldTurns { // each pass is a probe that the budget did not let go, minProbeGap apart
		end, ticket, err := awaitHold(t.ctx, &hs.cb, t.firstFail, notBefore, limit)
		now := time.Now()
		switch {
		case err == context.DeadlineExceeded && !now.Before(limit):
			return GiveUpBreaker, nil // the deadline is the limit: give up with the last response
		case err != nil:
			return "", err
		case !t.meEnd.IsZero() && !now.Before(t.meEnd):
			hs.cb.undo(taken{probe: ticket}, now)
			return GiveUpMaxElapsed, nil
		case end == holdGiveUp:
			return GiveUpBreaker, nil
		}
		if reason, again := g.leave(t, end, ticket); !again {
			return reason, nil
		}
	}
	return GiveUpBreaker, nil
}

// awaitHold holds a retry in cb until its hold ends (see circuit.turn),
// or ctx ends: then with its error.
func awaitHold(ctx context.Context, cb *circuit, failed, notBefore, limit time.Time) (holdEnd, uint64, error) {
	w := cb.enter(failed, notBefore, limit, time.Now())
	for range maxHoldTurns { // each turn waits for an event or a timer
		now := time.Now()
		end, ticket, done, next, changed := cb.turn(w, now)
		if done {
			return end, ticket, nil
		}
		if err := await(ctx, changed, w.wake, next.Sub(now)); err != nil {
			cb.quit(w, time.Now())
			return holdGiveUp, 0, err
		}
	}
	cb.quit(w, time.Now())
	return holdGiveUp, 0, nil // never reached in practice
}

// leave charges a retry that leaves its hold to the budget. A probe that
// the budget has no room for goes back in the hold (again); any other
// gives up, GiveUpBudget.
func (g *gate) leave(t *ticket, end holdEnd, ticket uint64) (reason GiveUpReason, again bool) {
	hs := t.hs
	kd := kindLeave
	if end == holdProbe {
		kd = kindProbe
	}
	a := g.question(hs, kd)
	// Released: the host has answered, the floor is back. At its limit
	// with no retry seen failing: it was held for the floor. The probe of
	// a crowd (a process's many callers held together): the floor too,
	// so that its callers learn of the recovery within a probe's gap,
	// not when the share next has room; one instance of a fleet, with a
	// few held, probes on its share alone.
	a.healthy = a.healthy || end == holdReleased || end == holdGo ||
		(end == holdProbe && hs.cb.holding() >= crowdSize)
	v, lent := send, false
	if g.budget != nil {
		v = hs.bud.admit(a)
		if v.act != actSend && end == holdReleased && hs.cb.borrow() {
			hs.bud.lend(a.sec) // released by a recovery, beyond the share
			v, lent = verdictOf{act: actSend, taken: taken{charged: true, chargedSec: a.sec}}, true
		}
	}
	if f := g.onRelease; f != nil && v.act == actSend && end == holdReleased {
		f(hs.host, lent)
	}
	switch {
	case v.act == actSend:
		t.charged, t.chargedSec, t.probe = v.charged, v.chargedSec, ticket
		return "", false
	case end == holdProbe:
		hs.cb.reprobe(ticket, time.Now())
		return "", true
	}
	return GiveUpBudget, false
}

// mayHedge asks for a hedge: none while the host's breaker is open or
// retries are held, and each one spends the budget.
func (g *gate) mayHedge(t *ticket) bool {
	hs := t.hs
	if hs.cb.opened() || hs.cb.holding() > 0 {
		return false
	}
	if g.paced && (g.rate != nil || g.quota != nil || g.limit != nil) {
		return false // a copy would take no turn, quota or slot: with those pacers, no hedging
	}
	if g.budget == nil {
		return true
	}
	return hs.bud.admit(g.question(hs, kindHedge)).act == actSend
}

// refund gives back the charge of a retry that was never sent.
func (g *gate) refund(t *ticket) {
	if t.charged && t.hs != nil && g.budget != nil {
		t.hs.bud.undo(taken{charged: true, chargedSec: t.chargedSec}, time.Time{})
	}
	t.charged = false
}

// sleep waits for d, or until ctx ends, and then returns ctx.Err().
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// await waits for a change, a wake, d, or the end of ctx.
func await(ctx context.Context, changed, wake <-chan struct{}, d time.Duration) error {
	t := time.NewTimer(max(d, 0))
	defer t.Stop()
	select {
	case <-changed:
	case <-wake:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}
