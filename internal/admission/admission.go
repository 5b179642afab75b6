// Package admission holds a Transport's admission: per host, one ordered
// list of controllers,
// each with its own state and rules, asked by one loop whether an attempt
// goes now, waits (until a time, or a place in a line moves), is held or
// is refused; and told the fresh outcome of every attempt. In their order:
// the retry budget (budget.go) and the retry breaker (breaker.go, its
// held retries in hold.go, their release in release.go), which
// decide whether a failed attempt is retried, then the pacers, which
// decide when an attempt is sent: the throttle (throttle.go), the static
// rate limit (staticrate.go), quota pacing (quota.go) and the concurrency
// limit (limit.go), all off by default. The host's health (health.go) is
// the one score they read. What the controllers took for an attempt is
// its permit (Ticket.p): given back (giveBack) if the attempt is not
// sent, told how it ended (record) if it is. The rules, in full, are in
// docs/overload.md and the package documentation, "Admission" and
// "Pacing". A host keeps a few words until it first fails (host.go). The
// Transport asks it four things on a Ticket per request: First, Done,
// Retry and Hedge (ticket.go, retry.go).
package admission

import (
	"net/http"
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
	admit(a query) verdict
	// giveBack gives back what admit took for an attempt that is not sent,
	// its place in a line included, at.
	giveBack(t permit, at time.Time)
	// observe takes the fresh outcome of an attempt to the host, and
	// reports a transition it made.
	observe(o observation) change
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

// query is one question to the controllers.
type query struct {
	kind     kind
	sec      int64         // the Unix second asked in
	healthy  bool          // the host is not failing
	free     bool          // never reached the server: costs it nothing
	charged  bool          // a first attempt charged already, as a layer above's retry: not counted as a first
	level    int8          // the request's criticality: -1 sheddable, 0 default, 1 critical
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
	actWait // pacers: wait for verdict.wait or wake, then ask again
)

// A waiter is an attempt's place in a pacer's line (the static rate's,
// the concurrency limit's). Its wake is closed when it is granted what
// it waits for, or, as the pacer says, when the line moves.
type waiter struct {
	wake   chan struct{}
	level  int8 // its request's criticality: the concurrency limit lets the higher go first
	passed int  // how often a more critical one behind it went first
}

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
	lent       bool    // a recovery lent it beyond the budget's share (owed until answered)
	paced      uint8   // bit i: the controller at place i of the list took something
	took       bool    // to give back: this controller took something
	waiter     *waiter // to give back: its place in this controller's line, left as it gives up waiting
}

// with is t and what u took too.
func (t permit) with(u permit) permit {
	return permit{charged: t.charged || u.charged, chargedSec: max(t.chargedSec, u.chargedSec),
		probe: max(t.probe, u.probe), lent: t.lent || u.lent, paced: t.paced | u.paced}
}

// charge is t's part that is the budget's: its charge, and what a loan's
// retry owes.
func (t permit) charge() permit {
	return permit{charged: t.charged, chargedSec: t.chargedSec, lent: t.lent}
}

// pacedOnly is t but its budget's part: what a retry that may have
// reached the host gives back.
func (t permit) pacedOnly() permit {
	t.charged, t.chargedSec, t.lent = false, 0, false
	return t
}

// without is t less what u gives back of it: the budget's part, the
// probe, the pacers' parts.
func (t permit) without(u permit) permit {
	if u.charged || u.lent {
		t.charged, t.chargedSec, t.lent = false, 0, false
	}
	if u.probe != 0 {
		t.probe = 0
	}
	t.paced &^= u.paced
	return t
}

// of is t as the controller at place i of the list is told it.
func (t permit) of(i int) permit {
	t.took = t.paced&(1<<i) != 0
	return t
}

// verdict is a controller's answer.
type verdict struct {
	act    act
	reason string        // with actRefuse; with actWait, if it cannot wait
	wait   time.Duration // with actWait: how long at most; < 0: until wake
	wake   <-chan struct{}
	waiter *waiter // with actWait: the attempt's place in the line, to ask with again
	permit
}

// tookIt is the verdict of a pacer that let an attempt go and took
// something for it, to be given back or told how it ended.
var tookIt = verdict{act: actSend, permit: permit{took: true}}

var (
	send = verdict{act: actSend}
	hold = verdict{act: actHold}
)

func refuse(r string) verdict { return verdict{act: actRefuse, reason: r} }

// observation is the outcome of an attempt, as the controllers are told it.
type observation struct {
	answered bool   // the host did its job
	failed   bool   // a fresh failure worth retrying
	retry    bool   // the attempt was a retry or a probe
	trip     bool   // the host's score has reached the breaker's threshold over 10ms
	outage   bool   // answered by a host that served no one
	lend     bool   // answered by a host that served no one, whose budget owes nothing
	lent     int64  // the Unix second a recovery lent the attempt in, beyond the budget's share; 0 if none did
	failing  bool   // a fresh failure that leaves the host failing: a recovery's loan ends
	probe    uint64 // the attempt was this probe
	replied  bool   // the host answered it, whatever the status: rtt is its round trip

	// For the pacers, of every attempt they let go:
	sent     bool        // it reached the host, or may have, and was not canceled
	canceled bool        // its context ended: how long it took is a lower bound
	rejected bool        // the host turned it away: 429, 502, 503, 504, a timeout or a connection error
	took     bool        // this controller took something for it (a slot, a count of its quota)
	now      int64       // mono when it ended
	start    int64       // mono when it was sent
	rtt      int64       // how long it took, in nanoseconds (the breaker's too)
	status   int         // its response's status, 0 if none
	header   http.Header // its response's header, nil if none
	wall     time.Time   // when it ended, by the wall clock, with a header
	at       time.Time   // the breaker: when it ended, with pacers; zero: at now
}

// An Outcome is how an attempt ended, as its Transport tells Done.
type Outcome struct {
	Answered bool          // the host did its job: no error, nothing worth retrying
	Failed   bool          // a failure worth retrying that reached the host, a refusal (429, 502, 503, 504) even if not retried, or a refused connection
	Panicked bool          // its base panicked: nothing is known
	Latency  time.Duration // a hedged first attempt's winning copy's own latency; 0: since First
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
