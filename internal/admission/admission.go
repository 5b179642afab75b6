// Package admission holds a Transport's admission: per host, one ordered
// list of controllers,
// each with its own state and rules, asked by one loop whether an attempt
// goes now, waits (until a time, or a place in a line moves), is held or
// is refused; and told the fresh outcome of every attempt. In their order:
// the retry budget (budget.go) and the retry breaker (breaker.go), which
// decide whether a failed attempt is retried, then the pacers, which
// decide when an attempt is sent: the throttle (throttle.go), the static
// rate limit (staticrate.go), quota pacing (quota.go) and the concurrency
// limit (limit.go), all off by default. The host's health (health.go) is
// the one score they read. What the controllers took for an attempt is
// its permit (ticket.p): given back whole (cancel) if the attempt is not
// sent, told how it ended (record) if it is. The rules, in full, are in
// docs/overload.md and the package documentation, "Admission" and
// "Pacing". The Transport asks it through a Gate, with a Ticket per
// request.
package admission

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// A controller is one rule of a host's admission. It sees only its own
// state and what it is asked or told, with the time in it: never a
// request, another controller, the clock or the gate. Questions and
// answers are values, so that asking costs no allocation.
type controller interface {
	// admit decides an attempt: send (noting what it took, such as a
	// budget charge, a probe or a slot), wait (until a time, or until
	// its place in a line moves: then it is asked again), hold (the
	// breaker's queue keeps it until it may go) or refuse, with a
	// reason. A kind that is not its to judge is sent.
	admit(a ask) verdictOf
	// undo gives back what admit took for an attempt that is not sent,
	// its place in a line included, at.
	undo(t permit, at time.Time)
	// observe takes the fresh outcome of an attempt to the host, and
	// reports a transition it made.
	observe(o seen) change
	// idle reports whether forgetting the host at now would lose
	// nothing of the controller's: nothing held, in use, awaited or known
	// to reset later.
	idle(now int64) bool
}

// kind is what asks for admission.
type kind uint8

const (
	kindFirst  kind = iota // a request's first attempt
	kindRetry              // a retry whose wait is about to start
	kindLeave              // a retry leaving a hold: released, or at its limit
	kindProbe              // a held retry going as the breaker's probe
	kindHedge              // a hedged copy of a first attempt
	kindSend               // a retry about to be sent, its wait over (pacers only)
	kindRepeat             // a layer above's retry, as it arrives (the budget only)
)

// sending reports whether k is an attempt about to be sent: what the
// pacers judge.
func (k kind) sending() bool { return k == kindFirst || k == kindSend }

// ask is one question to the controllers.
type ask struct {
	kind     kind
	sec      int64         // the Unix second asked in
	healthy  bool          // the host is not failing
	free     bool          // never reached the server: costs it nothing
	charged  bool          // a first attempt charged already, as a layer above's retry: not counted as a first
	now      int64         // mono when asked
	at       time.Time     // when asked, by the wall clock: now
	deadline int64         // pacers: mono by which the attempt must have gone, 0 if none
	waited   time.Duration // pacers: how long the attempt has waited for them already
	turn     int           // pacers: how often this one asked the attempt to wait already
	waiter   *waiter       // pacers: the attempt's place in this one's line, once it has one
}

type act uint8

const (
	actSend act = iota
	actHold
	actRefuse
	actWait // pacers: wait for verdictOf.wait or wake, then ask again
)

// A waiter is an attempt's place in a pacer's line (the static rate's,
// the concurrency limit's). Its wake is closed when it is granted what
// it waits for, or, as the pacer says, when the line moves.
type waiter struct{ wake chan struct{} }

func newWaiter() *waiter { return &waiter{wake: make(chan struct{})} }

// granted reports whether w's wake is closed.
func (w *waiter) granted() bool {
	select {
	case <-w.wake:
		return true
	default:
		return false
	}
}

// permit is what the controllers took for an attempt. The
// budget's charge and the breaker's probe are the gate's to read too; what
// a pacer took (a slot, a turn, a count of its quota) is its own, one bit
// of paced per place in the host's list, told back to it as took.
type permit struct {
	charged    bool // the budget charged it, in chargedSec
	chargedSec int64
	probe      uint64  // the breaker made it the probe with this ticket
	paced      uint8   // bit i: the controller at place i of the list took something
	took       bool    // to undo: this controller took something
	waiter     *waiter // to undo: its place in this controller's line, left as it gives up waiting
}

// with is t and what u took too.
func (t permit) with(u permit) permit {
	return permit{charged: t.charged || u.charged, chargedSec: max(t.chargedSec, u.chargedSec),
		probe: max(t.probe, u.probe), paced: t.paced | u.paced}
}

// of is t as the controller at place i of the list is told it.
func (t permit) of(i int) permit {
	t.took = t.paced&(1<<i) != 0
	return t
}

// verdictOf is a controller's answer.
type verdictOf struct {
	act    act
	reason Reason        // with actRefuse; with actWait, if it cannot wait
	wait   time.Duration // with actWait: how long at most; < 0: until wake
	wake   <-chan struct{}
	waiter *waiter // with actWait: the attempt's place in the line, to ask with again
	permit
}

// tookIt is the verdict of a pacer that let an attempt go and took
// something for it, to be given back or told how it ended.
var tookIt = verdictOf{act: actSend, permit: permit{took: true}}

var (
	send = verdictOf{act: actSend}
	hold = verdictOf{act: actHold}
)

func refuse(r Reason) verdictOf { return verdictOf{act: actRefuse, reason: r} }

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
	took     bool        // this controller took something for it (a slot, a count of its quota)
	now      int64       // mono when it ended
	start    int64       // mono when it was sent
	rtt      int64       // how long it took, in nanoseconds
	status   int         // its response's status, 0 if none
	header   http.Header // its response's header, nil if none
	wall     time.Time   // when it ended, by the wall clock, with a header
	at       time.Time   // the breaker: when it ended, if it is told
}

// An Outcome is how an attempt ended, as its Transport tells the Gate.
type Outcome struct {
	Answered bool // the host did its job: no error, nothing worth retrying
	Failed   bool // a failure worth retrying that reached the host, or a refused connection
	// For the pacers:
	Sent     bool        // it reached the host, or may have, and was not canceled
	Canceled bool        // its caller canceled it
	Rejected bool        // the host turned it away: 429, 502, 503, 504, a timeout or a connection error
	Header   http.Header // its response's header, nil if none
	Status   int         // its response's status, 0 if none
}

// change is a controller's transition: the breaker's, which it also
// queues for the Gate to report, in order (circuit.takeEvents).
type change struct{ opened, closed bool }

// Settings are what a Transport's options turn on in admission.
type Settings struct {
	Budget   *Share   // nil: no budget
	Breaker  *Breaker // resolved; nil: no breaker
	Hedge    bool     // hedging is on: hosts keep their recent latencies
	Throttle float64  // the throttle's ratio; 0: off
	Rate     *Rate    // nil: no static rate
	Quota    *Quota   // nil: no quota pacing
	Limit    *Limit   // nil: no concurrency limit
	// Gauges show the throttle's, the quota's and the limit's state, in
	// that order; nil: none.
	Gauges [3]Gauge
	// Notify reports a breaker transition (metrics, a log record, the
	// user's callback), and OnRelease a held retry released (the
	// simulator's): the Transport's, so that no Gate method needs a
	// request.
	Notify    func(ctx context.Context, host string, open bool, score int)
	OnRelease func(host string, lent bool)
}

// A Gauge shows a pacer's state.
type Gauge interface{ Set(float64) }

// gauge is a pacer's Gauge, which may be none.
type gauge struct{ g Gauge }

func (g gauge) set(v float64) {
	if g.g != nil {
		g.g.Set(v)
	}
}

// Gate is a Transport's admission: its budget, breaker and hedging, its
// pacers, and the state of every host it has sent to.
type Gate struct {
	s       Settings
	budget  *Share   // nil: no budget
	breaker *Breaker // resolved; nil: no breaker
	paced   bool     // any pacer is on
	hosts   hostMap[hostState]
	tickets atomic.Uint64 // names probes; its count is the probes claimed
}

// hostState is one host's admission: its health and its controllers.
type hostState struct {
	health health
	ctls   []controller  // the controllers that are on, in their order
	buf    [6]controller // ctls' array: the list costs no allocation
	bud    budgetCtl     // with a budget
	cb     circuit       // with a breaker
	lat    *Latencies    // recent latencies, with hedging only
	host   string        // the canonical host, for breaker events
	above  atomic.Int64  // the Unix second a layer above last retried a request to this host
	// evMu orders the reports of this host's breaker transitions: taken
	// before the breaker's lock is let go, held while they are reported.
	evMu sync.Mutex
}

// A Ticket is one request's admission state: what the Gate's methods are
// given, in place of the request. The caller sets Ctx, its ends
// (CtxEnd, MaxElapsedEnd: read once, they answer every question of the
// time left), FirstFail, Owned and Repeat; the rest is the Gate's.
type Ticket struct {
	Ctx           context.Context // the request's
	CtxEnd        time.Time       // its context's deadline, zero if none
	MaxElapsedEnd time.Time       // when WithMaxElapsed ends it, zero if never
	FirstFail     time.Time       // when its first attempt failed
	Owned         bool            // a layer above owns its schedule: none of its retries is held
	Repeat        bool            // it is itself a layer above's retry: charged as one
	WasHeld       bool            // a retry of it was held
	hs            *hostState      // the host's admission state
	p             permit          // the permit of the attempt to come, or in flight: what the controllers took for it
	start         int64           // mono: when the attempt in flight started
	sec           int64           // the Unix second the request began in
	retry         bool            // the attempt in flight is a retry or a probe
}

// controllers is admission's list, in its order, written once: for each
// controller, whether a Transport's settings turn it on, whether it is a
// pacer, and how a new host gets it. A new pacer is its own file, its
// reason and a line here.
var controllers = [...]struct {
	on    func(s *Settings) bool
	pacer bool
	add   func(g *Gate, h *hostState) controller
}{
	{func(s *Settings) bool { return s.Budget != nil }, false, func(g *Gate, h *hostState) controller {
		h.bud.attach(g.budget, h.host, unixSecond())
		return &h.bud
	}},
	{func(s *Settings) bool { return s.Breaker != nil }, false, func(g *Gate, h *hostState) controller {
		h.cb.init(g.breaker, &g.tickets)
		return &h.cb
	}},
	{func(s *Settings) bool { return s.Throttle != 0 }, true, func(g *Gate, _ *hostState) controller {
		return newThrottle(g.s.Throttle, gauge{g.s.Gauges[0]})
	}},
	{func(s *Settings) bool { return s.Rate != nil }, true, func(g *Gate, _ *hostState) controller {
		return newStaticRate(g.s.Rate)
	}},
	{func(s *Settings) bool { return s.Quota != nil }, true, func(g *Gate, _ *hostState) controller {
		return newQuota(g.s.Quota, gauge{g.s.Gauges[1]})
	}},
	{func(s *Settings) bool { return s.Limit != nil }, true, func(g *Gate, _ *hostState) controller {
		return newLimiter(g.s.Limit, gauge{g.s.Gauges[2]})
	}},
}

// Paced reports whether any pacer is on.
func (s *Settings) Paced() bool {
	for _, x := range controllers {
		if x.pacer && x.on(s) {
			return true
		}
	}
	return false
}

// On reports whether s turns anything of admission on.
func (s *Settings) On() bool {
	return s.Budget != nil || s.Breaker != nil || s.Hedge || s.Paced()
}

// New is the Gate of a Transport with settings s.
func New(s Settings) *Gate {
	if s.Notify == nil {
		s.Notify = func(context.Context, string, bool, int) {}
	}
	g := &Gate{s: s, budget: s.Budget, breaker: s.Breaker, paced: s.Paced()}
	g.hosts.init = func(key string, h *hostState) {
		h.host = key
		h.ctls = h.buf[:0]
		for _, x := range controllers {
			if x.on(&g.s) {
				h.ctls = append(h.ctls, x.add(g, h))
			}
		}
		if g.s.Hedge {
			h.lat = new(Latencies)
		}
	}
	g.hosts.evictable = func(h *hostState) bool {
		now := mono()
		if h.health.level() != 0 || slices.ContainsFunc(h.ctls, func(c controller) bool { return !c.idle(now) }) {
			return false
		}
		h.bud.detach() // evicted: the shared Share's entry may go once no one points to it
		return true
	}
	return g
}

// Paced reports whether any pacer is on.
func (g *Gate) Paced() bool { return g.paced }

// MaxHold is the breaker's MaxHold, 0 if the breaker is off.
func (g *Gate) MaxHold() time.Duration {
	if g.breaker == nil {
		return 0
	}
	return g.breaker.MaxHold
}

// Enter finds the request's host and notes when its first attempt starts.
func (g *Gate) Enter(t *Ticket, scheme, host string) {
	var buf [maxHostKey]byte
	key, kb := canonicalHost(scheme, host, &buf)
	t.start = mono()
	t.sec = secondOf(t.start)
	t.hs = g.hosts.getKey(key, kb, t.sec)
}

// AdmitFirst asks the controllers for a first attempt: the budget counts
// it, only FailFast refuses one, while the host's breaker is open, and
// the pacers may make it wait or refuse it. It returns why the attempt may
// not go, or the context's error if it ended while the attempt waited for
// a pacer.
func (g *Gate) AdmitFirst(t *Ticket) (Reason, error) {
	hs := t.hs
	if t.Repeat {
		g.chargeRepeat(t)
	}
	if !g.paced && !hs.cb.opened() {
		// The success path: while the breaker is closed, only the budget
		// has anything to do with a first attempt (count it), and it
		// refuses none; asked directly, it costs no dispatch.
		if !t.p.charged {
			hs.bud.countFirst(t.sec)
		}
		return "", nil
	}
	a := t.question(kindFirst)
	a.sec, a.healthy, a.charged = t.sec, true, t.p.charged
	v, err := g.admit(t, a)
	if v.act != actSend {
		return v.reason, err
	}
	t.start = mono() // sent now: its latency and staleness count from here, not from its waits
	return "", nil
}

// chargeRepeat charges a layer above's retry to the budget as the retry
// it is, if the share has room: then it is not counted as a first
// attempt. One the share has no room for still goes (retryhttp never
// refuses a caller's own attempt for the budget), counted as a first.
func (g *Gate) chargeRepeat(t *Ticket) {
	if g.budget == nil {
		return
	}
	if v := t.hs.bud.admit(t.question(kindRepeat)); v.act == actSend {
		t.p = t.p.with(v.permit)
	}
}

// admit asks each of the host's controllers, in order, about an attempt
// of a.kind, and waits out each wait one asks for before asking it again:
// the first refusal decides; a hold decides if no one refuses. What they
// take goes into the permit (t.p); an attempt that does not go takes
// nothing. A wait that the context ends returns its error, with the
// waiting pacer's reason, none if the caller canceled it.
func (g *Gate) admit(t *Ticket, a ask) (verdictOf, error) {
	held := false
	for i, c := range t.hs.ctls {
		v, err := t.ask(c, a)
		t.p = t.p.with(v.permit)
		if v.took {
			t.p.paced |= 1 << i
		}
		switch {
		case v.act == actRefuse:
			t.cancel()
			return v, err
		case v.act == actHold:
			held = true
		}
	}
	if held {
		t.cancel()
		return hold, nil
	}
	return send, nil
}

// ask asks c about an attempt, and asks it again after each wait it
// asks for: at a time, or when its line moves. A wait that ends with the
// context leaves the line, and refuses with the context's error.
func (t *Ticket) ask(c controller, a ask) (verdictOf, error) {
	began := a.now
	for turn := 0; ; turn++ {
		v := c.admit(a)
		if v.act != actWait {
			return v, nil
		}
		err := await(t.Ctx, v.wake, nil, v.wait)
		if err == nil && turn == maxWaitTurns {
			err = errTooManyWaits
		}
		if dl := t.CtxEnd; err == nil && !dl.IsZero() && !time.Now().Before(dl) {
			err = context.DeadlineExceeded // the deadline, met first by the wait's own timer
		}
		if err != nil {
			c.undo(permit{waiter: v.waiter}, time.Time{})
			return refuse(callersEnd(v.reason, err)), err
		}
		a.at = time.Now()
		a.now = monoAt(a.at)
		a.waited, a.turn, a.waiter = time.Duration(a.now-began), turn+1, v.waiter
	}
}

// maxWaitTurns bounds the waits of one attempt in one pacer: each
// follows a move of its line or the time it was told; errTooManyWaits
// ends it past that (never in practice).
const maxWaitTurns = 1 << 20

var errTooManyWaits = errors.New("retryhttp: waited too often for a pacer")

// question is a new question of kind kd about t's host, now: whether the
// host is failing, and by when (mono) the attempt must have gone, the
// sooner of the context's deadline and WithMaxElapsed's end, 0 if
// neither.
func (t *Ticket) question(kd kind) ask {
	now := time.Now()
	m := monoAt(now)
	a := ask{kind: kd, sec: secondOf(m), healthy: !t.hs.health.failing(m), now: m, at: now}
	if end := t.End(); !end.IsZero() {
		a.deadline = m + max(int64(end.Sub(now)), 1)
	}
	return a
}

// End is when the request must have ended: the sooner of its context's
// deadline and WithMaxElapsed's end, zero if neither.
func (t *Ticket) End() time.Time {
	if t.CtxEnd.IsZero() || (!t.MaxElapsedEnd.IsZero() && t.MaxElapsedEnd.Before(t.CtxEnd)) {
		return t.MaxElapsedEnd
	}
	return t.CtxEnd
}

// callersEnd is the reason a wait for a pacer that ended in err gives:
// none if the caller canceled it (the caller's doing, not the pacer's
// refusal), else the pacer's.
func callersEnd(reason Reason, err error) Reason {
	if errors.Is(err, context.Canceled) {
		return ""
	}
	return reason
}

// cancel gives back the permit of an attempt that is not sent: whatever
// the controllers took for it.
func (t *Ticket) cancel() {
	if t.hs != nil && t.p != (permit{}) {
		now := time.Now()
		for i, c := range t.hs.ctls {
			c.undo(t.p.of(i), now)
		}
	}
	t.p = permit{}
}

// done tells each controller how the attempt of the permit ended (o),
// with what it took for it, and reports the transition one made; the
// permit is used.
func (t *Ticket) done(o seen) (ch change) {
	p := t.p
	t.p = permit{}
	for i, c := range t.hs.ctls {
		o.took = p.paced&(1<<i) != 0
		if x := c.observe(o); x.opened || x.closed {
			ch = x
		}
	}
	return ch
}

// Sending notes attempt n, about to go: when it started, and whether it
// is a retry (or a probe), whose failure shows that retries fail too.
func (g *Gate) Sending(t *Ticket, n int) {
	if n > 1 {
		t.start = mono()
	}
	t.retry = n > 1 || t.p.probe != 0
}

// Record takes an attempt's result into the host's health and tells the
// controllers, once, with what its permit took: the permit is used. A
// failure of an attempt that started before an answer from the host is
// stale: it changes nothing.
func (g *Gate) Record(t *Ticket, r Outcome) {
	hs := t.hs
	if hs == nil {
		return
	}
	o := g.seenOf(t, r)
	if !g.paced && o.answered && o.probe == 0 && hs.cb.quiet() {
		t.p = permit{}
		return // the success path: an answer from a host with nothing held tells the controllers nothing
	}
	ch := t.done(o)
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
// one that opens the breaker), or nothing (a stale failure, a cancel);
// and, with pacers, how it went.
func (g *Gate) seenOf(t *Ticket, r Outcome) seen {
	hs := t.hs
	o := seen{retry: t.retry, probe: t.p.probe}
	o.at = time.Now()
	o.now = monoAt(o.at)
	switch {
	case r.Answered:
		o.lend = hs.health.outage(o.now) && (g.budget == nil || hs.bud.solvent())
		hs.health.answer(t.start, o.now)
		o.answered = true
	case r.Failed && !hs.health.stale(t.start):
		// A refused connection reached no application, but says that
		// the host serves no one: it counts, though it costs nothing.
		s := hs.health.fail(o.now, g.scoreCap())
		o.failed = true
		o.trip = g.breaker != nil && s >= int32(g.breaker.Threshold) && hs.health.lasted(o.now)
	}
	if g.paced {
		o.sent, o.canceled, o.rejected = r.Sent, r.Canceled, r.Rejected
		o.start, o.rtt = t.start, o.now-t.start
		if r.Header != nil {
			o.header, o.status, o.wall = r.Header, r.Status, o.at
		}
	}
	return o
}

// report reports the breaker's transitions that no one has reported yet,
// in the order they happened: whoever reports holds the host's evMu, so
// that calls for one host come in order, never at once, and no
// controller's lock is held while they run.
func (g *Gate) report(t *Ticket) {
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
				score = int(hs.health.level())
			}
			g.s.Notify(t.Ctx, hs.host, open, score)
		}
	}
}

// maxReports bounds the rounds of one report: each reports what was
// queued since the last, which other attempts' transitions can refill
// only while the callbacks run.
const maxReports = 1 << 10

// scoreCap is where the score stops: no higher than what opens the
// breaker, so that a long outage is forgotten as fast as a short one.
func (g *Gate) scoreCap() int32 {
	if g.breaker != nil {
		return int32(max(g.breaker.Threshold, failingAfter))
	}
	return failingAfter
}

// Abandon gives back the permit of an attempt whose base panicked: all
// but its budget charge, for it may have reached the host.
func (g *Gate) Abandon(t *Ticket) {
	t.p.charged = false
	t.cancel()
}

// Next is what becomes of a retry that the ladder allows.
type Next uint8

const (
	NextWait Next = iota // wait for the delay, then send
	NextHold             // hold until it may go, or its limit
)

// AdmitRetry asks the controllers for a retry that the ladder (decide.go)
// allows: it waits and goes (charged to the budget, unless it never
// reached the server), is held, or gives up now, without a wait.
func (g *Gate) AdmitRetry(t *Ticket, free bool) (Next, Reason) {
	hs := t.hs
	if hs == nil {
		return NextWait, ""
	}
	a := t.question(kindRetry)
	m := a.now
	if !t.Owned && hs.health.outage(m) && g.mayHold(hs, m) {
		return NextHold, "" // the host serves no one: wait for it, uncharged
	}
	a.free = free
	v, _ := g.admit(t, a) // no controller asks a retry to wait before its own wait
	switch v.act {
	case actRefuse:
		return g.refused(t, v.reason, m)
	case actHold:
		if g.breaker == nil || t.Owned {
			return NextWait, ReasonBudget // no queue to hold it in, or one a layer above owns: never held
		}
		return NextHold, ""
	}
	return NextWait, ""
}

// refused is what becomes of a retry that a controller refused for
// reason at m: it gives up, unless the budget refused it while the host
// does not answer (an outage not yet sure: failures in an instant) or a
// recovery is under way: then it is held, to go with the host's next
// answer, charged then.
func (g *Gate) refused(t *Ticket, reason Reason, m int64) (Next, Reason) {
	hs := t.hs
	if reason == ReasonBudget && !t.Owned && (hs.health.down(m) || hs.cb.lends()) && g.mayHold(hs, m) {
		return NextHold, ""
	}
	return NextWait, reason
}

// mayHold reports whether a retry to hs may be held at m for the host's
// recovery: the breaker holds retries (it is on, and not FailFast), and
// something will pay for the retry when the recovery releases it: no
// budget, a recovery under way that may still lend, a budget that owes
// nothing (the recovery will lend), or the share's room now. Otherwise
// it gives up at once: the budget never makes a caller wait for a retry
// that will not be sent.
func (g *Gate) mayHold(hs *hostState, m int64) bool {
	switch {
	case g.breaker == nil || g.breaker.FailFast:
		return false
	case g.budget == nil || hs.cb.lends() || hs.bud.solvent():
		return true
	}
	return hs.bud.room(secondOf(m))
}

// AfterWait passes a retry whose wait has ended: if the breaker opened
// meanwhile, it is to be held (held: the caller holds it, g.hold), or,
// with FailFast, it goes only as the probe.
func (g *Gate) AfterWait(t *Ticket) (reason Reason, held bool) {
	hs := t.hs
	if hs == nil || g.breaker == nil || t.p.probe != 0 {
		return "", false
	}
	if !hs.cb.opened() {
		if m := mono(); !hs.health.outage(m) || !g.mayHold(hs, m) {
			return "", false
		}
	}
	if t.Owned {
		g.Refund(t)
		return ReasonCircuitOpen, false // a layer above owns it: never held, back to it at once
	}
	if g.breaker.FailFast {
		v := hs.cb.admit(t.question(kindProbe))
		if v.act == actRefuse {
			g.Refund(t)
			return v.reason, false
		}
		t.p.probe = v.probe
		return "", false
	}
	return "", true
}

// Hold holds a retry in the breaker's queue until it may go (charged to
// the budget as it leaves), or gives up: at its limit (ReasonBreaker, or
// ReasonMaxElapsed past WithMaxElapsed), or when the budget has no room
// for it as it leaves (ReasonBudget). A context that ends first ends the
// hold with its error, unless its deadline is the limit.
func (g *Gate) Hold(t *Ticket, notBefore, limit time.Time) (Reason, error) {
	hs := t.hs
	g.Refund(t)
	t.WasHeld = true
	for range maxHoldTurns { // each pass is a probe that the budget did not let go, minProbeGap apart
		end, ticket, err := awaitHold(t.Ctx, &hs.cb, t.FirstFail, notBefore, limit)
		now := time.Now()
		switch {
		case err == context.DeadlineExceeded && !now.Before(limit):
			return ReasonBreaker, nil // the deadline is the limit: give up with the last response
		case err != nil:
			return "", err
		case !t.MaxElapsedEnd.IsZero() && !now.Before(t.MaxElapsedEnd):
			hs.cb.undo(permit{probe: ticket}, now)
			return ReasonMaxElapsed, nil
		case end == holdGiveUp:
			return ReasonBreaker, nil
		}
		if reason, again := g.leave(t, end, ticket); !again {
			return reason, nil
		}
	}
	return ReasonBreaker, nil
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
		if err := await(ctx, changed, w.woken(), max(next.Sub(now), 0)); err != nil {
			cb.quit(w, time.Now())
			return holdGiveUp, 0, err
		}
	}
	cb.quit(w, time.Now())
	return holdGiveUp, 0, nil // never reached in practice
}

// leave charges a retry that leaves its hold to the budget. A probe that
// the budget has no room for goes back in the hold (again); any other
// gives up, ReasonBudget.
func (g *Gate) leave(t *Ticket, end holdEnd, ticket uint64) (reason Reason, again bool) {
	hs := t.hs
	v, lent := g.charge(t, end)
	if f := g.s.OnRelease; f != nil && v.act == actSend && end == holdReleased {
		f(hs.host, lent)
	}
	switch {
	case v.act == actSend:
		t.p = t.p.with(v.permit)
		t.p.probe = ticket
		return "", false
	case end == holdProbe:
		hs.cb.reprobe(ticket, time.Now())
		return "", true
	}
	return ReasonBudget, false
}

// charge asks the budget for a retry leaving its hold as end says, and
// lends beyond the share to one that a recovery released (lent).
func (g *Gate) charge(t *Ticket, end holdEnd) (v verdictOf, lent bool) {
	if g.budget == nil {
		return send, false
	}
	hs := t.hs
	kd := kindLeave
	if end == holdProbe {
		kd = kindProbe
	}
	a := t.question(kd)
	// Released: the host has answered, the floor is back. At its limit
	// with no retry seen failing: it was held for the floor. The probe of
	// a crowd (a process's many callers held together): the floor too,
	// so that its callers learn of the recovery within a probe's gap,
	// not when the share next has room; one instance of a fleet, with a
	// few held, probes on its share alone.
	a.healthy = a.healthy || end == holdReleased || end == holdGo ||
		(end == holdProbe && hs.cb.holding() >= crowdSize)
	v = hs.bud.admit(a)
	if v.act != actSend && end == holdReleased && hs.cb.borrow() {
		hs.bud.lend(a.sec) // released by a recovery, beyond the share
		return verdictOf{act: actSend, permit: permit{charged: true, chargedSec: a.sec}}, true
	}
	return v, false
}

// MayHedge asks for a hedge: none while the host's breaker is open or
// retries are held; each one spends the budget, and a pacer that would
// take a turn, quota or slot for it refuses it (a copy takes none).
func (g *Gate) MayHedge(t *Ticket) bool {
	hs := t.hs
	if hs.cb.opened() || hs.cb.holding() > 0 {
		return false
	}
	a := t.question(kindHedge)
	for i, c := range hs.ctls {
		if v := c.admit(a); v.act != actSend {
			for _, d := range hs.ctls[:i] {
				d.undo(permit{charged: true, chargedSec: a.sec}, a.at) // the budget's charge, if it took one
			}
			return false
		}
	}
	return true
}

// Refund gives back the charge of a retry that was never sent.
func (g *Gate) Refund(t *Ticket) {
	if t.p.charged && t.hs != nil && g.budget != nil {
		t.hs.bud.undo(permit{charged: true, chargedSec: t.p.chargedSec}, time.Time{})
	}
	t.p.charged, t.p.chargedSec = false, 0
}

// await waits for a change, a wake, d (none if d < 0), or the end of
// ctx.
func await(ctx context.Context, changed, wake <-chan struct{}, d time.Duration) error {
	var timeout <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-changed:
	case <-wake:
	case <-timeout:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// Pace asks the pacers whether a retry, its wait over, goes now: "" when
// it may, once every wait asked for has passed; otherwise why not, or the
// context's error if it ended during a wait.
func (g *Gate) Pace(t *Ticket) (Reason, error) {
	v, err := g.admit(t, t.question(kindSend))
	return v.reason, err
}

// Known reports whether t's host is known: Enter found it.
func (t *Ticket) Known() bool { return t.hs != nil }

// Holds reports whether the attempt in flight holds something a panic in
// the base would leave taken: a probe, a pacer's slot, turn or quota
// (Abandon gives them back).
func (t *Ticket) Holds() bool { return t.p.probe != 0 || t.p.paced != 0 }

// Failing reports whether t's host is failing now.
func (t *Ticket) Failing() bool { return t.hs != nil && t.hs.health.failing(mono()) }

// Crowd reports whether t's retry is one of a crowd held together: 4 or
// more held whose requests first failed within 10ms of t's first failure.
func (t *Ticket) Crowd() bool { return t.hs.cb.crowd(t.FirstFail) }

// Latencies are t's host's recent latencies; nil without hedging.
func (t *Ticket) Latencies() *Latencies { return t.hs.lat }

// RetriedAbove is the Unix second a layer above last retried a request
// to t's host, 0 if never or the host is not known.
func (t *Ticket) RetriedAbove() int64 {
	if t.hs == nil {
		return 0
	}
	return t.hs.above.Load()
}

// NoteRetriedAbove notes that a layer above retried a request to t's
// host in Unix second sec.
func (t *Ticket) NoteRetriedAbove(sec int64) {
	if t.hs != nil {
		t.hs.above.Store(sec)
	}
}

// HasBreaker reports whether the breaker is on.
func (g *Gate) HasBreaker() bool { return g.breaker != nil }
