// Command storm reproduces a thundering herd: clients send a burst, a
// steady stream (open loop) or one request after another (closed loop) of
// GETs to a loopback server that answers 503 for D seconds, then serves a
// bounded capacity, or to a server that is overloaded (serves a fixed rate,
// refuses the excess at once), some scenarios with a share of critical
// requests and the rest sheddable, and it reports, per retry library (and
// "bare", no retries), what the server received. It writes the per-100 ms series of
// attempts to CSV and draws them as PNG charts.
//
//	cd bench && go run ./storm -runs 3 -out results
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/retryhttp/retryhttp/bench"
)

func main() {
	var (
		runs      = flag.Int("runs", 3, "runs per contender and scenario; the table shows medians")
		only      = flag.String("scenarios", "", "comma-separated scenario names (default: all)")
		out       = flag.String("out", "results", "folder for the CSV and PNG files")
		n         = flag.Int("n", 500, "burst size")
		rate      = flag.Int("rate", 200, "steady arrivals a second")
		capacity  = flag.Int("capacity", 50, "requests served at once after the outage")
		work      = flag.Duration("work", 10*time.Millisecond, "time to serve one request")
		contended = flag.String("contenders", "", "comma-separated contender names (default: all)")
		replot    = flag.Bool("replot", false, "run nothing: redraw each scenario's PNG from its CSV in -out (after merging runs by hand)")
	)
	flag.Parse()
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}
	base := Scenario{N: *n, Rate: *rate, Capacity: *capacity, Work: *work, Timeout: 30 * time.Second,
		Warmup: 5 * time.Second, Recovery: 5 * time.Second}
	for _, sc := range scenarioList(base) {
		if !selected(*only, sc.Name) {
			continue
		}
		if *replot {
			if err := replotCSV(*out, sc); err != nil {
				log.Fatal(err)
			}
			continue
		}
		medians := runScenario(sc, contendersFor(sc), *contended, *runs)
		if len(medians) == 0 {
			continue
		}
		printTable(os.Stdout, sc, medians, *runs)
		if err := writeFiles(*out, sc, medians); err != nil {
			log.Fatal(err)
		}
	}
}

// scenarioList is every scenario the storm runs, in order.
func scenarioList(base Scenario) []Scenario {
	return []Scenario{
		with(base, "burst-D3", "burst", 3*time.Second, false, ""),
		with(base, "burst-D1", "burst", time.Second, false, ""),
		with(base, "steady-D5", "steady", 5*time.Second, false, ""),
		with(base, "steady-D1", "steady", time.Second, false, ""),
		with(base, "burst-D3-per-process", "burst", 3*time.Second, true, ""),
		with(base, "burst-D3-per-process-retry-after", "burst", 3*time.Second, true, "3"),
		with(base, "burst-D3-per-process-retry-after-spread", "burst", 3*time.Second, true, "3-6"),
		fleet(base, 50),
		fleet(base, 500),
		recoveryWeak(base),
		lone(base, 2),
		lone(base, 10),
		closed(base, "closed-W20-D30", 20, 0, false),
		closed(base, "closed-fleet-W50-D30", 50, 100*time.Millisecond, true),
		overload(base, 2),
		overload(base, 4),
		overload(base, 1.25),
		mixed(base, 2, 0.3),
		mixed(base, 4, 0.2),
		overloadDeep(base),
		overloadSlots(base, 2),
		flapping(base),
		refused(with(base, "steady-D1", "steady", time.Second, false, "")),
		refused(fleet(base, 50)),
		steps(base),
		quota(base, 1),
		quota(base, 10),
	}
}

// contendersFor is the contenders a scenario runs: those that can tell
// critical from sheddable requests (and the baselines) in a mixed one,
// else all.
func contendersFor(sc Scenario) []bench.Contender {
	p := bench.CommonPolicy
	if sc.Critical > 0 {
		return []bench.Contender{
			bench.Bare, bench.RetryHTTP, bench.RetryHTTPThrottle, bench.RetryHTTPLimit, bench.Failsafe(p),
			bench.FailsafePriorityThrottler(p), bench.FailsafePriorityLimiter(p), bench.RetryablehttpDefaults,
		}
	}
	return []bench.Contender{
		bench.Bare, bench.RetryHTTP, bench.RetryHTTPFailFast, bench.RetryHTTPThrottle, bench.RetryHTTPThrottle2, bench.RetryHTTPLimit,
		bench.RetryHTTPQuota, bench.RetryablehttpDefaults, bench.Retryablehttp(p), bench.Failsafe(p),
		bench.FailsafeThrottler(p), bench.FailsafeLimiter(p), bench.Naive,
	}
}

// runScenario runs each of the contenders selected (all if contended is
// empty) runs times in the scenario, and returns each one's medians.
func runScenario(sc Scenario, contenders []bench.Contender, contended string, runs int) []Result {
	var medians []Result
	for _, c := range contenders {
		if !selected(contended, c.Name) {
			continue
		}
		var rs []Result
		for i := range runs {
			r, err := Run(sc, c)
			if err != nil {
				log.Fatal(err)
			}
			mix := ""
			if sc.Critical > 0 {
				mix = fmt.Sprintf(", critical %d/%d ok, sheddable %d/%d ok",
					r.CriticalSuccesses, r.CriticalRequests, r.SheddableSuccesses, r.SheddableRequests)
			}
			log.Printf("%s %s run %d: %d attempts (%.2fx), %d/%d ok, outage %d/%d ok%s, %.1fs",
				sc.Name, c.Name, i+1, r.Attempts, r.Amplification(), r.Successes, r.Requests,
				r.OutageSuccess, r.OutageRequests, mix, r.Elapsed.Seconds())
			rs = append(rs, r)
		}
		medians = append(medians, median(rs))
	}
	return medians
}

func with(s Scenario, name, shape string, d time.Duration, perProcess bool, retryAfter string) Scenario {
	s.Name, s.Shape, s.Outage, s.PerProcess, s.RetryAfter = name, shape, d, perProcess, retryAfter
	return s
}

// fleet is the headline scenario: a dependency down for 30 s, called by
// k instances, each with its own client, sharing the steady arrivals.
func fleet(s Scenario, k int) Scenario {
	s = with(s, fmt.Sprintf("fleet-D30-K%d", k), "steady", 30*time.Second, false, "")
	s.Instances = k
	return s
}

// recoveryWeak is fleet-D30-K50 whose server comes back weak: after the
// 30 s outage it serves 1.5 × the offered rate a second at most, and
// refuses the excess with 503 at once (as an overloaded server does), so
// that a release of the held retries faster than that is shed.
func recoveryWeak(s Scenario) Scenario {
	s = fleet(s, 50)
	s.Name, s.WeakRate = "recovery-weak", s.Rate*3/2
	return s
}

// lone is a client with little traffic of its own: rate requests a
// second (open loop), 5 s healthy, then a 3 s outage.
func lone(s Scenario, rate int) Scenario {
	s = with(s, fmt.Sprintf("lone-R%d-D3", rate), "steady", 3*time.Second, false, "")
	s.Rate = rate
	return s
}

// closed is a closed loop: w workers, each sending its next request when
// the last one ends (after think), 5 s healthy, a 30 s outage, 5 s after;
// one shared client, or (perWorker) a fleet of sequential clients.
func closed(s Scenario, name string, w int, think time.Duration, perWorker bool) Scenario {
	s = with(s, name, "closed", 30*time.Second, false, "")
	s.Workers, s.Think, s.PerWorker = w, think, perWorker
	return s
}

// overload is a server that serves 500 requests a second and refuses the
// excess at once with a 503, never down, offered k times that (open loop,
// one shared client) for 10 s.
func overload(s Scenario, k float64) Scenario {
	s = with(s, fmt.Sprintf("overload-%gx", k), "steady", 0, false, "")
	s.RateCap, s.Rate, s.Warmup, s.Recovery = 500, int(500*k), 10*time.Second, 0
	return s
}

// mixed is overload(s, k) offered requests of mixed criticality: a
// share critical, the rest sheddable.
func mixed(s Scenario, k, share float64) Scenario {
	s = overload(s, k)
	s.Name += "-mixed"
	s.Critical = share
	return s
}

// overloadDeep is an overload where successes are sparse: a server that
// serves 10 requests a second, offered 200 (open loop, one shared client)
// for 10 s; the case where an outage detector could take overload for an
// outage.
func overloadDeep(s Scenario) Scenario {
	s = with(s, "overload-deep", "steady", 0, false, "")
	s.RateCap, s.Rate, s.Warmup, s.Recovery = 10, 200, 10*time.Second, 0
	return s
}

// overloadSlots is a server that serves 5 requests at once, each for
// 10 ms (500 a second), and refuses one that finds them all busy (503 at
// once, no queue), never down, offered k times that as random (Poisson)
// arrivals (open loop, one shared client) for 10 s: a host that refuses
// bursts below its capacity.
func overloadSlots(s Scenario, k float64) Scenario {
	s = with(s, fmt.Sprintf("overload-%gx-poisson", k), "steady", 0, false, "")
	s.Slots, s.Work, s.Poisson = 5, 10*time.Millisecond, true
	s.Rate, s.Warmup, s.Recovery = int(k*float64(s.Slots)/s.Work.Seconds()), 10*time.Second, 0
	return s
}

// flapping is a server that is down for 1 s and up for 1 s, in turn, for
// 30 s (starting down, after 5 s healthy), offered 200 requests a second
// (open loop, one shared client).
func flapping(s Scenario) Scenario {
	s = with(s, "flapping", "steady", 30*time.Second, false, "")
	s.Flap, s.Recovery = time.Second, 0
	return s
}

// refused is s with its outage served as refused connections instead of
// 503s.
func refused(s Scenario) Scenario {
	s.Name += "-refused"
	s.Refuse = true
	return s
}

// steps is a server whose capacity steps from 32 requests at once to 8
// and back, 10 s each, each served in 50 ms, with as many again queued
// and 503 beyond; offered 1.3 × what 32 serve (open loop, one shared
// client).
func steps(s Scenario) Scenario {
	s = with(s, "steps-32-8-32", "steady", 0, false, "")
	s.Work, s.Capacity = 50*time.Millisecond, 32
	s.Steps = []Step{{0, 32}, {10 * time.Second, 8}, {20 * time.Second, 32}}
	s.Rate = int(1.3 * 32 / s.Work.Seconds())
	s.Warmup, s.Recovery = 30*time.Second, 0
	return s
}

// quota is a server with a quota of 100 requests per 10 s, which it
// reports in RateLimit on every answer (429 once spent), offered 3 × that
// (open loop) for 30 s by one client, or by a fleet of k.
func quota(s Scenario, k int) Scenario {
	name := "quota-1"
	if k > 1 {
		name = fmt.Sprintf("quota-fleet-%d", k)
	}
	s = with(s, name, "steady", 0, false, "")
	s.Quota, s.QuotaWindow = 100, 10*time.Second
	s.Rate = 3 * s.Quota / int(s.QuotaWindow/time.Second)
	s.Warmup, s.Recovery = 30*time.Second, 0
	s.Instances = k
	return s
}

func selected(list, name string) bool {
	if list == "" {
		return true
	}
	for _, s := range strings.Split(list, ",") {
		if strings.TrimSpace(s) == name {
			return true
		}
	}
	return false
}

// median takes the median of each figure over the runs, and the series of
// the run whose attempts are the median.
func median(rs []Result) Result {
	pick := func(f func(Result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		sort.Float64s(v)
		return v[len(v)/2]
	}
	byAttempts := append([]Result(nil), rs...)
	sort.Slice(byAttempts, func(i, j int) bool { return byAttempts[i].Attempts < byAttempts[j].Attempts })
	m := byAttempts[len(byAttempts)/2]
	m.Successes = int(pick(func(r Result) float64 { return float64(r.Successes) }))
	m.OutageSuccess = int(pick(func(r Result) float64 { return float64(r.OutageSuccess) }))
	m.OutageAttempts = int64(pick(func(r Result) float64 { return float64(r.OutageAttempts) }))
	m.PeakOutage = int64(pick(func(r Result) float64 { return float64(r.PeakOutage) }))
	m.PeakRecovery = int64(pick(func(r Result) float64 { return float64(r.PeakRecovery) }))
	m.P50 = time.Duration(pick(func(r Result) float64 { return float64(r.P50) }))
	m.P99 = time.Duration(pick(func(r Result) float64 { return float64(r.P99) }))
	m.FailP99 = time.Duration(pick(func(r Result) float64 { return float64(r.FailP99) }))
	m.PeakAfter2s = int64(pick(func(r Result) float64 { return float64(r.PeakAfter2s) }))
	m.ShedAfter = int64(pick(func(r Result) float64 { return float64(r.ShedAfter) }))
	m.AfterRequests = int(pick(func(r Result) float64 { return float64(r.AfterRequests) }))
	m.AfterSuccess = int(pick(func(r Result) float64 { return float64(r.AfterSuccess) }))
	m.Elapsed = time.Duration(pick(func(r Result) float64 { return float64(r.Elapsed) }))
	m.Requests = int(pick(func(r Result) float64 { return float64(r.Requests) }))
	m.OutageRequests = int(pick(func(r Result) float64 { return float64(r.OutageRequests) }))
	m.FirstOK = time.Duration(pick(func(r Result) float64 { return float64(r.FirstOK) }))
	m.OKAfter2s = int64(pick(func(r Result) float64 { return float64(r.OKAfter2s) }))
	m.Served = int64(pick(func(r Result) float64 { return float64(r.Served) }))
	m.ServedOffered = int64(pick(func(r Result) float64 { return float64(r.ServedOffered) }))
	m.TooMany = int64(pick(func(r Result) float64 { return float64(r.TooMany) }))
	m.QuotaUsed = pick(func(r Result) float64 { return r.QuotaUsed })
	m.CriticalRequests = int(pick(func(r Result) float64 { return float64(r.CriticalRequests) }))
	m.CriticalSuccesses = int(pick(func(r Result) float64 { return float64(r.CriticalSuccesses) }))
	m.SheddableRequests = int(pick(func(r Result) float64 { return float64(r.SheddableRequests) }))
	m.SheddableSuccesses = int(pick(func(r Result) float64 { return float64(r.SheddableSuccesses) }))
	for i := range m.Phases {
		m.Phases[i].Goodput = pick(func(r Result) float64 { return r.Phases[i].Goodput })
		m.Phases[i].P99 = time.Duration(pick(func(r Result) float64 { return float64(r.Phases[i].P99) }))
	}
	return m
}
