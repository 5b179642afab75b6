// This file holds what a Gate shows of a host: for the Transport's tests,
// and for whoever diagnoses one.

package admission

// A View is one host's admission, as it stands.
type View struct {
	Open          bool    // its breaker is open
	Probing       bool    // a probe is in flight
	Held          int     // retries held
	Score         int32   // its health score
	Idle          bool    // forgetting it would lose nothing
	Limit         float64 // the concurrency limit, 0 if none
	InFlight      int     // attempts the concurrency limit counts in flight
	Waiting       int     // attempts in the concurrency limit's line
	QuotaInFlight int     // attempts quota pacing counts in flight
}

// View is host's admission (host in its canonical form), the host made
// known if it was not.
func (g *Gate) View(host string) View {
	h := g.hosts.get(host)
	h.circuit().mu.Lock()
	v := View{Open: h.circuit().isOpen.Load(), Probing: h.circuit().probing != 0, Held: h.circuit().holding(), Score: h.health.level()}
	h.circuit().mu.Unlock()
	now := mono()
	v.Idle = v.Score == 0
	for _, c := range h.list() {
		v.Idle = v.Idle && c.idle(now)
		if l, ok := c.(*limiter); ok {
			l.mu.Lock()
			v.Limit, v.InFlight, v.Waiting = l.limit, l.inflight, len(l.waiters)
			l.mu.Unlock()
		}
		if q, ok := c.(*quota); ok {
			q.mu.Lock()
			v.QuotaInFlight = q.inflight
			q.mu.Unlock()
		}
	}
	return v
}

// Hosts is how many hosts g knows.
func (g *Gate) Hosts() int { return g.hosts.len() }
