// This file holds send admission: per host, the pacers, asked in one
// order whether each attempt goes now, waits (for a quota's reset, a
// token, a free slot) or is refused, just before it is sent; and told how
// every attempt they let go ended. They are the throttle (throttle.go),
// the static rate limit (staticrate.go), quota pacing (quota.go) and the
// concurrency limit (limit.go), all off by default. They are controllers
// like the budget and the breaker (gate.go), asked later: those decide
// whether a failed attempt is retried, these when an attempt is sent.
// Their order, and why, is in the package documentation ("Pacing"), the
// one place it is written.

package retryhttp

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// errRefused is what a request that a pacer refused before its first
// attempt ends with, in an *Error whose Reason says which pacer.
var errRefused = errors.New("retryhttp: refused before sending, to spare the host")

// maxPaceTurns bounds how often a pacer that asks to be asked again
// after a wait (quota pacing, when others took the quota that reset) is
// asked: then the attempt is refused.
const maxPaceTurns = 8

// paced reports whether any pacer is on.
func (c *config) paced() bool {
	return c.throttle != 0 || c.limit != nil || c.quota != nil || c.rate != nil
}

// initPacers adds the pacers that are on to a new host's list, in their
// order.
func (g *gate) initPacers(h *hostState) {
	h.pacers = h.pbuf[:0]
	if g.throttle != 0 {
		h.thr.init(g.throttle)
		h.thr.watch(g.gauges.of(gaugeThrottle))
		h.pacers = append(h.pacers, &h.thr)
	}
	if g.rate != nil {
		h.rate.init(g.rate)
		h.pacers = append(h.pacers, &h.rate)
	}
	if g.quota != nil {
		h.quo.init(g.quota)
		h.quo.watch(g.gauges.of(gaugeQuota))
		h.pacers = append(h.pacers, &h.quo)
	}
	if g.limit != nil {
		h.lim.init(g.limit)
		h.lim.watch(g.gauges.of(gaugeLimit))
		h.pacers = append(h.pacers, &h.lim)
	}
}

// pace asks the pacers whether attempt n of t's request goes: "" when it may, now
// that every wait asked for has passed; otherwise why not, or the
// context's error if it ended during a wait.
func (g *gate) pace(t *ticket, n int) (GiveUpReason, error) {
	hs := t.hs
	a := t.paceAsk(n)
	var tk taken
	for _, p := range hs.pacers {
		for turn := 0; ; turn++ {
			v := p.admit(a)
			tk.quota, tk.slot, tk.turn = tk.quota || v.quota, tk.slot || v.slot, tk.turn || v.turn
			if v.act == actWait && v.again && turn == maxPaceTurns {
				v.act = actRefuse // asked to wait again and again: give up
			}
			switch v.act {
			case actRefuse:
				g.unpace(hs, tk)
				return v.reason, nil
			case actWait:
				if err := sleep(t.ctx, v.wait); err != nil {
					g.unpace(hs, tk)
					return callersEnd(v.reason, err), err
				}
				a.now, a.waited = mono(), a.waited+v.wait
				if v.again {
					continue
				}
			case actQueue:
				got, ok, err := v.q.queue(t.ctx, a.deadline)
				if !ok {
					g.unpace(hs, tk)
					return callersEnd(v.reason, err), err
				}
				tk.slot, tk.turn = tk.slot || got.slot, tk.turn || got.turn
			}
			break
		}
	}
	t.quota, t.slot = tk.quota, tk.slot
	if n == 1 {
		t.start = mono() // sent now: its latency and staleness count from here, not from its waits
	}
	return "", nil
}

// paceAsk is the question to the pacers for attempt n: when asked, and
// by when (mono) it must have gone, the sooner of the context's deadline
// and WithMaxElapsed's end, 0 if neither.
func (t *ticket) paceAsk(n int) ask {
	a := ask{kind: kindSend, now: mono()}
	if n == 1 {
		a.kind = kindFirst
	}
	if dl, ok := t.ctx.Deadline(); ok {
		a.deadline = a.now + max(int64(time.Until(dl)), 1)
	}
	if !t.meEnd.IsZero() {
		if end := a.now + int64(time.Until(t.meEnd)); a.deadline == 0 || end < a.deadline {
			a.deadline = max(end, 1)
		}
	}
	return a
}

// callersEnd is the reason a wait for a pacer that ended in err gives:
// none if the caller canceled it (the caller's doing, not the pacer's
// refusal), else the pacer's.
func callersEnd(reason GiveUpReason, err error) GiveUpReason {
	if errors.Is(err, context.Canceled) {
		return ""
	}
	return reason
}

// unpace gives back what the pacers took for an attempt not sent.
func (g *gate) unpace(hs *hostState, t taken) {
	if t.quota || t.slot || t.turn {
		for _, p := range hs.pacers {
			p.undo(t, time.Time{}) // no pacer reads the time
		}
	}
}

// paceRecord tells the pacers how an attempt they let go ended.
func (g *gate) paceRecord(t *ticket, r *result) {
	canceled := r.outcome == outcomeCanceled && !errors.Is(r.err, context.DeadlineExceeded)
	o := seen{sent: !r.notSent && !canceled, retry: t.retry, slot: t.slot, quota: t.quota,
		now: mono(), start: t.start, rejected: rejected(r), canceled: canceled}
	o.rtt = o.now - o.start
	if r.resp != nil {
		o.header, o.status, o.wall = r.resp.Header, r.resp.StatusCode, time.Now()
	}
	t.slot, t.quota = false, false
	for _, p := range t.hs.pacers {
		p.observe(o)
	}
}

// rejected reports whether the host turned an attempt away, or could not
// take it: 429, 502, 503 or 504, a timeout (the attempt's, or its
// context's deadline) or a connection error. Any other answer, a 500
// included, was served; a request its caller canceled says nothing.
func rejected(r *result) bool {
	if r.resp != nil {
		switch r.resp.StatusCode {
		case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
		return false
	}
	return r.err != nil && (r.outcome != outcomeCanceled || errors.Is(r.err, context.DeadlineExceeded))
}

// pacersQuiet reports whether a host's pacers hold nothing that
// forgetting it would lose: no slot in use or awaited, no quota known to
// reset later.
func (h *hostState) pacersQuiet() bool {
	return h.lim.quiet() && h.rate.quiet() && h.quo.quiet(mono())
}
