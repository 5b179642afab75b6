// Command storm reproduces a thundering herd: clients send a burst, a
// steady stream (open loop) or one request after another (closed loop) of
// GETs to a loopback server that answers 503 for D seconds, then serves a
// bounded capacity, or to a server that is overloaded (serves a fixed rate,
// refuses the excess at once), and it reports, per retry library (and
// "bare", no retries), what the server received. It writes the per-100 ms series of
// attempts to CSV and draws them as PNG charts.
//
//	cd bench && go run ./storm -runs 3 -out results
package main

import (
	"encoding/csv"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strconv"
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
	scenarios := []Scenario{
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
		overloadDeep(base),
		overloadSlots(base, 2),
		flapping(base),
		refused(with(base, "steady-D1", "steady", time.Second, false, "")),
		refused(fleet(base, 50)),
		steps(base),
		quota(base, 1),
		quota(base, 10),
	}
	if *replot {
		for _, sc := range scenarios {
			if !selected(*only, sc.Name) {
				continue
			}
			if err := replotCSV(*out, sc); err != nil {
				log.Fatal(err)
			}
		}
		return
	}
	p := bench.CommonPolicy
	contenders := []bench.Contender{
		bench.Bare, bench.RetryHTTP, bench.RetryHTTPFailFast, bench.RetryHTTPThrottle, bench.RetryHTTPThrottle2, bench.RetryHTTPLimit,
		bench.RetryHTTPQuota, bench.RetryablehttpDefaults, bench.Retryablehttp(p), bench.Failsafe(p),
		bench.FailsafeThrottler(p), bench.FailsafeLimiter(p), bench.Naive,
	}
	for _, sc := range scenarios {
		if !selected(*only, sc.Name) {
			continue
		}
		var medians []Result
		for _, c := range contenders {
			if !selected(*contended, c.Name) {
				continue
			}
			var rs []Result
			for i := range *runs {
				r, err := Run(sc, c)
				if err != nil {
					log.Fatal(err)
				}
				log.Printf("%s %s run %d: %d attempts (%.2fx), %d/%d ok, outage %d/%d ok, %.1fs",
					sc.Name, c.Name, i+1, r.Attempts, r.Amplification(), r.Successes, r.Requests,
					r.OutageSuccess, r.OutageRequests, r.Elapsed.Seconds())
				rs = append(rs, r)
			}
			medians = append(medians, median(rs))
		}
		if len(medians) == 0 {
			continue
		}
		printTable(os.Stdout, sc, medians, *runs)
		if err := writeCSV(filepath.Join(*out, sc.Name+".csv"), medians); err != nil {
			log.Fatal(err)
		}
		if err := writeSummary(filepath.Join(*out, sc.Name+"-summary.csv"), medians); err != nil {
			log.Fatal(err)
		}
		if err := drawChart(filepath.Join(*out, sc.Name+".png"), sc, medians); err != nil {
			log.Fatal(err)
		}
	}
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
	for i := range m.Phases {
		m.Phases[i].Goodput = pick(func(r Result) float64 { return r.Phases[i].Goodput })
		m.Phases[i].P99 = time.Duration(pick(func(r Result) float64 { return float64(r.Phases[i].P99) }))
	}
	return m
}

func printTable(w io.Writer, sc Scenario, rs []Result, runs int) {
	mode := "one shared client"
	if sc.PerProcess {
		mode = "one client per request (no shared state)"
	}
	ra := ""
	if sc.RetryAfter != "" {
		ra = ", Retry-After: " + sc.RetryAfter + " during the outage"
	}
	if sc.Instances > 1 {
		mode = fmt.Sprintf("a fleet of %d instances, each its own client, arrivals round-robin", sc.Instances)
	}
	switch {
	case len(sc.Steps) > 0:
		fmt.Fprintf(w, "\n%s: a server whose capacity steps %s, each request served in %v, as many again queued, 503 beyond; offered %d req/s (open loop); each phase measured from %v after its step; %s; %s\n\n",
			sc.Name, stepsText(sc), sc.Work, sc.Rate, settle, mode, runsText(runs))
		fmt.Fprint(w, "| contender | requests | attempts | success |")
		for _, st := range sc.Steps {
			fmt.Fprintf(w, " goodput / capacity, from %v (%d) | p99 at the server |", st.At+settle, st.Capacity)
		}
		fmt.Fprint(w, " p99 time to fail |\n|---|---|---|---|")
		for range sc.Steps {
			fmt.Fprint(w, "---|---|")
		}
		fmt.Fprintln(w, "---|")
		for _, r := range rs {
			fmt.Fprintf(w, "| %s | %d | %d | %.1f%% |", r.Contender, r.Requests, r.Attempts, pct(r.Successes, r.Requests))
			for _, ph := range r.Phases {
				fmt.Fprintf(w, " %.2f | %v |", ph.Goodput, round(ph.P99))
			}
			fmt.Fprintf(w, " %v |\n", round(r.FailP99))
		}
		return
	case sc.Quota > 0:
		fmt.Fprintf(w, "\n%s: a server with a quota of %d per %v, in RateLimit on every answer, 429 once spent; offered %d req/s for %v (open loop), deadline %v; %s; %s\n\n",
			sc.Name, sc.Quota, sc.QuotaWindow, sc.Rate, sc.Warmup, sc.Timeout, mode, runsText(runs))
		fmt.Fprintln(w, "| contender | requests | attempts | answered 429 | share of attempts | quota used | success | p99 (successes) | p99 time to fail |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
		for _, r := range rs {
			fmt.Fprintf(w, "| %s | %d | %d | %d | %.1f%% | %.1f%% | %.1f%% | %v | %v |\n",
				r.Contender, r.Requests, r.Attempts, r.TooMany, 100*float64(r.TooMany)/float64(max(r.Attempts, 1)),
				100*r.QuotaUsed, pct(r.Successes, r.Requests), round(r.P99), round(r.FailP99))
		}
		return
	case sc.RateCap > 0 || sc.Slots > 0:
		server, arrive := fmt.Sprintf("serves %d req/s and refuses the excess at once (503)", sc.RateCap), "evenly spaced"
		if sc.Slots > 0 {
			server = fmt.Sprintf("serves %d requests at once, each for %v, and refuses one that finds them all busy at once (503, no queue)", sc.Slots, sc.Work)
		}
		if sc.Poisson {
			arrive = "at random (Poisson)"
		}
		fmt.Fprintf(w, "\n%s: a server that %s, never down; offered %d req/s %s for %v (open loop); %s; %s\n\n",
			sc.Name, server, sc.Rate, arrive, sc.Warmup, mode, runsText(runs))
		fmt.Fprintf(w, "| contender | requests | attempts | attempts / request | server arrivals / capacity (the %v offered) | goodput / capacity (the %v offered) | goodput / capacity (whole run) | success |\n", sc.Warmup, sc.Warmup)
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
		for _, r := range rs {
			arr, good, offered := r.Load(sc)
			fmt.Fprintf(w, "| %s | %d | %d | %.2f | %.2f× | %.2f | %.2f | %.1f%% |\n",
				r.Contender, r.Requests, r.Attempts, r.Amplification(), arr, offered, good, pct(r.Successes, r.Requests))
		}
		return
	case sc.Shape == "closed":
		if sc.PerWorker {
			mode = "each worker its own client (a fleet of sequential clients)"
		}
		fmt.Fprintf(w, "\n%s: %d workers, each sending its next request when the last ends (think %v), %v healthy, %v outage, %v after; capacity %d × %v; %s; %s\n\n",
			sc.Name, sc.Workers, sc.Think, sc.Warmup, sc.Outage, sc.Recovery, sc.Capacity, sc.Work, mode, runsText(runs))
		fmt.Fprintln(w, "| contender | requests | attempts | attempts/s at the server in outage | attempts in outage / requests started in it | first success after recovery | successes/s in 2 s after | success (all) | p99 time to fail | 503s shed after | success (started in 2 s after) |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
		for _, r := range rs {
			fmt.Fprintf(w, "| %s | %d | %d | %.1f | %.2f× | %v | %.0f | %.1f%% | %v | %d | %.1f%% |\n",
				r.Contender, r.Requests, r.Attempts, r.OutageRate(sc), r.OutageAmplification(), firstOK(r.FirstOK),
				float64(r.OKAfter2s)/2, pct(r.Successes, r.Requests), round(r.FailP99), r.ShedAfter, pct(r.AfterSuccess, r.AfterRequests))
		}
		return
	}
	if sc.Shape == "steady" {
		weak := ""
		if sc.WeakRate > 0 {
			weak = fmt.Sprintf(", after the outage %d req/s at most (503 beyond)", sc.WeakRate)
		}
		fmt.Fprintf(w, "\n%s: %d req/s, %v healthy, %v outage, %v recovery; capacity %d × %v%s; %s%s; %s\n\n",
			sc.Name, sc.Rate, sc.Warmup, sc.Outage, sc.Recovery, sc.Capacity, sc.Work, weak, mode, ra, runsText(runs))
		fmt.Fprintln(w, "| contender | requests | attempts | attempts in outage / requests started in it | peak /100ms outage | peak /100ms in 2 s after | 503s shed after | first success after recovery | success (all) | success (started in outage) | success (started in 2 s after) | p50 | p99 | p99 time to fail |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
		for _, r := range rs {
			fmt.Fprintf(w, "| %s | %d | %d | %.2f× | %d | %d | %d | %v | %.1f%% | %.1f%% | %.1f%% | %v | %v | %v |\n",
				r.Contender, r.Requests, r.Attempts, r.OutageAmplification(), r.PeakOutage, r.PeakAfter2s, r.ShedAfter, firstOK(r.FirstOK),
				pct(r.Successes, r.Requests), pct(r.OutageSuccess, r.OutageRequests), pct(r.AfterSuccess, r.AfterRequests),
				round(r.P50), round(r.P99), round(r.FailP99))
		}
		return
	}
	fmt.Fprintf(w, "\n%s: %d GETs at t=0, %v outage; capacity %d × %v; %s%s; %s\n\n",
		sc.Name, sc.N, sc.Outage, sc.Capacity, sc.Work, mode, ra, runsText(runs))
	fmt.Fprintln(w, "| contender | attempts | amplification | peak /100ms outage | peak /100ms after | success | p50 | p99 | done after | 503s shed after |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rs {
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

// replotCSV draws a scenario's chart from its CSV in dir, contenders in
// the order the file gives them.
func replotCSV(dir string, sc Scenario) error {
	f, err := os.Open(filepath.Join(dir, sc.Name+".csv"))
	if err != nil {
		return err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return err
	}
	var rs []Result
	for _, row := range rows[1:] {
		v, err := strconv.ParseInt(row[2], 10, 64)
		if err != nil {
			return fmt.Errorf("%s: %w", sc.Name, err)
		}
		if len(rs) == 0 || rs[len(rs)-1].Contender != row[0] {
			rs = append(rs, Result{Contender: row[0]})
		}
		rs[len(rs)-1].Series = append(rs[len(rs)-1].Series, v)
	}
	return drawChart(filepath.Join(dir, sc.Name+".png"), sc, rs)
}

func writeCSV(path string, rs []Result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"contender", "t_ms", "attempts"})
	for _, r := range rs {
		for i, v := range r.Series {
			w.Write([]string{r.Contender, itoa(int64(i) * int64(bucket/time.Millisecond)), itoa(v)})
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeSummary writes a scenario's figures per contender, one row each:
// the requests and attempts, the success of all requests, of those
// started in the outage and in the 2 s after it, and the 503s the server
// shed after it.
func writeSummary(path string, rs []Result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"contender", "requests", "attempts", "successes", "outage_requests", "outage_successes",
		"after2s_requests", "after2s_successes", "after2s_success_pct", "shed_after", "first_ok_ms"})
	for _, r := range rs {
		w.Write([]string{r.Contender, strconv.Itoa(r.Requests), itoa(r.Attempts), strconv.Itoa(r.Successes),
			strconv.Itoa(r.OutageRequests), strconv.Itoa(r.OutageSuccess), strconv.Itoa(r.AfterRequests),
			strconv.Itoa(r.AfterSuccess), strconv.FormatFloat(pct(r.AfterSuccess, r.AfterRequests), 'f', 1, 64),
			itoa(r.ShedAfter), itoa(max(r.FirstOK.Milliseconds(), -1))})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
