// This file holds the Markdown tables the storm prints, one kind per kind
// of scenario (a burst, a steady stream through an outage, a closed loop,
// an overload, an overload of mixed criticality, capacity steps, a
// quota), and the formatting of their figures.

package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/retryhttp/retryhttp/bench"
)

// table is one scenario's table: its runs' medians per contender, and
// the words its heading shares with the others.
type table struct {
	w    io.Writer
	sc   Scenario
	rs   []Result
	mode string // the clients: "one shared client", a fleet, ...
	ra   string // the Retry-After sent in the outage, if any
	runs string // "one run", or the medians of how many
}

// printTable prints the scenario's table, of the kind that fits it.
func printTable(w io.Writer, sc Scenario, rs []Result, runs int) {
	t := table{w: w, sc: sc, rs: rs, mode: "one shared client", runs: runsText(runs)}
	if sc.PerProcess {
		t.mode = "one client per request (no shared state)"
	}
	if sc.RetryAfter != "" {
		t.ra = ", Retry-After: " + sc.RetryAfter + " during the outage"
	}
	if sc.Instances > 1 {
		t.mode = fmt.Sprintf("a fleet of %d instances, each its own client, arrivals round-robin", sc.Instances)
	}
	switch {
	case len(sc.Steps) > 0:
		t.steps()
	case sc.Quota > 0:
		t.quota()
	case (sc.RateCap > 0 || sc.Slots > 0) && sc.Critical > 0:
		t.mixed()
	case sc.RateCap > 0 || sc.Slots > 0:
		t.overload()
	case sc.Shape == "closed":
		t.closed()
	case sc.Shape == "steady":
		t.steady()
	default:
		t.burst()
	}
}

// steps is the table of a server whose capacity steps: per phase.
func (t table) steps() {
	w, sc := t.w, t.sc
	fmt.Fprintf(w, "\n%s: a server whose capacity steps %s, each request served in %v, as many again queued, 503 beyond; offered %d req/s (open loop); each phase measured from %v after its step; %s; %s\n\n",
		sc.Name, stepsText(sc), sc.Work, sc.Rate, settle, t.mode, t.runs)
	fmt.Fprint(w, "| contender | requests | attempts | success |")
	for _, st := range sc.Steps {
		fmt.Fprintf(w, " goodput / capacity, from %v (%d) | p99 at the server |", st.At+settle, st.Capacity)
	}
	fmt.Fprint(w, " p99 time to fail |\n|---|---|---|---|")
	for range sc.Steps {
		fmt.Fprint(w, "---|---|")
	}
	fmt.Fprintln(w, "---|")
	for _, r := range t.rs {
		fmt.Fprintf(w, "| %s | %d | %d | %.1f%% |", r.Contender, r.Requests, r.Attempts, pct(r.Successes, r.Requests))
		for _, ph := range r.Phases {
			fmt.Fprintf(w, " %.2f | %v |", ph.Goodput, round(ph.P99))
		}
		fmt.Fprintf(w, " %v |\n", round(r.FailP99))
	}
}

// quota is the table of a server with a quota.
func (t table) quota() {
	w, sc := t.w, t.sc
	fmt.Fprintf(w, "\n%s: a server with a quota of %d per %v, in RateLimit on every answer, 429 once spent; offered %d req/s for %v (open loop), deadline %v; %s; %s\n\n",
		sc.Name, sc.Quota, sc.QuotaWindow, sc.Rate, sc.Warmup, sc.Timeout, t.mode, t.runs)
	fmt.Fprintln(w, "| contender | requests | attempts | answered 429 | share of attempts | quota used | success | p99 (successes) | p99 time to fail |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, r := range t.rs {
		fmt.Fprintf(w, "| %s | %d | %d | %d | %.1f%% | %.1f%% | %.1f%% | %v | %v |\n",
			r.Contender, r.Requests, r.Attempts, r.TooMany, 100*float64(r.TooMany)/float64(max(r.Attempts, 1)),
			100*r.QuotaUsed, pct(r.Successes, r.Requests), round(r.P99), round(r.FailP99))
	}
}

// overloadHeading is an overload table's heading: the server, and the
// load it was offered, then extra (the criticality mix, if any).
func (t table) overloadHeading(extra string) {
	sc := t.sc
	server, arrive := fmt.Sprintf("serves %d req/s and refuses the excess at once (503)", sc.RateCap), "evenly spaced"
	if sc.Slots > 0 {
		server = fmt.Sprintf("serves %d requests at once, each for %v, and refuses one that finds them all busy at once (503, no queue)", sc.Slots, sc.Work)
	}
	if sc.Poisson {
		arrive = "at random (Poisson)"
	}
	fmt.Fprintf(t.w, "\n%s: a server that %s, never down; offered %d req/s %s for %v (open loop)%s; %s; %s\n\n",
		sc.Name, server, sc.Rate, arrive, sc.Warmup, extra, t.mode, t.runs)
}

// overload is the table of an overloaded server (a rate or slots).
func (t table) overload() {
	w, sc := t.w, t.sc
	t.overloadHeading("")
	fmt.Fprintf(w, "| contender | requests | attempts | attempts / request | server arrivals / capacity (the %v offered) | goodput / capacity (the %v offered) | goodput / capacity (whole run) | success |\n", sc.Warmup, sc.Warmup)
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, r := range t.rs {
		arr, good, offered := r.Load(sc)
		fmt.Fprintf(w, "| %s | %d | %d | %.2f | %.2f× | %.2f | %.2f | %.1f%% |\n",
			r.Contender, r.Requests, r.Attempts, r.Amplification(), arr, offered, good, pct(r.Successes, r.Requests))
	}
}

// mixed is the table of an overloaded server offered requests of mixed
// criticality: the overload's figures, goodput over bare's (the same
// scenario's run without retries, if it ran), and the success of each
// criticality.
func (t table) mixed() {
	w, sc := t.w, t.sc
	t.overloadHeading(fmt.Sprintf(", %.0f%% of the requests critical, the rest sheddable (the same requests for every contender)", 100*sc.Critical))
	fmt.Fprintf(w, "| contender | requests | attempts | attempts / request | server arrivals / capacity (the %v offered) | goodput / capacity (the %v offered) | goodput / bare's | critical success | sheddable success | success |\n", sc.Warmup, sc.Warmup)
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	bare := -1.0
	for _, r := range t.rs {
		if r.Contender == bench.Bare.Name {
			_, _, bare = r.Load(sc)
		}
	}
	for _, r := range t.rs {
		arr, _, offered := r.Load(sc)
		rel := "–"
		if bare > 0 {
			rel = fmt.Sprintf("%.2f", offered/bare)
		}
		fmt.Fprintf(w, "| %s | %d | %d | %.2f | %.2f× | %.2f | %s | %.1f%% | %.1f%% | %.1f%% |\n",
			r.Contender, r.Requests, r.Attempts, r.Amplification(), arr, offered, rel,
			pct(r.CriticalSuccesses, r.CriticalRequests), pct(r.SheddableSuccesses, r.SheddableRequests), pct(r.Successes, r.Requests))
	}
}

// closed is the table of a closed loop through an outage.
func (t table) closed() {
	w, sc := t.w, t.sc
	mode := t.mode
	if sc.PerWorker {
		mode = "each worker its own client (a fleet of sequential clients)"
	}
	fmt.Fprintf(w, "\n%s: %d workers, each sending its next request when the last ends (think %v), %v healthy, %v outage, %v after; capacity %d × %v; %s; %s\n\n",
		sc.Name, sc.Workers, sc.Think, sc.Warmup, sc.Outage, sc.Recovery, sc.Capacity, sc.Work, mode, t.runs)
	fmt.Fprintln(w, "| contender | requests | attempts | attempts/s at the server in outage | attempts in outage / requests started in it | first success after recovery | successes/s in 2 s after | success (all) | p99 time to fail | 503s shed after | success (started in 2 s after) |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range t.rs {
		fmt.Fprintf(w, "| %s | %d | %d | %.1f | %.2f× | %v | %.0f | %.1f%% | %v | %d | %.1f%% |\n",
			r.Contender, r.Requests, r.Attempts, r.OutageRate(sc), r.OutageAmplification(), firstOK(r.FirstOK),
			float64(r.OKAfter2s)/2, pct(r.Successes, r.Requests), round(r.FailP99), r.ShedAfter, pct(r.AfterSuccess, r.AfterRequests))
	}
}

// steady is the table of a steady stream (open loop) through an outage.
func (t table) steady() {
	w, sc := t.w, t.sc
	weak := ""
	if sc.WeakRate > 0 {
		weak = fmt.Sprintf(", after the outage %d req/s at most (503 beyond)", sc.WeakRate)
	}
	fmt.Fprintf(w, "\n%s: %d req/s, %v healthy, %v outage, %v recovery; capacity %d × %v%s; %s%s; %s\n\n",
		sc.Name, sc.Rate, sc.Warmup, sc.Outage, sc.Recovery, sc.Capacity, sc.Work, weak, t.mode, t.ra, t.runs)
	fmt.Fprintln(w, "| contender | requests | attempts | attempts in outage / requests started in it | peak /100ms outage | peak /100ms in 2 s after | 503s shed after | first success after recovery | success (all) | success (started in outage) | success (started in 2 s after) | p50 | p99 | p99 time to fail |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range t.rs {
		fmt.Fprintf(w, "| %s | %d | %d | %.2f× | %d | %d | %d | %v | %.1f%% | %.1f%% | %.1f%% | %v | %v | %v |\n",
			r.Contender, r.Requests, r.Attempts, r.OutageAmplification(), r.PeakOutage, r.PeakAfter2s, r.ShedAfter, firstOK(r.FirstOK),
			pct(r.Successes, r.Requests), pct(r.OutageSuccess, r.OutageRequests), pct(r.AfterSuccess, r.AfterRequests),
			round(r.P50), round(r.P99), round(r.FailP99))
	}
}

// burst is the table of a burst at t=0 into an outage.
func (t table) burst() {
	w, sc := t.w, t.sc
	fmt.Fprintf(w, "\n%s: %d GETs at t=0, %v outage; capacity %d × %v; %s%s; %s\n\n",
		sc.Name, sc.N, sc.Outage, sc.Capacity, sc.Work, t.mode, t.ra, t.runs)
	fmt.Fprintln(w, "| contender | attempts | amplification | peak /100ms outage | peak /100ms after | success | p50 | p99 | done after | 503s shed after |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range t.rs {
		fmt.Fprintf(w, "| %s | %d | %.2f× | %d | %d | %.1f%% | %v | %v | %.1fs | %d |\n",
			r.Contender, r.Attempts, r.Amplification(), r.PeakOutage, r.PeakRecovery,
			pct(r.Successes, r.Requests), round(r.P50), round(r.P99), r.Elapsed.Seconds(), r.ShedAfter)
	}
}

func stepsText(sc Scenario) string {
	var parts []string
	for _, st := range sc.Steps {
		parts = append(parts, fmt.Sprintf("%d at %v", st.Capacity, st.At))
	}
	return strings.Join(parts, ", ")
}

func runsText(runs int) string {
	if runs == 1 {
		return "one run"
	}
	return fmt.Sprintf("medians of %d runs", runs)
}

func firstOK(d time.Duration) string {
	if d < 0 {
		return "none"
	}
	return d.Round(time.Millisecond).String()
}

func pct(a, b int) float64 { return 100 * float64(a) / float64(max(b, 1)) }

func round(d time.Duration) time.Duration {
	if d == 0 {
		return 0
	}
	return d.Round(10 * time.Millisecond)
}
