// This file holds quota pacing, one of admission's pacers (the protocol is in admission.go): per
// host, it reads the quota the server says is left (RateLimit with its
// policies and partition keys, RateLimit-Remaining, X-RateLimit-Remaining,
// OpenAI's and Anthropic's request counts, and the Retry-After of a 429)
// from every response, and holds the attempts that would find it spent
// until it resets, or refuses those that cannot wait that long.

package admission

import (
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/retryhttp/retryhttp/internal/ratelimit"
)

const (
	// maxQuotaParts is how many quotas of one host are followed: a
	// server cannot make the client keep more.
	maxQuotaParts = 8
	// quotaJitterMax is the most a wait for a reset is drawn beyond it,
	// so that a fleet told the same reset does not come back at once; it
	// is at most a tenth of the wait.
	quotaJitterMax = time.Second
	// quotaHorizon is the longest reset followed, and the longest window
	// (RateLimit-Policy's w) a quota rolls over into: a day (daily quotas
	// are the longest servers state). A longer one is a misread time, a
	// Unix time in milliseconds say, and would refuse the host for good.
	quotaHorizon = 24 * time.Hour
	// quotaMinReset is the shortest wait for a spent quota's reset.
	quotaMinReset = 250 * time.Millisecond
)

// Quota is quota pacing's settings: the longest wait for a reset, and
// whether the quota left is spread over the time to it.
type Quota struct {
	MaxWait time.Duration
	Spread  bool
}

// quota is one host's pacing: what it knows of each quota the host
// reports.
type quota struct {
	cfg      *Quota
	mu       sync.Mutex
	parts    []quotaPart
	buf      [2]quotaPart
	inflight int // attempts admitted and not yet answered
	g        gauge
	jitter   func(n int64) int64 // a random number in [0, n): rand.Int64N, or a test's seeded source
}

// quotaPart is one quota: what was left when the host last said, when
// it resets, and how fast others (the client cannot see them) use it.
type quotaPart struct {
	key       string  // the policy's name and partition, or the field family
	remaining float64 // as last said
	since     float64 // this client's attempts since (those in flight then included)
	reset     int64   // mono when it resets
	obs       int64   // mono when it was said
	window    int64   // the longest time to reset seen: about its window
	limit     float64 // the most ever said to be left, plus one: about its size
	foreign   float64 // others' use, per nanosecond, smoothed
	heard     int64   // mono when the host's last word of it was taken
	guessed   bool    // remaining is this client's guess, since it rolled over
	quiet     bool    // the host answered without a word of it since it rolled over: no guess until it speaks
	sized     bool    // limit and window are the host's own (RateLimit-Policy), not learnt
	next      int64   // spread: the earliest next attempt
}

// MaxQuotaTurns bounds how often an attempt waits for quota pacing (each
// wait ends where others took the quota that reset): then it is refused.
const MaxQuotaTurns = 8

// newQuota is a host's quota pacing, its state shown on g.
func newQuota(cfg *Quota, g gauge) *quota {
	q := new(quota)
	q.init(cfg)
	q.g = g
	return q
}

func (q *quota) init(cfg *Quota) { q.cfg, q.parts, q.jitter = cfg, q.buf[:0], rand.Int64N }

// admit lets an attempt go if every quota it would spend has some left;
// otherwise it waits for the latest of their resets, plus jitter, and
// asks again; or it is refused, if that is past its limits.
func (q *quota) admit(a query) verdict {
	switch {
	case a.kind == kindHedge:
		return refuse(reasonQuota) // a copy would not be counted: none
	case !a.kind.sending():
		return send
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if wait := q.due(a.now, a.level); wait > 0 {
		if a.waited+time.Duration(wait) > q.cfg.MaxWait || (a.deadline != 0 && a.now+wait >= a.deadline) || a.turn >= MaxQuotaTurns {
			return refuse(reasonQuota)
		}
		return verdict{act: actWait, wait: time.Duration(wait), reason: reasonQuota}
	}
	q.spend(a.now)
	return tookIt
}

// quotaReserve is the part of a quota that a sheddable attempt leaves to
// the others: it waits for the reset once no more than this is left.
const quotaReserve = 0.1

// due is how long from now an attempt of criticality level must wait for
// every quota it would spend to have some left (plus jitter past a reset,
// half as much for a critical one, which goes first), or, spread, for its turn; 0
// if none; mu is held. A sheddable attempt finds a quota spent with a
// tenth of it left (quotaReserve).
func (q *quota) due(now int64, level int8) int64 {
	var wait int64
	for i := range q.parts {
		p := &q.parts[i]
		if now >= p.reset && !p.roll(now) {
			continue // reset since it was said, to an unknown size
		}
		left := p.left(now)
		switch {
		case left < 1 || (level < 0 && left < 1+p.reserve()):
			jitter := min(int64(quotaJitterMax), p.window/10)
			if level > 0 {
				jitter /= 2 // the critical draw from the first half
			}
			w := p.reset - now
			if jitter > 0 {
				w += q.jitter(jitter + 1)
			}
			wait = max(wait, w)
		case q.cfg.Spread:
			wait = max(wait, p.next-now)
		}
	}
	return wait
}

// spend counts an attempt that goes now against every quota, and, spread,
// moves each quota's next turn on; mu is held.
func (q *quota) spend(now int64) {
	for i := range q.parts {
		p := &q.parts[i]
		if q.cfg.Spread && now < p.reset {
			if left := p.left(now); left >= 1 {
				p.next = max(now, p.next) + int64(float64(p.reset-now)/left)
			}
		}
		p.since++
	}
	q.inflight++
}

// roll moves a quota whose reset has passed on to its window now, full,
// if its size and length are known and the host has not answered
// without a word of it since it last rolled; it reports whether it did.
func (p *quotaPart) roll(now int64) bool {
	if p.limit <= 0 || p.window <= 0 || p.quiet {
		return false
	}
	n := (now-p.reset)/p.window + 1
	p.obs, p.reset = p.reset+(n-1)*p.window, p.reset+n*p.window
	p.remaining, p.since, p.next, p.guessed = p.limit, 0, 0, true
	return true
}

// reserve is what of the quota a sheddable attempt leaves to the others:
// a whole tenth of its size (none of a quota under 10), and none of a
// window this client has rolled over and not yet sent in, where what is
// left is a guess that refuses nothing.
func (p *quotaPart) reserve() float64 {
	if p.guessed && p.since < 1 {
		return 0
	}
	return math.Floor(quotaReserve * p.limit)
}

// left is the quota predicted to be left at now. In a window rolled
// over, before this client has sent in it, at least one: others' use,
// predicted, does not refuse on a guess alone; the attempt goes, and the
// host's answer to it replaces the guess.
func (p *quotaPart) left(now int64) float64 {
	left := p.remaining - p.since - p.foreign*float64(now-p.obs)
	if p.guessed && p.since < 1 {
		return max(left, 1)
	}
	return left
}

func (q *quota) giveBack(t permit, _ time.Time) {
	if t.took {
		q.mu.Lock()
		q.inflight--
		for i := range q.parts {
			q.parts[i].since = max(q.parts[i].since-1, 0)
		}
		q.mu.Unlock()
	}
}

// observe takes what an answer says of the host's quotas.
func (q *quota) observe(o observation) change {
	if !o.took {
		return change{}
	}
	var rs [maxQuotaParts]quotaReading
	readings := quotaReadings(o.header, o.status, o.wall, rs[:0])
	var ps [maxQuotaParts]ratelimit.Policy
	policies := ratelimit.Policies(o.header, quotaHorizon, ps[:0])
	q.mu.Lock()
	q.inflight = max(q.inflight-1, 0)
	for _, r := range readings {
		q.take(r, o.now, o.start)
	}
	for _, pol := range policies {
		q.size(pol)
	}
	if o.header != nil {
		q.lapse(o.now)
	}
	var left float64 = -1
	if len(q.parts) > 0 {
		left = q.parts[0].left(o.now)
	}
	q.mu.Unlock()
	if left >= 0 {
		q.g.set(left)
	}
	return change{}
}

// take notes one reading, now, of the answer to an attempt sent at
// start. The host's word replaces what the client guessed: a window
// rolled over, and, if the attempt was sent after the host's last word
// of the quota was taken, what it predicted since (its own attempts,
// others' use), whatever the reset said. Only an answer that crossed the
// last word may be a late one, from a window that has ended. mu is held.
func (q *quota) take(r quotaReading, now, start int64) {
	if r.reset > quotaHorizon {
		return // no quota is told for longer: a misread time, which would refuse everything until then
	}
	if r.remaining == 0 && r.reset < quotaMinReset {
		r.reset = quotaMinReset // spent, and a reset in whole seconds rounded down to 0: not at once
	}
	reset := now + int64(r.reset)
	p := q.part(r.key)
	const sec = int64(time.Second)
	switch {
	case p == nil:
		return // as many quotas known as are kept
	case now >= p.reset || reset > p.reset+sec:
		// The first word of this quota, or a new window.
	case reset >= p.reset-sec:
		q.sameWindow(p, r, now, reset, start >= p.heard)
		return
	case start < p.heard && !p.guessed:
		return // an answer from a window that has ended, arriving late
	}
	q.renew(p, r, now, reset)
}

// renew takes a word r said at now of a window that ends at reset, as
// the whole of what is known of it; mu is held.
func (q *quota) renew(p *quotaPart, r quotaReading, now, reset int64) {
	p.remaining, p.since, p.obs, p.reset, p.heard = float64(r.remaining), float64(q.inflight), now, reset, now
	p.guessed, p.quiet = false, false
	p.learn(r)
	if p.next > reset {
		p.next = 0
	}
	p.pace(now)
}

// pace brings a spread quota's next turn no later than what is now
// known to be left allows: the host's word sets the pace, whatever an
// earlier one set.
func (p *quotaPart) pace(now int64) {
	if left := p.left(now); left >= 1 && now < p.reset {
		p.next = min(p.next, now+int64(float64(p.reset-now)/left))
	}
}

// lapse ends the guess of each quota rolled over that an answer did not
// replace: the host answered without a word of it, and the client's
// guess is no evidence that it is spent. It is not paced by until the
// host speaks of it again; mu is held.
func (q *quota) lapse(now int64) {
	for i := range q.parts {
		if p := &q.parts[i]; p.guessed {
			p.guessed, p.quiet, p.reset = false, true, min(p.reset, now)
		}
	}
}

// part is the quota named key, new if it is not known yet; nil if it is
// not and as many are known as are kept; mu is held.
func (q *quota) part(key string) *quotaPart {
	for i := range q.parts {
		if q.parts[i].key == key {
			return &q.parts[i]
		}
	}
	if len(q.parts) == maxQuotaParts {
		return nil
	}
	q.parts = append(q.parts, quotaPart{key: strings.Clone(key)})
	return &q.parts[len(q.parts)-1]
}

// sameWindow takes a word r about p's window, said at now, which ends
// at reset (within a second of what is known: the host tells it in
// whole seconds). What went beyond this client's attempts sent since the
// last word (those then in flight included) went to others: their rate,
// smoothed. Answers come out of order: one to an attempt sent before the
// last word was taken (not fresh) that says more is left than is known,
// less this client's attempts answered since, is stale. mu is held.
func (q *quota) sameWindow(p *quotaPart, r quotaReading, now, reset int64, fresh bool) {
	left := float64(r.remaining)
	switch {
	case p.guessed: // the first word since it rolled over replaces the guess
	case !fresh:
		q.others(p, left, now)
		left = min(left, p.remaining-(p.since-float64(q.inflight)))
	default:
		q.others(p, left, now)
	}
	p.remaining, p.since, p.obs, p.heard, p.guessed = left, float64(q.inflight), now, now, false
	p.reset = min(p.reset, reset) // told in whole seconds, rounded up: the earliest is the closest
	p.learn(r)
	p.pace(now)
}

// others learns others' use of p from a word that left are left, said at
// now; mu is held.
func (q *quota) others(p *quotaPart, left float64, now int64) {
	used := max(p.remaining-p.since-left, 0)
	switch {
	case p.remaining > 10*(left+1) && used > p.remaining/2:
		// Most of the quota gone between two words, down to a tenth:
		// the earlier word was wild (a billion left, then the truth),
		// and learning others' use from it would make every window
		// look spent at once; the client, sending one attempt a window,
		// would never hear the words that correct it. The new word
		// stands alone.
	case now > p.obs:
		p.foreign = (p.foreign + used/float64(now-p.obs)) / 2
	}
}

// learn takes what a reading says of the quota's size and window, unless
// the host has stated them (RateLimit-Policy): the longest time to reset
// seen is about its window, the most ever left plus one about its size.
func (p *quotaPart) learn(r quotaReading) {
	if !p.sized {
		p.window = max(p.window, int64(r.reset))
		p.limit = max(p.limit, float64(r.remaining)+1)
	}
}

// size takes a quota's stated size and window, for the quota of the same
// key that RateLimit reports: a window that rolls over is then known full
// from the first answer, not learnt window by window; mu is held.
func (q *quota) size(pol ratelimit.Policy) {
	for i := range q.parts {
		if p := &q.parts[i]; p.key == pol.Key {
			p.limit, p.window, p.sized = float64(pol.Quota), int64(pol.Window), true
			return
		}
	}
}

// quotaReading is one quota as an answer states it.
type quotaReading struct {
	key       string
	remaining int64
	reset     time.Duration // from now
}

// quotaReadings reads the quotas a response states, from the limits
// internal/ratelimit reads that count requests (ratelimit.Item.Requests);
// and, on a 429 that states none, its wait as a quota spent until then.
func quotaReadings(h http.Header, status int, now time.Time, out []quotaReading) []quotaReading {
	ratelimit.Items(h, now, func(it ratelimit.Item) {
		if it.Requests {
			out = addReading(out, quotaReading{it.Key, it.Remaining, it.Reset})
		}
	})
	if len(out) == 0 && status == http.StatusTooManyRequests {
		if d, ok := ratelimit.Wait(h, now); ok {
			out = addReading(out, quotaReading{"429", 0, d})
		}
	}
	return out
}

// addReading adds r to out, if out has room left: out's capacity is the
// most readings kept of one answer.
func addReading(out []quotaReading, r quotaReading) []quotaReading {
	if len(out) < cap(out) {
		out = append(out, r)
	}
	return out
}

// idle reports whether forgetting the host would lose nothing: no quota
// known to reset later (none, if quota pacing is off).
func (q *quota) idle(now int64) bool {
	if q.cfg == nil {
		return true
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, p := range q.parts {
		if p.reset > now {
			return false
		}
	}
	return true
}
