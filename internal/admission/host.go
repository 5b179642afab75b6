// This file holds a host's admission state: what every host a Gate has
// sent to keeps (seven words: its health, its budget's counts, a pointer
// to its controls), and the controls that only a host that has failed,
// or is paced or hedged, needs (the controllers' list, the breaker's
// circuit, the recent latencies), made when it first needs them.

package admission

import (
	"slices"
	"sync"
	"sync/atomic"
)

// hostState is one host's admission: its health, its budget's counts
// and, once it has failed (at once with pacers or hedging), its
// controls. It is 56 bytes, 64 with its map entry's mark of use
// (TestHostStateIsSmall): its name is its map's key, and is not kept
// again.
type hostState struct {
	health health
	bud    hostBudget // with a budget: its counts, or the shared Budget's entry
	ctl    atomic.Pointer[controls]
}

// controls are a host's controllers, in their order, the breaker's
// circuit among them, and its recent latencies.
type controls struct {
	list []controller  // the controllers that are on, in their order
	buf  [6]controller // list's array
	bud  budgetCtl     // with a budget
	lat  *latencies    // recent latencies, with hedging only
	cb   circuit       // with a breaker
	// evMu orders the reports of this host's breaker transitions: taken
	// before the breaker's lock is let go, held while they are reported.
	evMu sync.Mutex
}

// noCircuit is the circuit of a host without controls: closed, nothing
// held. It is only read.
var noCircuit circuit

// initHost prepares a new host: its budget's entry in a shared Budget,
// and, with pacers or hedging, which judge every attempt, its controls.
func (g *Gate) initHost(key string, h *hostState) {
	if b := g.budget; b != nil && !b.own {
		h.bud.attach(b, key, unixSecond()) // an owned Share's counts are h's own
	}
	if g.paced || g.s.Hedge {
		g.controlsOf(h)
	}
}

// budgetOf is the budget's controller for hs, as its controls hold it: to
// ask it directly, before or without its controls.
func (g *Gate) budgetOf(hs *hostState) *budgetCtl { return &budgetCtl{b: g.budget, h: &hs.bud} }

// controlsOf is h's controls, made if it has none yet.
func (g *Gate) controlsOf(h *hostState) *controls {
	if c := h.ctl.Load(); c != nil {
		return c
	}
	c := new(controls)
	c.list = c.buf[:0]
	if g.s.Hedge {
		c.lat = new(latencies)
	}
	for _, x := range controllers {
		if x.on(&g.s) {
			c.list = append(c.list, x.add(g, h, c))
		}
	}
	if h.ctl.CompareAndSwap(nil, c) {
		return c
	}
	return h.ctl.Load() // made by another attempt meanwhile
}

// list is h's controllers, none before its controls are made.
func (h *hostState) list() []controller {
	if c := h.ctl.Load(); c != nil {
		return c.list
	}
	return nil
}

// circuit is h's breaker's circuit: noCircuit, closed and empty, before
// its controls are made (or without a breaker, whose circuit is never
// written).
func (h *hostState) circuit() *circuit {
	if c := h.ctl.Load(); c != nil {
		return &c.cb
	}
	return &noCircuit
}

// latencies are h's recent latencies: nil without hedging, with which its
// controls are made as it is.
func (h *hostState) latencies() *latencies {
	if c := h.ctl.Load(); c != nil {
		return c.lat
	}
	return nil
}

// idle reports whether forgetting h at now would lose nothing: a score of
// 0, and nothing held, in use, awaited or known to reset later by any of
// its controllers (its budget's counts say nothing after the window, and
// a shared Budget's entry is kept while in use).
func (h *hostState) idle(now int64) bool {
	return h.health.level() == 0 && !slices.ContainsFunc(h.list(), func(c controller) bool { return !c.idle(now) })
}
